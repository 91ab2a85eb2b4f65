"""Speculative decoding end to end: two small decoder-only transformers, KV caches, batched verification.

    python examples/spec_e2e.py                    # GPU (bf16), ~1 min on an H200
    python examples/spec_e2e.py --tiny --device cpu  # seconds (the CPU test runs this size)

* Data: a corpus made here by a random order-2 Markov chain over V tokens (nothing downloaded).
* Target: an L_t-layer GQA transformer; draft: a 1-layer one; both trained briefly on the corpus with
  full-sequence causal attention (SDPA). Decoding never uses that path: every decode step, the draft's
  steps and the target's verify pass (k + 1 queries per request) attend through
  ``flashproof.kernels.kvcache.attention_with_kvcache`` over per-layer contiguous caches with ragged
  lengths (requests accept different numbers of drafts); acceptance is the batched
  ``flashproof.kernels.rejection_sample``. A rejected draft is rolled back by shortening the length:
  the cache past it is never read, and is overwritten by the next pass.
* Measured, per k = 1…8 against plain decoding (k = 0) at batch B: tokens/s, the acceptance rate α
  (accepted / examined drafts), the cost ratio c = t(draft step) / t(target step), and the speed-up
  beside (1 − α^{k+1}) / ((1 − α)(k·c + 1)). Every k is warmed up, then timed in ``--repeats``
  rounds that each run every k once (machine drift hits all k alike); the table gives medians and
  ranges, the JSON every run. ``examples/plot_spec_e2e.py`` draws measured against formula from it.
* Law: the first ``law_len`` tokens after a fixed prompt, from one speculative cycle (k = ``law_k``)
  continued by target decoding, against the exact target law of those sequences (every sequence scored
  by one prefill through the same call), by a G-test with cells pooled to E ≥ 5; plain target decoding
  beside it, and the draft's own samples as the control the test must reject.

Cache bookkeeping (per request, T tokens so far): the target's cache holds positions < T − 1 and each
pass feeds token T − 1 first (the verify pass: T − 1 and the k drafts, positions T − 1 … T + k − 1); the
draft's holds positions < T − 2 and its first step feeds T − 2 and T − 1 (two queries: after a cycle
that accepted every draft, its cache lacks the last draft), then one token per step.
"""
from __future__ import annotations

import argparse
import bisect
import json
import time
from typing import NamedTuple

import torch
import torch.nn.functional as F

from flashproof.bench.stats import Spread, spread
from flashproof.fuzz.sampler_stat import g_test_sequences
from flashproof.kernels import rejection_sample
from flashproof.kernels.kvcache import attention_with_kvcache


class Config(NamedTuple):
    vocab: int
    layers: int
    d_model: int
    heads_q: int
    heads_kv: int
    head_dim: int


class Cache(NamedTuple):
    """Per layer: k, v (B, Hkv, length, head_dim)."""

    k: list
    v: list


class Block(torch.nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.ln1, self.ln2 = torch.nn.LayerNorm(c.d_model), torch.nn.LayerNorm(c.d_model)
        self.qkv = torch.nn.Linear(c.d_model, (c.heads_q + 2 * c.heads_kv) * c.head_dim, bias=False)
        self.proj = torch.nn.Linear(c.heads_q * c.head_dim, c.d_model, bias=False)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(c.d_model, 4 * c.d_model), torch.nn.GELU(),
                                       torch.nn.Linear(4 * c.d_model, c.d_model))

    def heads(self, x):
        """x (B, N, d_model) → q (B, Hq, N, hd), k, v (B, Hkv, N, hd)."""
        c, (B, N, _) = self.c, x.shape
        qkv = self.qkv(self.ln1(x)).view(B, N, c.heads_q + 2 * c.heads_kv, c.head_dim).transpose(1, 2)
        return qkv.split([c.heads_q, c.heads_kv, c.heads_kv], dim=1)

    def finish(self, x, att):
        """att (B, Hq, N, hd) → the block's output (B, N, d_model)."""
        x = x + self.proj(att.transpose(1, 2).flatten(2))
        return x + self.mlp(self.ln2(x))


def rope_tables(pos, head_dim, dtype):
    """cos, sin (B, 1, N, hd/2) of the rotary angles pos · 10000^{−j/(hd/2)} for pos (B, N): computed
    once per step and shared by every layer's q and k."""
    half = head_dim // 2
    freq = 10000.0 ** (-torch.arange(half, device=pos.device, dtype=torch.float32) / half)
    ang = pos[:, None, :, None].float() * freq                                  # (B, 1, N, hd/2)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rope(x, cos, sin):
    """Rotary positions: x (B, H, N, hd) with each pair (x_j, x_{j+hd/2}) turned by the angle whose
    cos and sin ``rope_tables`` gave (relative positions; nothing is learned per absolute position)."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


class LM(torch.nn.Module):
    """A decoder-only transformer with rotary positions; ``forward`` trains on whole sequences,
    ``step`` decodes through the KV cache."""

    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.tok = torch.nn.Embedding(c.vocab, c.d_model)
        self.blocks = torch.nn.ModuleList(Block(c) for _ in range(c.layers))
        self.head = torch.nn.Linear(c.d_model, c.vocab)

    def forward(self, ids):
        """ids (B, N) → logits (B, N, V), causal full-sequence attention (training only)."""
        x = self.tok(ids)
        pos = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape)
        cos, sin = rope_tables(pos, self.c.head_dim, x.dtype)
        g = self.c.heads_q // self.c.heads_kv
        for blk in self.blocks:
            q, k, v = blk.heads(x)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            att = F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), is_causal=True)
            x = blk.finish(x, att)
        return self.head(x)

    def new_cache(self, B, length, device, dtype) -> Cache:
        c = self.c
        shape = (B, c.heads_kv, length, c.head_dim)
        return Cache([torch.zeros(shape, device=device, dtype=dtype) for _ in self.blocks],
                     [torch.zeros(shape, device=device, dtype=dtype) for _ in self.blocks])

    def step(self, ids, cache: Cache, start):
        """Feed ids (B, Nq) at positions start[b] … start[b] + Nq − 1 (start (B,) int64): their K/V go into
        the cache, they attend to positions < start[b] + Nq. Returns probabilities (B, Nq, V) float32."""
        B, Nq = ids.shape
        pos = start[:, None] + torch.arange(Nq, device=ids.device)                      # (B, Nq)
        x = self.tok(ids)
        lens = (start + Nq).to(torch.int32)
        where = pos[:, None, :, None].expand(B, self.c.heads_kv, Nq, self.c.head_dim)  # (B, Hkv, Nq, hd)
        cos, sin = rope_tables(pos, self.c.head_dim, x.dtype)
        for blk, kc, vc in zip(self.blocks, cache.k, cache.v):
            q, k, v = blk.heads(x)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            kc.scatter_(2, where, k)
            vc.scatter_(2, where, v)
            # the first Triton config, untuned: these small heads are launch-bound, and tuning would compile
            # every config for each new verify width inside the run
            x = blk.finish(x, attention_with_kvcache(q, kc, vc, cache_seqlens=lens, tuning="first"))
        logits = self.head(x)
        return torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)


# ----------------------------------------------------------------------------------- data, training

def corpus(n: int, vocab: int, gen: torch.Generator) -> torch.Tensor:
    """n tokens of a random order-2 Markov chain (Dirichlet(0.3) transition rows: peaked, learnable)."""
    trans = torch.distributions.Dirichlet(torch.full((vocab,), 0.3)).sample((vocab, vocab)).double()
    cdf = trans.cumsum(-1).tolist()
    seq = [0, 1]
    for u in torch.rand(n, generator=gen, dtype=torch.float64).tolist():
        seq.append(min(bisect.bisect_right(cdf[seq[-2]][seq[-1]], u * cdf[seq[-2]][seq[-1]][-1]), vocab - 1))
    return torch.tensor(seq)


def train(model: LM, data, steps, *, seq, batch, device, gen):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        i = torch.randint(0, len(data) - seq - 1, (batch,), generator=gen)
        chunk = torch.stack([data[j:j + seq + 1] for j in i.tolist()]).to(device)
        loss = F.cross_entropy(model(chunk[:, :-1]).flatten(0, 1), chunk[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


# ----------------------------------------------------------------------------------- decoding

class Run(NamedTuple):
    tokens: torch.Tensor   # (B, max_len) int64, −1 past each request's end
    length: torch.Tensor   # (B,) tokens per request (prompt included)
    seconds: float
    accepted: int          # drafts accepted, summed over requests and cycles
    examined: int          # drafts examined (accepted, or the first rejected of a cycle)
    cycles: int


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _sample(p, gen):
    """p (B, V) → (B,) one draw per row."""
    return torch.multinomial(p, 1, generator=gen)[:, 0]


@torch.no_grad()
def decode(target: LM, draft: LM | None, prompt, n_new, k, *, dtype, gen) -> Run:
    """Every request of prompt (B, P) (P ≥ 2) continued by ≥ n_new tokens: plain target decoding for
    k = 0, else speculative cycles of k drafts (B requests in each pass, ragged lengths)."""
    B, P = prompt.shape
    dev = prompt.device
    cap = P + (k + 1) * n_new + k + 2        # the most tokens a request can reach before the slowest is done
    toks = torch.full((B, cap), -1, dtype=torch.long, device=dev)
    toks[:, :P] = prompt
    T = torch.full((B,), P, dtype=torch.long, device=dev)
    rows = torch.arange(B, device=dev)
    tc = target.new_cache(B, cap, dev, dtype)
    target.step(prompt[:, :-1], tc, torch.zeros_like(T))           # prefill: positions < T − 1
    if k:
        dc = draft.new_cache(B, cap, dev, dtype)
        draft.step(prompt[:, :-2], dc, torch.zeros_like(T))        # positions < T − 2
    acc = exam = torch.zeros((), dtype=torch.long, device=dev)        # summed on the device: no sync per cycle
    cycles = 0
    _sync(dev)
    t0 = time.perf_counter()
    if not k:                        # every request grows by one token a step: n_new steps, no host read
        for _ in range(n_new):
            x = _sample(target.step(toks[rows, T - 1][:, None], tc, T - 1)[:, 0], gen)
            toks[rows, T] = x
            T = T + 1
        _sync(dev)
        return Run(toks, T, time.perf_counter() - t0, 0, 0, n_new)
    while int(T.min()) < P + n_new:  # the one host read of a cycle
        last = toks[rows, T - 1][:, None]                               # (B, 1)
        ids, pd = [], []
        feed, start = toks[rows[:, None], (T - 2)[:, None] + torch.arange(2, device=dev)], T - 2
        for _ in range(k):
            p = draft.step(feed, dc, start)[:, -1]                         # (B, V)
            x = _sample(p, gen)
            ids.append(x)
            pd.append(p)
            start, feed = start + feed.shape[1], x[:, None]
        drafts = torch.stack(ids, 1)                                       # (B, k)
        pt = target.step(torch.cat([last, drafts], 1), tc, T - 1)          # (B, k + 1, V) one verify pass
        res = rejection_sample(drafts, torch.stack(pd, 1), pt[:, :k].contiguous(), pt[:, k].contiguous(),
                               generator=gen)
        n = res.num_accepted                                               # (B,)
        emit = torch.arange(k + 1, device=dev)[None, :] <= n[:, None]      # (B, k + 1): accepted + one more
        cols = T[:, None] + torch.arange(k + 1, device=dev)                # positions ≥ T: all still −1
        toks.scatter_(1, cols, torch.where(emit, res.tokens, -1))          # (no boolean index: no host sync)
        T = T + n + 1
        acc = acc + n.sum()
        exam = exam + torch.clamp(n + 1, max=k).sum()
        cycles += 1
    _sync(dev)
    seconds = time.perf_counter() - t0
    return Run(toks, T, seconds, int(acc), int(exam), cycles)


@torch.no_grad()
def step_cost(model: LM, B, length, *, dtype, device, reps=20, blocks=5) -> Spread:
    """Seconds of one decode step (Nq = 1) at batch B with ``length`` cached positions: ``blocks``
    blocks of ``reps`` steps after a warm-up, the median block and the range."""
    cache = model.new_cache(B, length + 1, device, dtype)
    ids = torch.zeros(B, 1, dtype=torch.long, device=device)
    start = torch.full((B,), length, dtype=torch.long, device=device)
    for _ in range(3):
        model.step(ids, cache, start)
    _sync(device)
    samples = []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(reps):
            model.step(ids, cache, start)
        _sync(device)
        samples.append((time.perf_counter() - t0) / reps)
    return spread(samples)


# ----------------------------------------------------------------------------------- the law

class GTest(NamedTuple):
    g: float
    df: int
    p: float


def g_test(samples, law) -> GTest:
    """samples (m, L) tokens against law (V^L,) over sequences in base-V order: the fuzzer's G-test
    (``flashproof.fuzz.sampler_stat.g_test_sequences``: cells with expected count < 5 pooled, exact p)."""
    g, p, df = g_test_sequences(samples, law)
    return GTest(g, df, p)


@torch.no_grad()
def target_law(target: LM, prompt, L, *, dtype) -> torch.Tensor:
    """The exact law (V^L,) float64 of the L tokens after ``prompt`` (P,): all V^L continuations scored
    by one prefill through the cache call (Nq = P + L)."""
    V, dev = target.c.vocab, prompt.device
    seqs = torch.cartesian_prod(*[torch.arange(V, device=dev)] * L).reshape(-1, L)      # (V^L, L) base-V order
    full = torch.cat([prompt.expand(len(seqs), -1), seqs], 1)
    P = prompt.shape[0]
    logp = torch.zeros(len(seqs), dtype=torch.float64, device=dev)
    for chunk in torch.arange(len(seqs), device=dev).split(8192):
        p = target.step(full[chunk, :-1], target.new_cache(len(chunk), P + L, dev, dtype),
                        torch.zeros(len(chunk), dtype=torch.long, device=dev))           # (n, P + L − 1, V)
        rows = p[:, P - 1:].double().gather(2, full[chunk, P:, None])[..., 0]            # (n, L)
        logp[chunk] = rows.log().sum(1)
    law = logp.exp().cpu()
    return law / law.sum()


@torch.no_grad()
def law_check(target, draft, prompt, L, k, m, *, dtype, gen) -> dict:
    """G-tests of the first L tokens after ``prompt`` (P,): speculative (one cycle of k drafts, then
    target decoding), plain target decoding, and the draft alone (the control: must be rejected)."""
    law = target_law(target, prompt, L, dtype=dtype)
    batch = prompt.expand(m, -1).contiguous()
    P = prompt.shape[0]
    first = decode(target, draft, batch, 1, k, dtype=dtype, gen=gen)      # one cycle: ≥ 1 token each
    spec = first.tokens[:, P:P + L]
    if bool((spec < 0).any()):                                             # shorter than L: the target continues
        spec = _continue(target, first.tokens, first.length, P + L, dtype=dtype, gen=gen)[:, P:P + L]
    plain = decode(target, None, batch, L, 0, dtype=dtype, gen=gen).tokens[:, P:P + L]
    own = decode(draft, None, batch, L, 0, dtype=dtype, gen=gen).tokens[:, P:P + L]
    return {name: g_test(s, law)._asdict() for name, s in (("speculative", spec), ("plain", plain), ("draft", own))}


@torch.no_grad()
def _continue(target, toks, T, upto, *, dtype, gen):
    """Extend each request of toks (B, max_len) with T (B,) tokens by target decoding until ``upto``
    tokens (re-prefills the cache from the tokens; requests already long enough are left as they are)."""
    B, dev = toks.shape[0], toks.device
    toks = toks.clone()
    rows = torch.arange(B, device=dev)
    cache = target.new_cache(B, upto, dev, dtype)
    n0 = int(T.min())
    target.step(toks[:, :n0 - 1].clamp_min(0), cache, torch.zeros_like(T))
    for t in range(n0, upto):
        p = target.step(toks[:, t - 1:t].clamp_min(0), cache, torch.full_like(T, t - 1))[:, 0]
        x = _sample(p, gen)
        toks[rows, t] = torch.where(T > t, toks[rows, t], x)
    return toks


# ----------------------------------------------------------------------------------- main

SIZES = {  # (target config, draft config, corpus tokens, train steps, B, new tokens, law samples, law length)
    "gpu": (Config(16, 8, 512, 8, 2, 64), Config(16, 1, 128, 2, 1, 64), 200_000, 300, 16, 128, 50_000, 3),
    "tiny": (Config(8, 2, 32, 4, 2, 8), Config(8, 1, 16, 2, 1, 8), 2_000, 30, 2, 8, 400, 2),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="the CPU test's size (seconds)")
    ap.add_argument("--ks", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--law-k", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=None,
                    help="rounds of timing, each k once per round (default 5 at the GPU size, 2 with --tiny)")
    ap.add_argument("--out", default=None, help="write the table and the law check as JSON here")
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    if a.repeats is None:
        a.repeats = 2 if a.tiny else 5
    if a.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {a.repeats}")
    dev = a.device
    dtype = torch.bfloat16 if torch.device(dev).type == "cuda" else torch.float32
    tc, dc, n_corpus, steps, B, n_new, m, L = SIZES["tiny" if a.tiny else "gpu"]
    torch.manual_seed(0)
    gen_cpu = torch.Generator().manual_seed(0)
    data = corpus(n_corpus, tc.vocab, gen_cpu)
    seq = 24 if a.tiny else 128   # rotary positions: decoding runs past the trained length
    target = train(LM(tc).to(dev), data, steps, seq=seq, batch=32, device=dev, gen=gen_cpu).to(dtype)
    draft = train(LM(dc).to(dev), data, max(1, steps // 4), seq=seq, batch=32, device=dev, gen=gen_cpu).to(dtype)
    gen = torch.Generator(device=dev).manual_seed(1)
    prompt = data[:8].to(dev)

    law = law_check(target, draft, prompt, L, a.law_k, m, dtype=dtype, gen=gen)
    print(f"law of the {L} tokens after the prompt vs the exact target law (G-test, m = {m}):")
    for name, r in law.items():
        print(f"  {name:<12} G = {r['g']:9.1f} on {r['df']:5d} df, p = {r['p']:.3g}")

    prompts = data[8:8 + 8 * B].reshape(B, 8).to(dev)
    ks = [int(x) for x in a.ks.split(",")]
    table = speed_table(target, draft, prompts, n_new, ks, a.repeats, dtype=dtype, gen=gen)
    print_speed_table(table)
    out = dict(law=law, c=table["c"], c_lo=table["c_lo"], c_hi=table["c_hi"], t_target=table["t_target"],
               t_draft=table["t_draft"], B=B, n_new=n_new, repeats=a.repeats, rows=table["rows"], device=dev,
               dtype=str(dtype), seconds=round(time.perf_counter() - t_start, 1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return out


def speed_table(target, draft, prompts, n_new, ks, repeats, *, dtype, gen) -> dict:
    """Tokens/s of plain decoding (k = 0) and of speculation at each k in ``ks``: one untimed round
    (compiles: new verify widths and cache capacities), then ``repeats`` rounds, each timing every k once in turn (so drift
    of the machine hits all k alike); per k the median tokens/s and range, the speed-up as the median
    (and range) of each round's tokens/s over that round's k = 0, α over all rounds, and the formula
    (1 − α^{k+1}) / ((1 − α)(k·c + 1)) with c = t(draft step) / t(target step), medians of 5 blocks."""
    B, P = prompts.shape
    dev = prompts.device
    t_target = step_cost(target, B, P + n_new // 2, dtype=dtype, device=dev)
    t_draft = step_cost(draft, B, P + n_new // 2, dtype=dtype, device=dev)
    c = t_draft.median / t_target.median
    all_k = [0] + list(ks)
    for k in all_k:   # warm-up: one untimed round of the same size (compiles: cache capacities and widths as timed)
        decode(target, draft if k else None, prompts, n_new, k, dtype=dtype, gen=gen)
    runs = {k: [] for k in all_k}
    for _ in range(repeats):
        for k in all_k:
            runs[k].append(decode(target, draft if k else None, prompts, n_new, k, dtype=dtype, gen=gen))

    def tps(r):
        return float((r.length - P).sum()) / r.seconds
    base = [tps(r) for r in runs[0]]
    b = spread(base)
    rows = [dict(k=0, tokens_per_s=b.median, tokens_per_s_lo=b.lo, tokens_per_s_hi=b.hi, tokens_per_s_runs=base)]
    for k in ks:
        t = [tps(r) for r in runs[k]]
        tk = spread(t)
        ratio = spread([x / b for x, b in zip(t, base)])
        acc, exam = sum(r.accepted for r in runs[k]), sum(r.examined for r in runs[k])
        alpha = acc / max(exam, 1)
        e = (1 - alpha ** (k + 1)) / (1 - alpha) if alpha < 1 else k + 1
        per_cycle = sum(float((r.length - P).sum()) for r in runs[k]) / (sum(r.cycles for r in runs[k]) * B)
        rows.append(dict(k=k, tokens_per_s=tk.median, tokens_per_s_lo=tk.lo, tokens_per_s_hi=tk.hi,
                         tokens_per_s_runs=t, speedup=ratio.median, speedup_lo=ratio.lo, speedup_hi=ratio.hi,
                         alpha=alpha, tokens_per_cycle=per_cycle, formula=e / (k * c + 1)))
    return dict(rows=rows, c=c, c_lo=t_draft.lo / t_target.hi, c_hi=t_draft.hi / t_target.lo,
                t_target=t_target.median, t_draft=t_draft.median, B=B, n_new=n_new, repeats=repeats, dtype=str(dtype))


def print_speed_table(t: dict):
    print(f"\nbatch {t['B']}, {t['n_new']} new tokens per request, {t['dtype']}, {t['repeats']} rounds; "
          f"target step {1e3 * t['t_target']:.3f} ms, draft step {1e3 * t['t_draft']:.3f} ms, "
          f"c = {t['c']:.3f} ({t['c_lo']:.3f}–{t['c_hi']:.3f})")
    print("| k | tokens/s (median, range) | speed-up (median, range) | α | tokens/cycle | "
          "formula (1−α^(k+1))/((1−α)(kc+1)) |")
    print("|---|---|---|---|---|---|")
    for r in t["rows"]:
        tok = f"{r['tokens_per_s']:.0f} ({r['tokens_per_s_lo']:.0f}–{r['tokens_per_s_hi']:.0f})"
        if r["k"] == 0:
            print(f"| 0 | {tok} | 1.00 | – | 1 | – |")
            continue
        print(f"| {r['k']} | {tok} | {r['speedup']:.2f} ({r['speedup_lo']:.2f}–{r['speedup_hi']:.2f}) | "
              f"{r['alpha']:.3f} | {r['tokens_per_cycle']:.2f} | {r['formula']:.2f} |")
    print("(the formula counts a verify pass as one target step and the sampler as free; the cost of each is"
          " in the step times above)")


if __name__ == "__main__":
    main()
