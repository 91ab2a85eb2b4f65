"""The campaign: hypothesis searches of one kernel against the oracle, summarised as a dict.

``run_campaign(kernel, device=..., dtypes=..., budget=...)`` runs, for each dtype, up to
``rounds`` hypothesis searches of ``budget`` examples each. A search stops at the first problem
on which some check deviates, shrinks it (within ``shrink_seconds``) and records that problem's
deviations; the next round leaves the checks that already failed out, so one kernel with several
bugs reports several minimal reproducers. The summary (JSON-ready) holds, per dtype, the number
of examples, the oracle used, the worst error/bound ratio per check and tensor, and each
deviation with its reproducer; ``passed`` is True only when the target was available and no
deviation was found.

Wall clock: with ``seconds`` the campaign stops drawing new examples when that budget is spent
(split evenly over the dtypes still to run); a search cut short this way marks its dtype and the
summary ``complete: False`` with the reason in ``incomplete``, and such a summary is never
``passed``. ``progress`` (a callable) receives one dict per examined example, as it happens.
"""
from __future__ import annotations

import contextlib
import time
from collections import Counter

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, seed as hyp_seed, settings
from hypothesis.errors import HypothesisException

from . import targets
from .checks import CHECKS, DTYPES, Deviation, examine
from .strategies import FAMILIES, SPECIAL_LENGTHS, attention_problems

__all__ = ["run_campaign", "PROFILES", "DEFAULT_BUDGET", "DEFAULT_DTYPES"]

#: Examples per search round. The mutant corpus is caught within this budget (tests/test_fuzz_mutants.py).
DEFAULT_BUDGET = 40
DEFAULT_DTYPES = ("fp32",)
#: Size caps. "ci": every problem fits the pure-Python verified oracle (keys reach 130 so
#: that 64-key tiles have ragged ends; few query rows keep it fast). "gpu": large shapes (up to
#: 1025 keys and d = 128), where problems beyond the reference go to the dense float64 oracle.
#: "gpu" draws lengths and head dims from small sets (every compiled kernel variant is then reused
#: across examples: a new shape/feature combination costs Triton/torch.compile/cuDNN a compile) and
#: sends problems above ``oracle_work`` multiply-adds to the dense float64 oracle on the device.
PROFILES = {
    "ci": dict(max_nq=12, max_nk=130, max_d=8, max_heads_kv=2, max_group=8, max_batch=2),
    "gpu": dict(max_nq=1025, max_nk=1025, max_d=128, max_heads_kv=2, max_group=8, max_batch=2,
                lengths=SPECIAL_LENGTHS, dims=(8, 64, 80, 128), oracle_work=100_000),
    # the shapes our Hopper forward takes (kernels/attention/dispatch.gluon_rule: d = 128, Nq = Nk a multiple
    # of 128, no window/mask/varlen, contiguous), with the families that keep them so; on a GPU
    # without sm_90, or with special_lengths drawn, the same problems go to the Triton kernels
    "gluon": dict(max_nq=1024, max_nk=1024, max_d=128, max_heads_kv=2, max_group=4, max_batch=2,
                  lengths=(128, 256, 384, 1024), dims=(128,), square=True, oracle_work=100_000,
                  families=("causal", "huge_logits", "ties", "zero_q", "late_max", "gqa", "batch")),
}
#: profile keys that are not strategy caps
_RUN_KEYS = ("oracle_work",)
#: Families that need a feature (targets.FEATURES) the target may lack.
_NEEDS = {"window": "window", "varlen": "varlen", "mask": "mask", "empty_rows": "mask", "poison": "mask",
          "gqa": "gqa", "dv": "dv"}


class _Found(Exception):
    """Raised inside the hypothesis property when an example deviates."""


class _OutOfTime(BaseException):
    """Raised inside the property when the wall-clock budget is spent. Not an ``Exception``, so
    hypothesis does not take it for a failure to shrink: it ends the search at once."""


def _strategy(target, device: str, profile: dict):
    lacks = target.lacks(device)
    caps = {k: v for k, v in profile.items() if k not in _RUN_KEYS}
    families = [f for f in caps.pop("families", FAMILIES) if _NEEDS.get(f) not in lacks]
    blocks = tuple(sorted(set(target.tile_sizes) | {16}))
    return attention_problems(families=families, blocks=blocks, square_causal="causal_rect" in lacks, **caps)


@contextlib.contextmanager
def _no_local_constants():
    """Hypothesis (≥ 6.13x) mixes integer/float constants found in the source of every *loaded*
    local module into its draws, so the same ``seed`` drew different examples depending on which
    modules (tests included) the process had imported. A campaign's examples must depend on its
    seed only: during the search that pool is empty. (Private hook; a no-op if it is gone.)"""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover
        yield
        return
    real = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    pool = getattr(providers, "_local_constants", None)
    if real is None or cache is None or pool is None:
        yield
        return
    empty = type(pool)()
    providers._get_local_constants = lambda: empty
    cache.clear()  # permitted-constant lists computed from the real pool
    try:
        yield
    finally:
        providers._get_local_constants = real
        cache.clear()


def _search(target, device, dtype, strategy, checks, budget, seed, shrink_seconds, stats, determinism_runs,
            deadline=float("inf"), progress=None, max_work=None):
    """One hypothesis search; returns the deviations of the minimal failing example (or []).
    Past ``deadline`` (time.monotonic()) the search ends before the next example and
    ``stats["cut"]`` is set, so the caller reports it as incomplete (a failure found before that
    is kept, shrunk as far as time allowed)."""
    known: dict = {}
    first_failure = [None]

    def examine_once(spec):
        devs = known.get(spec) or _examine_new(spec)
        if devs:
            raise _Found(devs)  # one raise site: hypothesis tells failures apart by where they are raised

    def _examine_new(spec):
        now = time.monotonic()
        if now > deadline:
            stats["cut"] = True
            raise _OutOfTime()  # wall-clock budget spent: nothing more is examined (the summary says incomplete)
        if first_failure[0] is not None and now - first_failure[0] > shrink_seconds:
            return []  # shrink budget spent: treat further candidates as passing, keep the best so far
        kw = {} if max_work is None else {"max_work": max_work}
        try:
            ex = examine(target, spec, dtype, device, checks=checks, determinism_runs=determinism_runs, **kw)
        except targets.Unsupported as e:
            stats["unsupported"] += 1
            _report(progress, stats, dtype, spec, now, f"unsupported ({e})")
            return []
        stats["examples"] += 1
        _report(progress, stats, dtype, spec, now,
                "DEVIATION " + ", ".join(sorted({f"{d.check}/{d.tensor}" for d in ex.deviations}))
                if ex.deviations else "ok")
        stats["sources"][ex.source] += 1
        for check, v in ex.verdicts:
            if v.ok and v.bounded and v.bound > 0:
                key = f"{check}/{v.name}"
                stats["worst"][key] = max(stats["worst"].get(key, 0.0), v.error / v.bound)
        if ex.deviations:
            known[spec] = ex.deviations
            first_failure[0] = first_failure[0] or time.monotonic()
        return ex.deviations

    prop = settings(max_examples=budget, deadline=None, database=None, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                    phases=(Phase.explicit, Phase.generate, Phase.shrink))(given(strategy)(examine_once))
    try:
        with _no_local_constants():
            hyp_seed(seed)(prop)()
    except _Found as e:
        return e.args[0]
    except (HypothesisException, _OutOfTime) as e:  # a flaky kernel (the failure did not replay), or time
        smallest = min(known, key=lambda s: (s.n_q * s.n_k, s)) if known else None
        why = "time budget spent" if isinstance(e, _OutOfTime) else type(e).__name__
        return [d._replace(note=f"{why} during shrinking") for d in known.get(smallest, [])]
    return []


def _report(progress, stats, dtype, spec, started, status):
    if progress is not None:
        progress({"dtype": dtype, "example": stats["examples"] + stats["unsupported"],
                  "seconds": round(time.monotonic() - started, 2), "status": status, "spec": spec.describe()})


def run_campaign(kernel: str = "torch", *, device: str | None = None, dtypes=DEFAULT_DTYPES,
                 budget: int = DEFAULT_BUDGET, seed: int = 0, profile: str | dict = "ci", checks=CHECKS,
                 rounds: int | None = None, shrink_seconds: float = 60.0, determinism_runs: int = 2,
                 seconds: float | None = None, progress=None) -> dict:
    """Fuzz ``kernel`` (a ``targets.names()`` entry) on ``device`` (default: CUDA when present) in
    each of ``dtypes`` ("fp64", "fp32", "fp16", "bf16"), ``budget`` examples per search round, and
    return the JSON-ready summary described in the module docstring. ``seconds``: wall-clock
    budget of the whole campaign (None: none); ``progress``: called with a dict per example."""
    t0 = time.monotonic()
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0):
        raise ValueError(f"seconds must be None or a number > 0 (wall-clock budget), received {seconds!r}")
    deadline = float("inf") if seconds is None else t0 + seconds
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    target = targets.get(kernel)
    for dt in dtypes:
        if dt not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, received {dt!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an int >= 1 (examples per search round), received {budget!r}")
    prof = PROFILES[profile] if isinstance(profile, str) else dict(profile)
    summary = {"kernel": kernel, "doc": target.doc, "device": device,
               "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu",
               "torch": torch.__version__, "budget": budget, "seed": seed, "profile": profile,
               "dtypes": list(dtypes), "checks": list(checks), "seconds": seconds, "results": [], "deviations": [],
               "complete": True, "incomplete": ""}
    reason = target.unavailable(device)
    if reason is not None:
        summary.update(available=False, reason=reason, passed=False, elapsed_s=round(time.monotonic() - t0, 2))
        return summary
    summary.update(available=True, reason="", version=target.version())
    lacks = target.lacks(device)
    strategy = _strategy(target, device, prof)
    for i, dt in enumerate(dtypes):
        if dt == "fp64" and "fp64" in lacks:
            summary["results"].append({"dtype": dt, "skipped": "the kernel does not take float64"})
            continue
        now = time.monotonic()
        dt_deadline = now + (deadline - now) / (len(dtypes) - i) if deadline != float("inf") else deadline
        stats = {"examples": 0, "unsupported": 0, "sources": Counter(), "worst": {}, "cut": False}
        remaining, found = list(checks), []
        for r in range(rounds or len(checks)):
            devs = _search(target, device, dt, strategy, remaining, budget, seed + r, shrink_seconds, stats,
                           determinism_runs, dt_deadline, progress, prof.get("oracle_work"))
            if not devs or stats["cut"]:
                found.extend(devs)
                break
            found.extend(devs)
            remaining = [c for c in remaining if c not in {d.check for d in devs}]
            if not remaining:
                break
        if stats["cut"]:
            summary["complete"] = False
            summary["incomplete"] = (summary["incomplete"] + "; " if summary["incomplete"] else "") + (
                f"{dt}: the {seconds:.1f} s budget ran out after {stats['examples']} examples")
        summary["results"].append({"dtype": dt, "complete": not stats["cut"], "examples": stats["examples"],
                                   "unsupported": stats["unsupported"],
                                   "oracles": dict(stats["sources"]),
                                   "worst_error_over_bound": {k: round(v, 4) for k, v in sorted(stats["worst"].items())},
                                   "deviations": [d.as_dict() for d in found]})
        summary["deviations"].extend(d.as_dict() for d in found)
    summary["passed"] = not summary["deviations"] and summary["complete"]
    summary["elapsed_s"] = round(time.monotonic() - t0, 2)
    return summary


def format_summary(summary: dict) -> str:
    """A short human-readable report of ``run_campaign``'s summary."""
    head = f"flashproof fuzz --kernel {summary['kernel']} on {summary['device']} ({summary.get('device_name', '')})"
    if not summary["available"]:
        return f"{head}: not available — {summary['reason']}"
    lines = [f"{head}: {summary['doc']}, version {summary.get('version', '?')}, torch {summary['torch']}"]
    for r in summary["results"]:
        if "skipped" in r:
            lines.append(f"  {r['dtype']}: skipped ({r['skipped']})")
            continue
        worst = ", ".join(f"{k} {v:.2f}" for k, v in r["worst_error_over_bound"].items())
        cut = "" if r.get("complete", True) else " [INCOMPLETE: time budget spent]"
        lines.append(f"  {r['dtype']}: {r['examples']} examples ({r['unsupported']} unsupported){cut}, "
                     f"oracles {r['oracles']}; worst error/bound among passes: {worst or '-'}")
        for d in r["deviations"]:
            lines.append("    DEVIATION " + d["reproducer"])
    if summary["deviations"]:
        verdict = "DEVIATIONS FOUND" + ("" if summary.get("complete", True) else " (run incomplete)")
    elif not summary.get("complete", True):
        verdict = f"INCOMPLETE, NOT PASSED ({summary['incomplete']})"
    else:
        verdict = "PASSED"
    lines.append(f"  {verdict} in {summary['elapsed_s']} s")
    return "\n".join(lines)
