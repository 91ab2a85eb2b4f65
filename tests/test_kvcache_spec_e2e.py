"""examples/spec_e2e.py at its tiny size on the CPU (the torch path of attention_with_kvcache and of
rejection_sample): the cached decode path is the full-sequence model, speculative decoding keeps every
request's tokens and lengths consistent, and the emitted tokens follow the target's law by the G-test
while the draft's own samples (the control) are rejected by the same test."""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from flashproof.fuzz.sampler_stat import ALPHA, MIN_POWER, power_at
from flashproof.fuzz.tolerance import agree, magnitudes

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "spec_e2e.py")
_spec = importlib.util.spec_from_file_location("spec_e2e", _PATH)
e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(e2e)


@pytest.fixture(scope="module")
def models():
    tc, dc, n_corpus, steps, *_ = e2e.SIZES["tiny"]
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    data = e2e.corpus(n_corpus, tc.vocab, gen)
    target = e2e.train(e2e.LM(tc), data, steps, seq=24, batch=16, device="cpu", gen=gen)
    draft = e2e.train(e2e.LM(dc), data, max(1, steps // 4), seq=24, batch=16, device="cpu", gen=gen)
    return target, draft, data


def test_cached_steps_equal_the_full_sequence_model(models):
    """Feeding a sequence through the KV cache in ragged pieces (prefill 5, then 1, 3, 1 tokens) gives
    the full-sequence forward's probabilities (float64: an exactness check)."""
    target = models[0].double()
    try:
        ids = models[2][:10][None].repeat(2, 1)
        logits = target(ids)
        full = torch.softmax(logits, -1)
        cache = target.new_cache(2, 10, "cpu", torch.float64)
        got, start = [], 0
        for n in (5, 1, 3, 1):
            got.append(target.step(ids[:, start:start + n], cache, torch.full((2,), start)))
            start += n
        # two float64 evaluations of one function (not bitwise equal: the cached path's attention sums in
        # another order, 1e-16 apart), held to the tolerance module's agreement rule. The probabilities are
        # attention's out for q = the logits, k = v = the identity (scores = logits, one-hot values), so
        # ``magnitudes`` of that q, k, v gives the rule's M_out and S.
        B, N, V = logits.shape
        eye = torch.eye(V, dtype=logits.dtype).expand(B, 1, V, V)
        q = logits.detach()[:, None]                                              # (B, 1, N, V)
        lse = torch.logsumexp(q, -1)
        mags = magnitudes(q, eye, eye, torch.zeros_like(q), lse, 1.0)
        v = agree("out", torch.cat(got, 1), full, mags)
        assert v.ok, v
    finally:
        models[0].float()


def test_speculative_decode_keeps_requests_consistent(models):
    target, draft, data = models
    prompt = data[20:36].reshape(2, 8)
    gen = torch.Generator().manual_seed(3)
    r = e2e.decode(target, draft, prompt, 6, 3, dtype=torch.float32, gen=gen)
    assert bool((r.length >= 8 + 6).all())
    for b in range(2):
        L = int(r.length[b])
        assert bool((r.tokens[b, :L] >= 0).all() and (r.tokens[b, :L] < target.c.vocab).all())
        assert bool((r.tokens[b, L:] == -1).all())
        assert torch.equal(r.tokens[b, :8], prompt[b])
    assert 0 <= r.accepted <= r.examined <= 3 * r.cycles * 2


def test_emitted_tokens_follow_the_target_law_and_the_control_is_rejected(models):
    target, draft, data = models
    *_, m, L = e2e.SIZES["tiny"]
    gen = torch.Generator().manual_seed(5)
    prompt = data[:8]
    law = e2e.law_check(target, draft, prompt, L, 2, m, dtype=torch.float32, gen=gen)
    # the control can only be rejected if the G-test of m samples has the power to: sampler_stat's
    # power at m samples, from the exact laws of the L tokens under the target and under the draft
    exact = {name: {i: p for i, p in enumerate(e2e.target_law(lm, prompt, L, dtype=torch.float32).tolist()) if p > 0}
             for name, lm in (("target", target), ("draft", draft))}
    pw = power_at(exact["target"], exact["draft"], m)
    assert pw >= MIN_POWER, f"the G-test has power {pw:.3f} < {MIN_POWER} against the draft's law at m = {m}"
    assert law["speculative"]["p"] > ALPHA, law
    assert law["plain"]["p"] > ALPHA, law
    assert law["draft"]["p"] < ALPHA, law


def test_speed_table_times_every_k_in_rounds(models):
    """Every k (and k = 0) is timed once per round; medians lie in their ranges, the speed-up is the
    per-round ratio, and the formula is the page's at the measured α and c."""
    target, draft, data = models
    prompts = data[40:56].reshape(2, 8)
    gen = torch.Generator().manual_seed(7)
    t = e2e.speed_table(target, draft, prompts, 4, [1, 2], 2, dtype=torch.float32, gen=gen)
    assert [r["k"] for r in t["rows"]] == [0, 1, 2]
    base = t["rows"][0]["tokens_per_s_runs"]
    assert len(base) == 2
    assert t["c_lo"] <= t["c"] <= t["c_hi"]
    for r in t["rows"]:
        assert len(r["tokens_per_s_runs"]) == 2
        assert r["tokens_per_s_lo"] <= r["tokens_per_s"] <= r["tokens_per_s_hi"]
        if r["k"]:
            ratios = sorted(x / b for x, b in zip(r["tokens_per_s_runs"], base))
            assert (r["speedup_lo"], r["speedup_hi"]) == (ratios[0], ratios[-1])
            assert r["speedup_lo"] <= r["speedup"] <= r["speedup_hi"]
            a, k = r["alpha"], r["k"]
            assert 0 <= a <= 1
            e = (1 - a ** (k + 1)) / (1 - a) if a < 1 else k + 1
            assert r["formula"] == e / (k * t["c"] + 1)
    e2e.print_speed_table(t)


_PLOT = os.path.join(os.path.dirname(_PATH), "plot_spec_e2e.py")
_pspec = importlib.util.spec_from_file_location("plot_spec_e2e", _PLOT)
plot = importlib.util.module_from_spec(_pspec)
_pspec.loader.exec_module(plot)


def _result(spread=True):
    rows = [dict(k=0, tokens_per_s=100.0)]
    for k, (m, f) in enumerate([(1.2, 1.5), (1.9, 1.75), (1.8, 1.9)], start=1):
        r = dict(k=k, speedup=m, formula=f, alpha=0.7)
        if spread:
            r.update(speedup_lo=m - 0.1, speedup_hi=m + 0.2)
        rows.append(r)
    return dict(rows=rows, c=0.13, B=16, repeats=5 if spread else 1, dtype="torch.bfloat16")


def test_plot_finds_the_result_inside_a_curated_json_and_draws_every_k(tmp_path):
    import json
    import xml.etree.ElementTree as ET
    doc = {"date": "x", "extra": {"kvcache": {"rows": [{"B": 1}], "e2e": _result()}}}
    path = tmp_path / "curated.json"
    path.write_text(json.dumps(doc))
    out = tmp_path / "plot.svg"
    plot.main([str(path), "--out", str(out)])
    root = ET.fromstring(out.read_text())                              # well-formed SVG
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}circle")) == 3                     # the formula at k = 1, 2, 3
    bars = [e for e in root.findall(f"{ns}line") if e.get("stroke") == "#d62728"]
    assert len(bars) == 3                                            # each k's range
    assert [p.k for p in plot.points(_result(spread=False))] == [1, 2, 3]
    assert "no spec_e2e result" in _raises(lambda: plot.find_result({"rows": [{"B": 1}]}))


def _raises(fn) -> str:
    with pytest.raises(ValueError) as e:
        fn()
    return str(e.value)
