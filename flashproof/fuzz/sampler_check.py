"""The exact sampler check: injected uniforms ⇒ the verified reference's tokens, bit for bit.

``sampler_specs()`` draws a ``SamplerSpec`` (plain values; hypothesis shrinks it toward B = 1,
K = 0, V = 1, fp32, every family off); ``build_batch(spec)`` makes the tensors. Families (DESIGN.md,
"Adversarial inputs every sampler test here must include"), each a boolean switch:

==============  ==============================================================================
u_edges         accept/residual/bonus uniforms exactly 0.0 or 1 − 2⁻²⁴ (a p = 0 token must
                never be emitted at u = 0)
draft_zero      p_draft(x) = 0 at the drafted token
target_zero     p_target(x) = 0 at the drafted token (with u = 0 a "u·q ≤ p" test accepts it)
u_boundary      accept uniforms at the acceptance threshold p_target(x)/p_draft(x) or one float64
                step below it (where a test evaluated in lower precision decides otherwise)
equal           p_target = p_draft bitwise (empty residual)
disjoint        p_target and p_draft on disjoint halves of the vocabulary
sentinel        token V − 1 only in the bonus row (emitted only after full acceptance)
one_hot         p_draft = None (n-gram / greedy drafters: a point mass on the draft)
greedy          some rows at temperature 0 (only for samplers declaring ``greedy``)
ragged          num_draft_tokens ∈ [0, K] per request, request 0 with 0 drafts; padded draft
                entries hold garbage (−7 ids, a wrong row) that must never be read
==============  ==============================================================================

plus a zero fraction of each row (0, 0.3, 0.8), vocabularies 1, 2, 3, 8, 17, 8191, 8192, 8193,
151936 and row dtypes fp32, fp64, fp16, bf16. ``check_batch`` compares every request's tokens and
accept count with ``verified.speculative.verify``; ``run_exact`` is the campaign.
"""
from __future__ import annotations

import time
from typing import NamedTuple

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, seed as hyp_seed, settings, strategies as st

__all__ = ["SamplerSpec", "sampler_specs", "build_batch", "check_batch", "run_exact", "VOCABS"]

VOCABS = (1, 2, 3, 8, 17, 8191, 8192, 8193, 151936)
_DTYPES = {"fp32": torch.float32, "fp64": torch.float64, "fp16": torch.float16, "bf16": torch.bfloat16}
U_TOP = 1 - 2.0 ** -24
FLAGS = ("u_edges", "draft_zero", "target_zero", "u_boundary", "equal", "disjoint", "sentinel", "one_hot", "greedy",
         "ragged")


class SamplerSpec(NamedTuple):
    seed: int = 0
    batch: int = 1
    k: int = 0
    vocab: int = 1
    zeros: float = 0.0
    dtype: str = "fp32"
    u_edges: bool = False
    draft_zero: bool = False
    target_zero: bool = False
    u_boundary: bool = False
    equal: bool = False
    disjoint: bool = False
    sentinel: bool = False
    one_hot: bool = False
    greedy: bool = False
    ragged: bool = False

    def describe(self) -> str:
        d = SamplerSpec()
        return "SamplerSpec(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields
                                          if getattr(self, f) != getattr(d, f) or f in ("batch", "k", "vocab")) + ")"


class Batch(NamedTuple):
    draft_token_ids: torch.Tensor   # (B, K) int64
    p_draft: torch.Tensor | None    # (B, K, V)
    p_target: torch.Tensor          # (B, K, V)
    p_bonus: torch.Tensor           # (B, V)
    num_draft_tokens: torch.Tensor  # (B,)
    uniforms: object                # SamplerUniforms
    greedy: torch.Tensor            # (B,) bool


#: How p_target and p_draft relate, one at a time: the last three make the residual p_target itself
#: or empty, so they are drawn in half of the batches, not (as three independent coins) in 7/8 of
#: them — where a sampler drawing from p_target on rejection escaped 40 batches on half the seeds.
RELATIONS = ("independent", "independent", "independent", "equal", "disjoint", "sentinel")


def sampler_specs(*, max_batch: int = 8, max_k: int = 4, greedy: bool = False) -> st.SearchStrategy:
    """SamplerSpecs; ``greedy`` False keeps the greedy family off (the sampler does not take it).
    The row relation is one of ``RELATIONS``; every other family is a coin (shrinking to off)."""
    return _specs(max_batch, max_k, greedy)


@st.composite
def _specs(draw, max_batch, max_k, greedy):
    relation = draw(st.sampled_from(RELATIONS))
    coins = {f: draw(st.booleans()) for f in FLAGS if f not in ("equal", "disjoint", "sentinel", "greedy")}
    vocab = draw(st.sampled_from(VOCABS))
    batch = draw(st.integers(1, max_batch if vocab < 10_000 else min(2, max_batch)))  # the reference reads every row
    return SamplerSpec(seed=draw(st.integers(0, 2 ** 31)), batch=batch, k=draw(st.integers(0, max_k)), vocab=vocab,
                       zeros=draw(st.sampled_from([0.0, 0.3, 0.8])), dtype=draw(st.sampled_from(list(_DTYPES))),
                       equal=relation == "equal", disjoint=relation == "disjoint", sentinel=relation == "sentinel",
                       greedy=greedy and draw(st.booleans()), **coins)


def _rows(g, shape, V, zeros):
    logits = torch.randn(*shape, V, generator=g, dtype=torch.float64) * 3
    if zeros:
        logits[torch.rand(*shape, V, generator=g, dtype=torch.float64) < zeros] = float("-inf")
        logits[..., 0] = torch.where(torch.isinf(logits).all(-1), 0.0, logits[..., 0])
    return torch.softmax(logits, -1)


def _normalise(x, fallback: int):
    s = x.sum(-1, keepdim=True)
    hot = torch.zeros_like(x)
    hot[..., fallback] = 1
    return torch.where(s > 0, x / torch.where(s > 0, s, torch.ones_like(s)), hot)


def build_batch(spec: SamplerSpec) -> Batch:
    """The tensors of ``spec`` (CPU), deterministic in ``spec.seed``."""
    from flashproof.kernels.sampler import SamplerUniforms

    g = torch.Generator().manual_seed(spec.seed)
    B, K, V = spec.batch, spec.k, spec.vocab
    pt, pd, pb = _rows(g, (B, K), V, spec.zeros), _rows(g, (B, K), V, spec.zeros), _rows(g, (B,), V, spec.zeros)
    if spec.disjoint and V > 1:
        pt[..., V // 2:], pd[..., :V // 2] = 0, 0
        pt, pd = _normalise(pt, 0), _normalise(pd, V - 1)
    if spec.equal:
        pd = pt.clone()
    if spec.sentinel and V > 1:
        pt[..., V - 1] = 0
        pt = _normalise(pt, 0)
        pd = pt.clone()
        pb = torch.zeros(B, V, dtype=torch.float64)
        pb[:, V - 1] = 1
    ids = torch.multinomial(pd.reshape(-1, V).float(), 1, generator=g).reshape(B, K) if K else \
        torch.zeros(B, 0, dtype=torch.int64)
    at = (torch.arange(B)[:, None], torch.arange(K)[None, :], ids)
    if spec.draft_zero and K:
        pd[at] = 0
        pd = _normalise(pd, 0)
    if spec.target_zero and K:
        pt[at] = 0
        pt = _normalise(pt, 0)
    counts = torch.randint(0, K + 1, (B,), generator=g) if spec.ragged else torch.full((B,), K)
    if spec.ragged and B > 1:
        counts[0] = 0
    if spec.ragged and K:  # padded entries: garbage a correct sampler never reads
        pad = torch.arange(K)[None, :] >= counts[:, None]
        ids = torch.where(pad, torch.full_like(ids, -7), ids)
        pt = torch.where(pad[..., None], torch.full_like(pt, 0.5), pt)
    acc, res, bon = (torch.rand(B, K, generator=g, dtype=torch.float64), torch.rand(B, generator=g, dtype=torch.float64),
                     torch.rand(B, generator=g, dtype=torch.float64))
    if spec.u_edges:
        pick = torch.rand(B, K, generator=g)
        acc = torch.where(pick < 0.3, 0.0, torch.where(pick < 0.6, U_TOP, acc))
        res = torch.where(torch.rand(B, generator=g) < 0.5, 0.0, U_TOP)
        bon = torch.where(torch.rand(B, generator=g) < 0.5, 0.0, U_TOP)
    greedy = torch.rand(B, generator=g) < 0.5 if spec.greedy else torch.zeros(B, dtype=torch.bool)
    dt = _DTYPES[spec.dtype]
    pt, pd, pb = pt.to(dt), pd.to(dt), pb.to(dt)
    if spec.u_boundary and K:
        safe = ids.clamp(0, V - 1)
        px = pt.double().gather(2, safe[..., None])[..., 0]
        qx = torch.ones_like(px) if spec.one_hot else pd.double().gather(2, safe[..., None])[..., 0]
        ratio = torch.where(qx > 0, px / torch.where(qx > 0, qx, torch.ones_like(qx)), torch.full_like(px, 2.0))
        below = torch.nextafter(ratio, torch.zeros_like(ratio))
        edge = torch.where(torch.rand(B, K, generator=g) < 0.5, below, ratio)
        acc = torch.where(ratio < 1, edge, acc)
    return Batch(ids, None if spec.one_hot else pd, pt, pb, counts, SamplerUniforms(acc, res, bon), greedy)


class SamplerDeviation(NamedTuple):
    sampler: str
    spec: SamplerSpec
    request: int
    got: tuple
    expected: tuple
    reason: str        # "tokens" or "error"
    note: str = ""

    def reproducer(self) -> str:
        what = (f"request {self.request}: got tokens {self.got}, the reference emits {self.expected}"
                if self.reason == "tokens" else f"raised {self.note}")
        return (f"[{self.sampler}] {what}; rebuild: flashproof.fuzz.sampler_check.build_batch({self.spec.describe()})")

    def as_dict(self) -> dict:
        d = self._asdict()
        d["spec"] = self.spec._asdict()
        d["reproducer"] = self.reproducer()
        return d


def _reference(batch: Batch, b: int, spec: SamplerSpec):
    from flashproof.kernels.sampler.api import row_sum_tol
    from flashproof.verified.speculative import CycleUniforms, verify

    k = int(batch.num_draft_tokens[b])
    rows_t = batch.p_target[b, :k].double().tolist() + [batch.p_bonus[b].double().tolist()]
    rows_d = None if batch.p_draft is None else batch.p_draft[b, :k].double().tolist()
    u = batch.uniforms
    uni = CycleUniforms(u.accept[b, :k].tolist(), float(u.residual[b]), float(u.bonus[b]))
    r = verify(batch.draft_token_ids[b, :k].tolist(), rows_t, rows_d, uni, greedy=bool(batch.greedy[b]),
               sum_tol=row_sum_tol(batch.p_target.dtype))
    return tuple(r.tokens), r.n_accepted


def check_batch(target, spec: SamplerSpec, device: str = "cpu") -> list:
    """Deviations of ``target`` (a ``samplers.SamplerTarget``) on ``spec``: [] when every request's
    tokens equal the reference's."""
    batch = build_batch(spec)
    mv = lambda t: None if t is None else t.to(device)  # noqa: E731
    kw = dict(num_draft_tokens=mv(batch.num_draft_tokens), uniforms=type(batch.uniforms)(*(mv(t) for t in batch.uniforms)))
    if target.greedy:
        kw["greedy"] = mv(batch.greedy)
    try:
        r = target.fn(mv(batch.draft_token_ids), mv(batch.p_draft), mv(batch.p_target), mv(batch.p_bonus), **kw)
        tokens, n_acc = (t.detach().cpu() for t in (r[0], r[1]))
    except Exception as e:  # the sampler raised on a valid batch: a finding
        return [SamplerDeviation(target.name, spec, -1, (), (), "error", f"{type(e).__name__}: {e}"[:300])]
    B, K = batch.draft_token_ids.shape
    for b in range(B):
        want, n = _reference(batch, b, spec)
        row = tokens[b].tolist() if tokens.dim() == 2 and tokens.shape[1] == K + 1 else None
        got_n = int(n_acc[b]) if n_acc.numel() == B else None
        got = tuple(row[:len(want)]) if row is not None else ()
        if row is None or got_n != n or got != want or any(t != -1 for t in row[len(want):]):
            return [SamplerDeviation(target.name, spec, b, tuple(row or ()), want + (-1,) * (K + 1 - len(want)),
                                     "tokens", f"num_accepted {got_n}, reference {n}")]
    return []


class _Found(Exception):
    pass


class _OutOfTime(BaseException):
    pass


class _Harness(BaseException):
    """The check itself failed (or a negative control raised): not an ``Exception``, so hypothesis
    does not shrink it as a finding; the run ends with ``harness_error``."""


#: Search rounds (seeds seed, seed + 1, …) of ``budget`` batches each: a batch costs milliseconds,
#: and at 40 batches a float32 accept test escaped on most seeds.
ROUNDS = 4


def run_exact(target, *, device: str = "cpu", budget: int = 40, seed: int = 0, seconds: float | None = None,
              repro_dir=None, max_batch: int = 8, max_k: int = 4, rounds: int = ROUNDS) -> dict:
    """``rounds`` hypothesis searches of ``budget`` batches; the first deviating batch is shrunk and
    reported. A negative control (``target.control``) must deviate in its tokens: its summary then
    has ``caught`` True and no deviations; one that escapes is a harness error (the check is too
    weak), never a pass, and so is one that raises (an error shows nothing about the check). An
    exception of the check's own code (the batch, the reference, the comparison) is a harness error,
    never a deviation of the sampler."""
    t0 = time.monotonic()
    deadline = float("inf") if seconds is None else t0 + seconds
    seen, stats = {}, {"examples": 0, "cut": False}

    def prop(spec):
        devs = seen.get(spec)
        if devs is None:
            if time.monotonic() > deadline:
                stats["cut"] = True
                raise _OutOfTime()
            try:  # the sampler's own exceptions are caught inside check_batch: what escapes is ours
                devs = seen[spec] = check_batch(target, spec, device)
            except Exception as e:
                raise _Harness(f"{type(e).__name__}: {e} while checking {spec.describe()}"[:600]) from None
            stats["examples"] += 1
        if target.control and any(d.reason == "error" for d in devs):
            raise _Harness(f"negative control {target.name} raised {devs[0].note} on {spec.describe()}: only a "
                           "token deviation catches a control")
        if devs:
            raise _Found(devs)

    test = settings(max_examples=budget, deadline=None, database=None, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                    phases=(Phase.explicit, Phase.generate, Phase.shrink))(
        given(sampler_specs(max_batch=max_batch, max_k=max_k, greedy=target.greedy))(prop))
    from .campaign import _no_local_constants

    found, harness = [], ""
    for r in range(rounds):
        try:
            with _no_local_constants():  # the draws depend on the seed only, not on what the process imported
                hyp_seed(seed + r)(test)()
        except _Found as e:
            found = e.args[0]
        except _OutOfTime:
            pass
        except _Harness as e:
            harness = str(e)
        if found or stats["cut"] or harness:
            break
    summary = {"sampler": target.name, "doc": target.doc, "mode": "exact", "device": device, "budget": budget,
               "seed": seed, "examples": stats["examples"], "complete": not stats["cut"] and not harness,
               "control": target.control, "deviations": [d.as_dict() for d in found], "harness_error": harness,
               "notes": []}
    if found and repro_dir is not None and not target.control:
        summary["deviations"][0]["script"] = write_script(found[0], target.name, repro_dir, device)
    if target.control:
        summary["caught"] = bool(found)
        summary["caught_by"] = [d["reproducer"] for d in summary["deviations"]]
        summary["deviations"] = []
        if not found and not harness:
            summary["harness_error"] = (f"negative control {target.name} ({target.doc}) escaped {stats['examples']} "
                                        "batches: the exact check is too weak")
    summary["passed"] = summary["complete"] and not summary["deviations"] and not summary["harness_error"]
    summary["detail"] = (f"{stats['examples']} batches, injected uniforms, tokens compared bit for bit with "
                         "verified.speculative.verify" + (f"; control caught: {summary['caught_by'][0]}"
                                                          if target.control and found else ""))
    summary["elapsed_s"] = round(time.monotonic() - t0, 2)
    return summary


_SCRIPT = '''#!/usr/bin/env python3
"""flashproof sampler reproducer (written by `flashproof fuzz --sampler`).

{line}

Run `python {name}` or `flashproof repro {name}`: it rebuilds the batch, calls the sampler with the
same uniforms and prints its tokens next to the reference's; exit 1 while they differ, 0 once not.
"""
from flashproof.fuzz.sampler_check import SamplerSpec, replay

if __name__ == "__main__":
    raise SystemExit(replay({sampler!r}, {spec}, device={device!r}))
'''


def write_script(dev: SamplerDeviation, ref: str, folder, device: str) -> str:
    """The standalone script of a sampler deviation under ``folder``; returns its path."""
    import hashlib
    import pathlib

    from .user import absolute_ref, is_reference

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ref = absolute_ref(ref) if is_reference(ref) else ref.replace("sampler:", "")
    text = _SCRIPT.format(line=dev.reproducer().replace('"""', "'''"), name="THIS_FILE", sampler=ref,
                          spec=repr(dev.spec), device=device)
    stem = "".join(ch if ch.isalnum() else "_" for ch in dev.sampler)[-50:]
    path = folder / f"repro_sampler_{stem}_{hashlib.sha1(text.encode()).hexdigest()[:8]}.py"
    path.write_text(text.replace("THIS_FILE", path.name))
    return str(path)


def replay(sampler: str, spec: SamplerSpec, *, device: str = "cpu") -> int:
    """Rebuild ``spec``'s batch, run ``sampler`` (a ``--sampler`` value) on it and print what it
    finds; 1 if it still deviates from the reference, 0 if not, 2 if it cannot be loaded."""
    import sys

    from .errors import UsageError
    from .samplers import resolve_sampler

    try:
        (target,) = resolve_sampler(sampler)
    except (UsageError, ValueError) as e:
        print(f"flashproof repro: {e}", file=sys.stderr)
        return 2
    devs = check_batch(target, spec, device)
    print(f"[{target.name}] {spec.describe()} on {device}")
    for d in devs:
        print("  " + d.reproducer() + (f" ({d.note})" if d.note else ""))
    print("still deviates" if devs else "no deviation now")
    return 1 if devs else 0
