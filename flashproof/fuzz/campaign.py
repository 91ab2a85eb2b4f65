"""The campaign: hypothesis searches of one kernel against the oracle, summarised as a dict.

``run_campaign(kernel, device=..., dtypes=..., budget=...)`` runs, for each dtype, up to
``rounds`` hypothesis searches of ``budget`` examples each; the first round of each dtype runs the
design's adversarial problems first (``adversarial.py``; up to ``budget`` of them, as hypothesis
explicit examples), then its ``budget`` random draws. A search stops at the first problem
on which some check deviates, shrinks it (within ``shrink_seconds``) and records that problem's
deviations; the next round leaves the checks that already failed out, so one kernel with several
bugs reports several minimal reproducers. The summary (JSON-ready) holds, per dtype, the number
of examples, the oracle used, the worst error/bound ratio per check and tensor, and each
deviation with its reproducer; ``passed`` is True only when the target was available, the campaign
complete, the harness sound and no deviation was found. A dtype on which no example was examined
(every drawn problem ``Unsupported``), or a campaign whose every dtype the target lacks, is
``complete: False`` with the reason in ``incomplete``: a campaign that checked nothing never passes.

A kernel that raises is reported once: the first example on which it raises is shrunk and
reported (reason ``error``); later examples that raise the same kind of error (same exception type
and message up to the numbers in it) are counted in ``known_errors`` and not reported again.
A failure of the harness itself (the two oracles disagree; our code raised) ends the campaign at
once with ``harness_error`` set (the CLI exits 4); it is never a deviation of the kernel.
A device fault of the kernel (``faults.py``: a CUDA error raised inside the call into the kernel)
is a deviation (exit 1) with its reproducer; the CUDA context is unusable after it, so the
campaign stops there, unshrunk, with ``device_fault`` set and ``complete: False``.

Wall clock: with ``seconds`` the campaign stops drawing new examples when that budget is spent
(split evenly over the dtypes still to run); a search cut short this way marks its dtype and the
summary ``complete: False`` with the reason in ``incomplete``, and such a summary is never
``passed``. ``progress`` (a callable) receives one dict per examined example, as it happens.
"""
from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import NamedTuple

import torch
from hypothesis import HealthCheck, Phase, Verbosity, example, given, seed as hyp_seed, settings
from hypothesis.errors import HypothesisException

from . import targets
from .checks import CHECKS, DTYPES, Deviation, error_signature, examine
from .errors import HarnessError
from .strategies import FAMILIES, SPECIAL_LENGTHS, attention_problems
from .warm import count_compiles

__all__ = ["run_campaign", "campaign", "Campaign", "PROFILES", "DEFAULT_BUDGET", "DEFAULT_DTYPES", "specimens",
           "warm_phase"]

#: Examples per search round. The mutant corpus is caught within this budget (tests/test_fuzz_kernels.py).
DEFAULT_BUDGET = 40
#: fp64 is skipped for a target that does not take it; for one that does, a float64 call computed
#: in float32 is caught only by a float64 campaign (its naive baseline is exact to 2^-52).
DEFAULT_DTYPES = ("fp32", "fp64")
#: Size caps. "ci": every problem fits the pure-Python verified oracle (keys reach 130 so
#: that 64-key tiles have ragged ends; query rows reach 40, past the 16-row tiles of the Triton
#: interpreter, so that every stage — masked edge, unmasked interior, masked edge — of the forward,
#: dQ and dK/dV kernels runs; ``max_work`` keeps the pure-Python oracle fast by capping
#: B·Hq·Nq·Nk·(D+Dv)). "gpu": large shapes (up to 1025 keys and d = 128), where problems beyond the
#: reference go to the dense float64 oracle on the device. "gpu" and "gluon" are compile-aware
#: (``launches.py``): each campaign draws its problems from ``launches`` launch specialisations
#: (feature combination × head dims × heads × length classes), chosen from its seed so that every
#: family the kernel takes is on in one of them, and compiles them all in a warm phase before the
#: timed part (``warm.py``); lengths stay adversarial inside a launch (1, 2, 63 … 1025).
#: "gluon-sparse" is compile-aware as well: the shapes of "gluon", every launch on the block-sparse
#: route (``problem.sparse_route``) with 128 × 128 tiles, so that on sm_90 the default call
#: (``--kernel triton-atomic``, deterministic=False) runs the Gluon block-sparse forward and backward.
#: Profile keys besides the caps: ``sparse_blocks`` (the tile sizes of block-sparse launches; default
#: the mask families' blocks), ``always`` (launch families on in every launch), ``densities`` (the
#: fractions of tiles a block-sparse mask keeps, the first the shrink target; default 0.6 only).
#: GPU profiles: problems above this many multiply-adds (B·Hq·Nq·Nk·(D+Dv)) are judged against the dense
#: float64 oracle on the device (checked against the verified reference on one query row per example).
#: The pure-Python reference's forward and backward cost ~30 µs per multiply-add on the 2-core work
#: machine (a 66k problem 1.2 s; an H200 cProfile at 100k: 6.6 s of reference for 23 examples), which
#: alone would cap a GPU campaign below 200 examples per minute; at 4k it stays under ~0.1 s.
GPU_ORACLE_WORK = 4_000
PROFILES = {
    "ci": dict(max_nq=40, max_nk=130, max_d=8, max_heads_kv=2, max_group=8, max_batch=2, max_work=120_000),
    "gpu": dict(max_nq=1025, max_nk=1025, max_d=128, max_heads_kv=2, max_group=8, max_batch=2,
                lengths=SPECIAL_LENGTHS, dims=(8, 64, 80, 128), oracle_work=GPU_ORACLE_WORK, launches=8,
                sparse_blocks=(16, 64, 128), densities=(0.6, 0.1, 1.0, 0.0)),
    # the shapes our Hopper kernels take (kernels/attention/dispatch.gluon_rule: d = 64 and
    # 128, Nq = Nk a multiple of 128, no window/mask/varlen, q/k/v
    # contiguous or (B, N, H, D) transposed views; GQA groups up to 8), with the families that keep them
    # so; on a GPU without sm_90, or with special_lengths drawn, the same problems go to the Triton kernels
    "gluon": dict(max_nq=1024, max_nk=1024, max_d=128, max_heads_kv=2, max_group=8, max_batch=2,
                  lengths=(128, 256, 384, 1024), dims=(64, 128), square=True, oracle_work=GPU_ORACLE_WORK, launches=4,
                  families=("causal", "huge_logits", "ties", "zero_q", "late_max", "gqa", "batch", "noncontig")),
    # the block-sparse calls of the same kernels (gluon_rule: BlockSparseMask of 128 x 128 tiles, no dense
    # mask inside, causal or not, deterministic=False): every launch on the block-sparse route, block-sparse
    # masks keeping 60 %, 10 %, all or none of the tiles (10 %: whole query-tile rows, rows out 0 / LSE -inf,
    # and key-tile columns off), late keys (only the last key tile on); with deterministic=True
    # (--kernel triton) or on a GPU without sm_90 the same problems go to the Triton block-sparse walk
    "gluon-sparse": dict(max_nq=1024, max_nk=1024, max_d=128, max_heads_kv=2, max_group=8, max_batch=2,
                         lengths=(128, 256, 384, 1024), dims=(64, 128), square=True, oracle_work=GPU_ORACLE_WORK,
                         launches=6, sparse_blocks=(128,), always=("sparse",), densities=(0.6, 0.1, 1.0, 0.0),
                         families=("causal", "sparse", "huge_logits", "ties", "zero_q", "late_max", "gqa", "batch",
                                   "noncontig")),
}
#: profile keys that are not strategy caps
_RUN_KEYS = ("oracle_work", "launches", "sparse_blocks", "always")
#: Families that need features (targets.FEATURES) the target may lack.
_NEEDS = {"window": {"window"}, "varlen": {"varlen"}, "mask": {"mask"}, "empty_rows": {"mask"}, "poison": {"mask"},
          "gqa": {"gqa"}, "dv": {"dv"}, "causal": {"causal"}, "huge_logits": {"scale"}, "sparse": {"block_sparse", "mask"}}


class _Plan(NamedTuple):
    """What a profile means for one target: the strategy's caps and families, the launch
    specialisations of a compile-aware profile (empty otherwise), and the explicit adversarial
    problems every campaign runs first (``adversarial.py``; for a compile-aware profile, those
    inside its launches)."""

    caps: dict
    families: list
    blocks: tuple
    square_causal: bool
    launches: tuple
    explicit: tuple


def _plan(target, device: str, profile: dict, seed: int) -> _Plan:
    from .adversarial import explicit
    from .launches import choose, extreme, launch_of

    lacks = target.lacks(device)
    caps = {k: v for k, v in profile.items() if k not in _RUN_KEYS}
    families = [f for f in caps.pop("families", FAMILIES) if not _NEEDS.get(f, set()) & lacks]
    if "gqa" in lacks:
        caps["max_group"] = 1
    blocks = tuple(sorted(set(target.tile_sizes) | {16}))
    square_causal = "causal_rect" in lacks
    launches = ()
    if profile.get("launches"):
        launches = choose(seed, profile["launches"], lengths=caps["lengths"], dims=caps["dims"], families=families,
                          max_nq=caps["max_nq"], max_nk=caps["max_nk"], max_heads_kv=caps["max_heads_kv"],
                          max_group=caps["max_group"], max_batch=caps["max_batch"], square=caps.get("square", False),
                          square_causal=square_causal, sparse_blocks=tuple(profile.get("sparse_blocks", blocks)),
                          always=tuple(profile.get("always", ())))
    first = explicit(families=families, blocks=blocks, square_causal=square_causal, **caps)
    if launches:  # the adversarial problems inside the launches, then each launch at its longest lengths
        first = [s for s in first if {launch_of(s, False), launch_of(s, True)} & set(launches)]
        first += [extreme(l, lengths=caps["lengths"], max_nq=caps["max_nq"], max_nk=caps["max_nk"]) for l in launches]
        low = sorted(x for x in caps.get("densities") or () if 0 < x < 1)
        first += [extreme(l, lengths=caps["lengths"], max_nq=caps["max_nq"], max_nk=caps["max_nk"])._replace(
            density=low[0], seed=1) for l in launches if l.sparse is not None and low]  # sparse tiles: empty rows
    return _Plan(caps, families, blocks, square_causal, launches, tuple(first))


def specimens(target, device: str, profile: dict, seed: int) -> list:
    """The smallest problem of each launch specialisation of the campaign (what the warm phase
    runs), one per launch in their order, then those of the further tile-grid stride classes of the
    block-sparse launches (``launches.stride_specimens``); empty for a profile that is not compile-aware."""
    from .launches import specimen, stride_specimens

    p = _plan(target, device, profile, seed)
    kw = dict(lengths=p.caps["lengths"], max_nq=p.caps["max_nq"], max_nk=p.caps["max_nk"])
    return [specimen(l, **kw) for l in p.launches] + [s for l in p.launches for s in stride_specimens(l, **kw)]


class _Found(Exception):
    """Raised inside the hypothesis property when an example deviates."""


class _OutOfTime(BaseException):
    """Raised inside the property when the wall-clock budget is spent. Not an ``Exception``, so
    hypothesis does not take it for a failure to shrink: it ends the search at once."""


def _strategy(target, device: str, profile: dict, seed: int = 0):
    """The problems of ``profile`` that ``target`` takes on ``device`` (those of the campaign's
    launch specialisations for a compile-aware profile; ``seed`` picks them)."""
    return _problems(_plan(target, device, profile, seed))


def _problems(p: _Plan):
    from .launches import problems

    if p.launches:
        return problems(p.launches, lengths=p.caps["lengths"], families=p.families, blocks=p.blocks,
                        max_nq=p.caps["max_nq"], max_nk=p.caps["max_nk"], densities=p.caps.get("densities"))
    return attention_problems(families=p.families, blocks=p.blocks, square_causal=p.square_causal, **p.caps)


class _DeviceFault(BaseException):
    """Raised inside the property when the kernel faulted on the device (``faults.py``): nothing
    more can run in this process, so the search ends at once (no shrinking). args: the faulting
    example's deviations and, when raised while shrinking, the smallest failure found before."""


class _Harness(BaseException):
    """Raised inside the property when the harness failed; not an ``Exception``, so hypothesis does
    not shrink it as a failure: the campaign ends with a harness error."""


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
            deadline=float("inf"), progress=None, max_work=None, known_errors=frozenset(), oracle_fns=None,
            first=(), fresh_shrink=None):
    """One hypothesis search: the first ``budget`` problems of ``first`` (explicit examples), then
    ``budget`` random draws; returns the deviations of the minimal failing example (or []).
    Past ``deadline`` (time.monotonic()) the search ends before the next example and
    ``stats["cut"]`` is set, so the caller reports it as incomplete (a failure found before that
    is kept, shrunk as far as time allowed). ``fresh_shrink``: shrinks a device-faulting example in
    fresh processes (``_fresh_shrinker``), or None."""
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
        compiled = stats["compiles"]["compiled"]
        try:
            ex = examine(target, spec, dtype, device, checks=checks, determinism_runs=determinism_runs,
                         **kw, **(oracle_fns or {}))
        except targets.Unsupported as e:
            stats["unsupported"] += 1
            _report(progress, stats, dtype, spec, now, f"unsupported ({e})")
            return []
        except HarnessError as e:
            raise _Harness(str(e)) from None
        except Exception as e:  # our code failed, not the kernel's (kernel calls are caught in examine)
            import traceback
            raise _Harness(f"{type(e).__name__}: {e} while examining {spec.describe()}\n"
                           + "".join(traceback.format_exception(e)[-6:])) from None
        if stats["compiles"]["compiled"] > compiled and len(stats["compiles"]["examples"]) < 10:
            stats["compiles"]["examples"].append(spec.describe())  # a launch the warm phase did not cover
        stats["notes"].update(ex.notes)
        stats["agreement"][ex.agreement] += 1
        errors = [d for d in ex.deviations if d.reason == "error"]
        if errors and len(errors) == len(ex.deviations) and all(error_signature(d.note) in known_errors for d in errors):
            stats["known_errors"] += 1
            _report(progress, stats, dtype, spec, now, "the kernel raised an error reported before")
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
        if any(d.device_fault for d in ex.deviations):
            raise _DeviceFault(ex.deviations)
        if ex.deviations:
            known[spec] = ex.deviations
            first_failure[0] = first_failure[0] or time.monotonic()
        return ex.deviations

    def smallest_known():
        smallest = min(known, key=lambda s: (s.n_q * s.n_k, s)) if known else None
        return known.get(smallest, [])

    test = given(strategy)(examine_once)
    for spec in reversed(first[:budget]):  # hypothesis runs explicit examples in the order of their decorators
        test = example(spec)(test)
    prop = settings(max_examples=budget, deadline=None, database=None, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
                    phases=(Phase.explicit, Phase.generate, Phase.shrink))(test)
    try:
        try:
            with _no_local_constants():
                hyp_seed(seed)(prop)()
        except _Found as e:
            return _minimized(e.args[0], target, dtype, device, checks, determinism_runs, max_work, oracle_fns,
                              min(shrink_seconds, 30.0), deadline, stats)
    except _DeviceFault as fault:  # the context is unusable: report what was found, shrink nothing more
        stats["fault"] = True
        found = fault.args[1] if len(fault.args) > 1 else smallest_known()
        before = [d._replace(note=(d.note + "; " if d.note else "") + "not shrunk further: a later candidate "
                             "faulted on the device") for d in found]
        faults = [_shrunk(d, fresh_shrink, dtype, checks, deadline) if d.device_fault and fresh_shrink else d
                  for d in fault.args[0]]
        return before + faults
    except _Harness:
        raise
    except (HypothesisException, _OutOfTime) as e:  # a flaky kernel (the failure did not replay), or time
        why = "time budget spent" if isinstance(e, _OutOfTime) else type(e).__name__
        return [d._replace(note=f"{why} during shrinking") for d in smallest_known()]
    return []


def _shrunk(dev: Deviation, fresh_shrink, dtype: str, checks, deadline: float) -> Deviation:
    """``dev`` (a device fault) with its spec shrunk in fresh processes, as far as they fault."""
    try:
        spec, steps = fresh_shrink(dev.spec, dtype, checks, deadline)
    except Exception as e:  # the shrink is a convenience: the unshrunk finding stands
        return dev._replace(note=f"{dev.note}; shrinking in fresh processes failed ({type(e).__name__}: {e})"[:600])
    if not steps:
        return dev._replace(note=f"{dev.note}; no simpler variant faulted in a fresh process")
    return dev._replace(spec=spec, note=f"{dev.note}; shrunk in fresh processes ({steps} steps) from "
                                        f"{dev.spec.describe()}")


def _minimized(devs, target, dtype, device, checks, determinism_runs, max_work, oracle_fns, seconds, deadline, stats):
    """``shrink.minimize`` on the spec of ``devs`` for its first (check, tensor): the deviations of
    the simplest spec that still shows it (hypothesis's shrink can stop in a local minimum)."""
    from .shrink import minimize

    key = (devs[0].check, devs[0].tensor)
    seen = {}
    kw = {} if max_work is None else {"max_work": max_work}

    def fails(spec):
        if time.monotonic() > deadline:
            return False
        try:
            ex = examine(target, spec, dtype, device, checks=checks, determinism_runs=determinism_runs,
                         **kw, **(oracle_fns or {}))
        except targets.Unsupported:
            return False
        except HarnessError as e:
            raise _Harness(str(e)) from None
        stats["shrink_steps"] = stats.get("shrink_steps", 0) + 1
        if any(d.device_fault for d in ex.deviations):
            raise _DeviceFault(ex.deviations)  # _search reports it with the smallest failure so far
        hit = any((d.check, d.tensor) == key for d in ex.deviations)
        if hit:
            seen[spec] = ex.deviations
        return hit

    try:
        best = minimize(devs[0].spec, fails, seconds=seconds)
    except _DeviceFault as fault:  # a shrink candidate faulted: keep the smallest failure seen so far
        smallest = min(seen, key=lambda s: (s.n_q * s.n_k, s)) if seen else None
        raise _DeviceFault(fault.args[0], seen.get(smallest, devs)) from None
    return seen.get(best, devs)


def _report(progress, stats, dtype, spec, started, status):
    if progress is not None:
        progress({"dtype": dtype, "example": stats["examples"] + stats["unsupported"] + stats["known_errors"],
                  "seconds": round(time.monotonic() - started, 2), "status": status, "spec": spec.describe()})


class Campaign(NamedTuple):
    """``summary``: the JSON-ready dict (module docstring); ``deviations``: the same findings as
    ``checks.Deviation`` objects (with ``reproducer()``), in the summary's order."""

    summary: dict
    deviations: list


def run_campaign(kernel="torch", **kwargs) -> dict:
    """``campaign(...).summary`` (the JSON-ready dict); arguments as ``campaign``."""
    return campaign(kernel, **kwargs).summary


def campaign(kernel="torch", *, device: str | None = None, dtypes=DEFAULT_DTYPES, budget: int = DEFAULT_BUDGET,
             seed: int = 0, profile: str | dict = "ci", checks=CHECKS, rounds: int | None = None,
             shrink_seconds: float = 60.0, determinism_runs: int = 2, seconds: float | None = None,
             progress=None, diagnose: bool = True, oracle_fns: dict | None = None,
             tolerance: str = "empirical", tuning: str = "first", warm: bool | None = None,
             workers: int | None = None) -> Campaign:
    """Fuzz ``kernel`` (a ``targets.names()`` entry, a ``targets.Target`` or any attention callable) on ``device`` (default:
    CUDA when present) in each of ``dtypes`` ("fp64", "fp32", "fp16", "bf16"; one the target lacks is
    skipped and the summary says so), ``budget`` examples per search round. ``seconds``: wall-clock
    budget of the whole campaign (None: none); ``progress``: called with a dict per example;
    ``diagnose``: name the convention a deviating kernel matches instead (``diagnose.py``);
    ``oracle_fns``: {"reference_fn": ..., "dense_fn": ...} replacements (tests plant wrong oracles);
    ``tolerance``: the rule for out and lse, "empirical" or "proved" (``tolerance.py``);
    ``tuning``: ``targets.Case.tuning`` of every call, "first" (one configuration per launch key)
    or "autotune" (the CLI's --all-configs); ``warm``: run the warm phase of a compile-aware profile
    (``warm.py``) first, in ``workers`` processes (default: the CPU cores); None: on CUDA devices.
    The warm phase counts against ``seconds``; the summary reports it apart (``warm``), with the
    timed part's seconds (``timed_s``) and the Triton compilations it still made (``compiles``)."""
    from .tolerance import RULES

    if tolerance not in RULES:
        raise ValueError(f"tolerance must be one of {RULES}, received {tolerance!r}")
    if tuning not in targets.TUNINGS:
        raise ValueError(f"tuning must be one of {targets.TUNINGS}, received {tuning!r}")
    if tolerance == "proved" and "fp64" in dtypes:
        raise ValueError("the proved tolerance covers fp32, bf16 and fp16 (fp32 accumulation); "
                         f"received dtypes {tuple(dtypes)}: pass --dtype fp32/bf16/fp16")
    t0 = time.monotonic()
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0):
        raise ValueError(f"seconds must be None or a number > 0 (wall-clock budget), received {seconds!r}")
    if isinstance(determinism_runs, bool) or not isinstance(determinism_runs, int) or determinism_runs < 0:
        raise ValueError(f"determinism_runs must be an int >= 0 (runs compared bitwise), received {determinism_runs!r}")
    deadline = float("inf") if seconds is None else t0 + seconds
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(kernel, targets.Target):
        target = kernel
    elif isinstance(kernel, str):
        target = targets.get(kernel)
    elif callable(kernel):  # anyone's function (flashproof.fuzz.user states the contract)
        from .user import user_target
        target = user_target(kernel)
    else:
        raise ValueError(f"kernel must be a target name, a targets.Target or a callable, received {kernel!r}")
    if not dtypes:  # a campaign over no dtype would examine nothing and pass
        raise ValueError(f"dtypes must name at least one of {sorted(DTYPES)}, received {tuple(dtypes)!r}")
    for dt in dtypes:
        if dt not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, received {dt!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an int >= 1 (examples per search round), received {budget!r}")
    prof = PROFILES[profile] if isinstance(profile, str) else dict(profile)
    summary = {"kernel": target.name, "doc": target.doc, "device": device, "tolerance": tolerance,
               "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu",
               "torch": torch.__version__, "budget": budget, "seed": seed, "tuning": tuning,
               "profile": profile if isinstance(profile, str) else "custom",
               "dtypes": list(dtypes), "checks": list(checks), "seconds": seconds, "results": [], "deviations": [],
               "complete": True, "incomplete": "", "harness_error": "", "device_fault": "",
               "conventions": _conventions(target),
               "notes": []}
    if profile != "ci" and not isinstance(profile, str):
        summary["profile_caps"] = {k: v for k, v in prof.items()}
    found_all: list = []
    reason = target.unavailable(device)
    if reason is not None:
        summary.update(available=False, reason=reason, passed=False, elapsed_s=round(time.monotonic() - t0, 2))
        return Campaign(summary, [])
    summary.update(available=True, reason="", version=target.version())
    lacks = target.lacks(device)
    plan = _plan(target, device, prof, seed)
    strategy = _problems(plan)
    if plan.launches:
        from .launches import describe
        summary["specialisations"] = [describe(l, prof["lengths"]) for l in plan.launches]
        if warm if warm is not None else torch.device(device).type == "cuda":
            summary["warm"] = warm_phase(target, device, prof, seed, [d for d in dtypes if d not in lacks], checks,
                                         determinism_runs, tuning, workers, deadline)
    known_errors: set = set()
    notes: set = set()
    fresh_shrink = _fresh_shrinker(target, device, prof, determinism_runs, tuning, workers, shrink_seconds)
    t_timed = time.monotonic()
    with count_compiles() as compiled:  # the timed part: what it still compiled is reported
        for i, dt in enumerate(dtypes):
            if dt in lacks:
                summary["results"].append({"dtype": dt, "skipped": f"the kernel does not take {dt}"})
                continue
            now = time.monotonic()
            dt_deadline = now + (deadline - now) / (len(dtypes) - i) if deadline != float("inf") else deadline
            stats = {"examples": 0, "unsupported": 0, "known_errors": 0, "sources": Counter(), "worst": {},
                     "cut": False, "fault": False, "notes": set(), "agreement": Counter(), "compiles": compiled}
            remaining, found = [c for c in checks if _applies(c, target, lacks)], []
            try:
                for r in range(rounds or len(checks)):
                    devs = _search(target, device, dt, strategy, remaining, budget, seed + r, shrink_seconds, stats,
                                   determinism_runs, dt_deadline, progress, prof.get("oracle_work"),
                                   frozenset(known_errors), dict(oracle_fns or {}, tolerance=tolerance, tuning=tuning),
                                   plan.explicit if r == 0 else (), fresh_shrink)
                    if diagnose and not stats["fault"]:  # after a device fault nothing more runs on the device
                        devs = [_diagnosed(target, d, device, tuning) for d in devs]
                    found.extend(devs)
                    known_errors.update(error_signature(d.note) for d in devs if d.reason == "error")
                    if not devs or stats["cut"] or stats["fault"]:
                        break
                    failed = {c for d in devs for c in d.check.split("+")}
                    remaining = [c for c in remaining if c not in failed]
                    if not remaining:
                        break
            except _Harness as e:
                summary["harness_error"] = f"{dt}: {e}"
            if stats["fault"]:
                fault = next(d for d in found if d.device_fault)
                summary["device_fault"] = f"{dt}: {fault.note}"
                summary["complete"] = False
                summary["incomplete"] = (summary["incomplete"] + "; " if summary["incomplete"] else "") + (
                    f"{dt}: stopped at a device fault after {stats['examples']} examples")
            if stats["cut"]:
                summary["complete"] = False
                summary["incomplete"] = (summary["incomplete"] + "; " if summary["incomplete"] else "") + (
                    f"{dt}: the {seconds:.1f} s budget ran out after {stats['examples']} examples")
            # a dtype on which the kernel ran on nothing (every problem unsupported) checked nothing: never a pass
            unexamined = not (stats["cut"] or stats["fault"] or summary["harness_error"]) and not (
                stats["examples"] or stats["known_errors"])
            if unexamined:
                summary["complete"] = False
                summary["incomplete"] = (summary["incomplete"] + "; " if summary["incomplete"] else "") + (
                    f"{dt}: no example was examined ({stats['unsupported']} unsupported)")
            notes |= stats["notes"]
            summary["results"].append({"dtype": dt, "complete": not stats["cut"] and not stats["fault"]
                                       and not summary["harness_error"] and not unexamined,
                                       "examples": stats["examples"], "unsupported": stats["unsupported"],
                                       "known_errors": stats["known_errors"],
                                       "oracles": dict(stats["sources"]),
                                       "oracle_agreement": dict(stats["agreement"]),
                                       "worst_error_over_bound": {k: round(v, 4)
                                                                  for k, v in sorted(stats["worst"].items())},
                                       "deviations": [d.as_dict() for d in found]})
            summary["deviations"].extend(d.as_dict() for d in found)
            found_all.extend(found)
            if summary["harness_error"]:
                summary["complete"] = False
                break
            if stats["fault"]:
                break  # the CUDA context is unusable: no further dtype can run in this process
    if summary["complete"] and all("skipped" in r for r in summary["results"]):
        summary["complete"] = False  # every dtype skipped: nothing was examined
        summary["incomplete"] = f"no dtype was examined: the kernel takes none of {list(dtypes)}"
    summary["compiles"] = dict(compiled)
    summary["notes"] = sorted(notes)
    summary["passed"] = not summary["deviations"] and summary["complete"] and not summary["harness_error"]
    summary["timed_s"] = round(time.monotonic() - t_timed, 2)
    summary["elapsed_s"] = round(time.monotonic() - t0, 2)
    return Campaign(summary, found_all)


def _worker_ref(target) -> str | None:
    """What loads ``target`` in a fresh process (a built-in name or a user reference), or None."""
    from .user import absolute_ref, is_reference

    if is_reference(target.name):
        return absolute_ref(target.name)
    return target.name if target.name in targets.names() else None


def _conventions_of(target) -> dict | None:
    conv = getattr(target, "conventions", None)
    return None if conv is None else dict(conv._asdict())


def warm_phase(target, device: str, prof: dict, seed: int, dtypes, checks, determinism_runs: int, tuning: str,
               workers: int | None = None, deadline: float = float("inf")) -> dict:
    """The warm phase of the campaign of ``seed`` (``warm.warm_up`` on its launches' specimens):
    its report (``warm.Warm`` as a dict), or {"skipped": why}."""
    from .warm import warm_up

    ref = _worker_ref(target)
    if ref is None:
        return {"skipped": f"{target.name} cannot be loaded in a worker process (not a built-in name or reference)"}
    w = warm_up(ref, specimens(target, device, prof, seed), dtypes, device=device, checks=checks,
                determinism_runs=determinism_runs, tuning=tuning, workers=workers, deadline=deadline,
                conventions=_conventions_of(target), max_work=prof.get("oracle_work"))
    return w._asdict()


def _fresh_shrinker(target, device: str, prof: dict, determinism_runs: int, tuning: str, workers: int | None,
                    seconds: float):
    """``shrink(spec, dtype, checks, deadline) -> (spec, steps)``: the simplest variant of a
    device-faulting ``spec`` that still faults, each candidate examined in a fresh process
    (``fresh.py``; ``workers`` at a time) within ``seconds``; None when the kernel cannot be loaded
    in a fresh process or ``seconds`` is 0."""
    from .fresh import run_fresh
    from .shrink import minimize_batched
    from .warm import default_workers

    ref = _worker_ref(target)
    if ref is None or not seconds > 0:
        return None

    def shrink(spec, dtype, checks, deadline):
        end = min(time.monotonic() + seconds, deadline)

        def fails_many(cands):
            runs = run_fresh(ref, [[(c, dtype)] for c in cands], device=device, checks=checks,
                             determinism_runs=determinism_runs, tuning=tuning, conventions=_conventions_of(target),
                             max_work=prof.get("oracle_work"), deadline=end)
            broken = [r for r in runs if not r.results and not r.killed]
            if broken:  # the process could not examine anything (the kernel does not load there, ...)
                raise RuntimeError(f"a fresh process exited with {broken[0].returncode}: {broken[0].stderr_tail}")
            return [bool(r.results) and bool(r.results[0]["fault"]) for r in runs]
        return minimize_batched(spec, fails_many, seconds=max(end - time.monotonic(), 0.0),
                                batch=workers or default_workers())
    return shrink


def _applies(check: str, target, lacks) -> bool:
    """Whether ``check`` can run on ``target`` at all (a round of a check that cannot would only
    spend its budget)."""
    if check == "split":
        return "mask" not in lacks and "lse" not in lacks
    if check == "determinism":
        return bool(target.deterministic)
    if check == "gradients":
        return "grad" not in lacks
    return True


def _conventions(target) -> dict:
    """The conventions the kernel is held to (the project's, or those a user kernel declared)."""
    conv = getattr(target, "conventions", None)
    if conv is not None:
        return dict(conv._asdict())
    return {"layout": "bhnd", "causal_alignment": "bottom-right", "lse": "natural", "empty_rows": "zero"}


def _diagnosed(target, dev: Deviation, device: str, tuning: str) -> Deviation:
    from .diagnose import diagnose

    why = diagnose(target, dev, device, tuning)
    return dev._replace(diagnosis=why) if why else dev


def format_summary(summary: dict) -> str:
    """A short human-readable report of ``run_campaign``'s summary."""
    head = f"flashproof fuzz --kernel {summary['kernel']} on {summary['device']} ({summary.get('device_name', '')})"
    if not summary["available"]:
        return f"{head}: not available — {summary['reason']}"
    lines = [f"{head}: {summary['doc']}, version {summary.get('version', '?')}, torch {summary['torch']}"]
    conv = summary.get("conventions")
    if conv:
        lines.append("  conventions: " + ", ".join(f"{k.replace('_', '-')} {v}" for k, v in conv.items()))
    for r in summary["results"]:
        if "skipped" in r:
            lines.append(f"  {r['dtype']}: skipped ({r['skipped']})")
            continue
        worst = ", ".join(f"{k} {v:.2f}" for k, v in r["worst_error_over_bound"].items())
        cut = "" if r.get("complete", True) else " [INCOMPLETE]"
        known = f", {r['known_errors']} raised a reported error again" if r.get("known_errors") else ""
        lines.append(f"  {r['dtype']}: {r['examples']} examples ({r['unsupported']} unsupported{known}){cut}, "
                     f"oracles {r['oracles']}; worst error/bound among passes: {worst or '-'}")
        for d in r["deviations"]:
            lines.append("    DEVIATION " + d["reproducer"])
            if d.get("script"):
                lines.append(f"      reproducer script: {d['script']}")
    for n in summary.get("notes", []):
        lines.append(f"  note: {n}")
    if summary.get("specialisations"):
        lines.append(f"  {len(summary['specialisations'])} launch specialisations: "
                     + "; ".join(summary["specialisations"]))
    w = summary.get("warm")
    if w:
        lines.append(f"  warm phase: skipped ({w['skipped']})" if "skipped" in w else
                     f"  warm phase: {w['tasks']} launch × dtype tasks in {w['seconds']} s over {w['workers']} processes "
                     f"({w['compiled']} Triton compilations, {w['cached']} cache loads, {w['failed']} failed, "
                     f"{w['cut']} cut)" + (f"; first failure: {w['errors'][0]}" if w["errors"] else ""))
    if summary.get("specialisations") and summary.get("timed_s") is not None:
        lines.append(f"  timed part: {summary['timed_s']} s, {summary['compiles']['compiled']} Triton compilations, "
                     f"{summary['compiles']['cached']} cache loads")
        for spec in summary["compiles"].get("examples", [])[:3]:
            lines.append(f"    compiled while examining {spec}")
    if summary.get("device_fault"):
        lines.append(f"  DEVICE FAULT of the kernel (a finding, exit 1): {summary['device_fault']}")
    if summary.get("harness_error"):
        lines.append(f"  HARNESS ERROR (not a finding about the kernel): {summary['harness_error']}")
        lines.append(f"  NO VERDICT in {summary['elapsed_s']} s")
        return "\n".join(lines)
    if summary["deviations"]:
        verdict = "DEVIATIONS FOUND" + ("" if summary.get("complete", True) else " (run incomplete)")
    elif not summary.get("complete", True):
        verdict = f"INCOMPLETE, NOT PASSED ({summary['incomplete']})"
    else:
        verdict = "PASSED"
    lines.append(f"  {verdict} in {summary['elapsed_s']} s")
    return "\n".join(lines)
