"""Speculative samplers as fuzzing targets: ours, its negative controls, and anyone's.

The contract is ``flashproof.kernels.sampler.rejection_sample``'s::

    fn(draft_token_ids (B, K), p_draft (B, K, V) or None, p_target (B, K, V), p_bonus (B, V), *,
       num_draft_tokens=(B,), uniforms=SamplerUniforms | generator=torch.Generator [, greedy=(B,) bool])
    -> (tokens (B, K+1) padded with −1, num_accepted (B,))   (any 2-sequence, e.g. SpecSample)

The uniforms mean what they mean to the verified reference (``verified.speculative.verify``):
one accept uniform per draft position (accept x iff u·p_draft(x) < p_target(x)), one for the
draw at the first rejection and one for the bonus draw, each draw an inverse CDF over the
fixed-point weights of the row. A sampler that takes ``uniforms`` is checked exactly
(``sampler_check``: same uniforms ⇒ the reference's tokens, bit for bit); one that takes only a
``generator`` is checked statistically (``sampler_stat``: a G-test against the exact law).

Names: ``torch`` and ``triton`` (ours, ``backend=``), ``control:<bug>`` (the negative controls
below; every one must be caught) and ``controls`` for all of them.
"""
from __future__ import annotations

import inspect
from typing import Callable, NamedTuple

import torch

from .errors import UsageError

__all__ = ["SamplerTarget", "CONTROLS", "resolve_sampler", "control", "sampler_target"]


class SamplerTarget(NamedTuple):
    name: str
    doc: str
    fn: Callable
    uniforms: bool       # takes injected uniforms: the exact check applies
    greedy: bool         # takes greedy=(B,) bools
    control: bool        # a negative control (must be caught)


#: bug -> what it does (the classes of bugs peers have shipped)
CONTROLS = {
    "always-accept": "accepts every draft (a stubbed uniform with a <= test)",
    "accept-zero-at-u0": "accepts iff u·p_draft(x) <= p_target(x): at u = 0 a token with p_target(x) = 0 is emitted",
    "hard-coded-u": "ignores the uniforms it is given and uses u = 0.5 for every accept test",
    "float32-check": "evaluates the accept test in float32 (mixed precision between draft and check)",
    "reads-padded-drafts": "ignores num_draft_tokens: reads the padded drafts past each request's count",
    "residual-is-target": "on rejection draws from p_target instead of norm(max(0, p_target − p_draft))",
    "residual-softmax": "on rejection draws from softmax(p_target − p_draft)",
}


def _draw(row64: torch.Tensor, u: float) -> int:
    """Inverse CDF over the fixed-point weights of ``row64`` (float64, ≥ 0), as ours draws."""
    from flashproof.kernels.sampler.torch import _fixed, _inverse_cdf

    return int(_inverse_cdf(_fixed(row64[None]), torch.tensor([u], dtype=torch.float64))[0])


def control(bug: str) -> Callable:
    """A plain per-request sampler with the contract above and one planted ``bug`` (CONTROLS);
    with no bug ("none") it emits the reference's tokens bit for bit."""
    if bug not in CONTROLS and bug != "none":
        raise UsageError(f"unknown sampler control {bug!r}: expected one of {sorted(CONTROLS)}")

    def sample(draft_token_ids, p_draft, p_target, p_bonus, *, num_draft_tokens=None, uniforms=None,
               generator=None):
        from flashproof.kernels.sampler import SpecSample, draw_uniforms

        B, K, V = p_target.shape
        u = uniforms if uniforms is not None else draw_uniforms(B, K, generator=generator)
        counts = [K] * B if num_draft_tokens is None else [int(x) for x in num_draft_tokens]
        tokens = torch.full((B, K + 1), -1, dtype=torch.int64)
        n_acc = torch.zeros(B, dtype=torch.int64)
        for b in range(B):
            k = K if bug == "reads-padded-drafts" else counts[b]
            for i in range(k):
                x = int(draft_token_ids[b, i])
                if bug == "reads-padded-drafts":  # a padded −7 read as a kernel's unchecked load reads it: an
                    x %= V                        # in-range id (not an IndexError, which catches no check)
                p = p_target[b, i].double()
                q = torch.nn.functional.one_hot(torch.tensor(x), V).double() if p_draft is None else p_draft[b, i].double()
                ua = 0.5 if bug == "hard-coded-u" else float(u.accept[b, i])
                if bug == "always-accept":
                    ok = True
                elif bug == "accept-zero-at-u0":
                    ok = ua * float(q[x]) <= float(p[x])
                elif bug == "float32-check":
                    f = torch.float32
                    ok = bool(torch.tensor(ua, dtype=f) * q[x].to(f) < p[x].to(f))
                else:
                    ok = ua * float(q[x]) < float(p[x])
                if ok:
                    tokens[b, i] = x
                    continue
                res = {"residual-is-target": p, "residual-softmax": torch.softmax(p - q, -1)}.get(bug, (p - q).clamp_min(0))
                if not bool((res * 2.0 ** 40 >= 1).any()):
                    res = p  # empty residual: draw from p_target (the stated policy)
                tokens[b, i] = _draw(res, float(u.residual[b]))
                n_acc[b] = i
                break
            else:
                tokens[b, k] = _draw(p_bonus[b].double(), float(u.bonus[b]))
                n_acc[b] = k
        return SpecSample(tokens, n_acc)

    sample.__name__ = sample.__qualname__ = f"control_{bug.replace('-', '_')}"
    sample.__doc__ = CONTROLS.get(bug, "no planted bug")
    return sample


def _ours(backend: str) -> Callable:
    def sample(draft_token_ids, p_draft, p_target, p_bonus, *, num_draft_tokens=None, uniforms=None,
               generator=None, greedy=False):
        from flashproof.kernels.sampler import rejection_sample

        return rejection_sample(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens=num_draft_tokens,
                                uniforms=uniforms, generator=generator, greedy=greedy, backend=backend)
    sample.__name__ = sample.__qualname__ = f"rejection_sample_{backend}"
    return sample


def sampler_target(fn: Callable, name: str, *, control_: bool = False) -> SamplerTarget:
    """Capabilities of a sampler from its signature (``uniforms``, ``generator``, ``greedy``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError) as e:
        raise UsageError(f"cannot read the signature of sampler {name}: {e}") from None
    if "uniforms" not in params and "generator" not in params:
        raise UsageError(f"sampler {name} takes neither uniforms= nor generator=: the fuzzer cannot drive its "
                         f"randomness (signature {inspect.signature(fn)})")
    return SamplerTarget(name, (inspect.getdoc(fn) or name).split("\n")[0], fn, "uniforms" in params,
                         "greedy" in params, control_)


def resolve_sampler(name: str) -> list:
    """``--sampler`` value -> targets (UsageError naming what was expected)."""
    if name == "torch":
        return [sampler_target(_ours("torch"), "sampler:torch")]
    if name == "triton":
        from flashproof.kernels.interpreter import interpreting
        if not interpreting() and not torch.cuda.is_available():
            raise UsageError("--sampler triton needs CUDA (or TRITON_INTERPRET=1 on the CPU)")
        return [sampler_target(_ours("triton"), "sampler:triton")]
    if name == "controls":
        return [sampler_target(control(b), f"control:{b}", control_=True) for b in CONTROLS]
    if name.startswith("control:"):
        return [sampler_target(control(name.split(":", 1)[1]), name, control_=True)]
    from .user import is_reference, load

    if is_reference(name):
        return [sampler_target(load(name), name)]
    raise UsageError(f"unknown sampler {name!r}: expected torch, triton, control:<bug> ({', '.join(CONTROLS)}), "
                     "controls, MODULE:FUNCTION or PATH.py:FUNCTION")


def run_sampler_campaign(target: SamplerTarget, **kw) -> dict:
    """The exact check for samplers that take uniforms, else the statistical test."""
    from .sampler_check import run_exact
    from .sampler_stat import run_statistical

    return run_exact(target, **kw) if target.uniforms else run_statistical(target, **kw)


def format_sampler_summary(s: dict) -> str:
    head = f"flashproof fuzz --sampler {s['sampler']} ({s['mode']}): {s['doc']}"
    lines = [head, "  " + s["detail"]]
    for d in s["deviations"]:
        lines.append("    DEVIATION " + d["reproducer"])
        if d.get("script"):
            lines.append(f"      reproducer script: {d['script']}")
    for n in s.get("notes", []):
        lines.append("  note: " + n)
    if s.get("harness_error"):
        lines.append(f"  HARNESS ERROR (not a finding about the sampler): {s['harness_error']}")
        return "\n".join(lines)
    if s.get("control"):
        lines.append(f"  NEGATIVE CONTROL CAUGHT (as it must be): {s['caught_by'][0]}  [{s['elapsed_s']} s]")
        return "\n".join(lines)
    verdict = "DEVIATIONS FOUND" if s["deviations"] else ("PASSED" if s["complete"] else "INCOMPLETE, NOT PASSED")
    lines.append(f"  {verdict} in {s['elapsed_s']} s")
    return "\n".join(lines)
