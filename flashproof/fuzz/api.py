"""The Python front door: ``fuzz_kernel(fn, ...) -> Report``.

``fn`` is any attention callable (``flashproof.fuzz.user`` states the contract), a ``--kernel``
reference string (a built-in name, ``MODULE:FUNCTION``, ``PATH.py:FUNCTION``) or a
``targets.Target``. Conventions (``layout``, ``causal_alignment``, ``lse``, ``empty_rows``) are
keyword arguments, overriding those ``@flashproof.fuzz.kernel(...)`` declared on ``fn``.
``flashproof.testing.check_attention_kernel`` is the same campaign as one pytest line.
"""
from __future__ import annotations

import pathlib
from typing import NamedTuple

from .campaign import DEFAULT_BUDGET, DEFAULT_DTYPES, campaign, format_summary
from .checks import CHECKS, Deviation
from .errors import UsageError

__all__ = ["fuzz_kernel", "Report", "Finding"]


class Finding(NamedTuple):
    """One deviation: which check and tensor, why, where, the one-line ``reproducer`` (with the
    ``ProblemSpec`` that rebuilds the inputs), the ``diagnosis`` (a convention the kernel matches
    instead, or ""), the standalone reproducer ``script`` source and, when written, its ``path``."""

    check: str
    tensor: str
    reason: str
    dtype: str
    deviation: Deviation
    reproducer: str
    diagnosis: str
    script: str
    path: str


class Report(NamedTuple):
    """``passed``: complete, no deviation, harness sound. ``complete``: the budget was spent, not
    the time. ``deviations``: ``Finding``s. ``harness_error``: why the harness failed ("" if it did
    not; then there is no verdict). ``summary``: the JSON-ready campaign summary; ``text``: it,
    formatted."""

    passed: bool
    complete: bool
    deviations: tuple
    harness_error: str
    summary: dict
    text: str


def _target(fn, name, conventions):
    from .targets import Target
    from .user import resolve, user_target

    if isinstance(fn, Target):
        if any(v is not None for v in conventions.values()):
            raise UsageError("conventions apply to user kernels; a Target normalises its own")
        return fn
    if isinstance(fn, str):
        return resolve(fn, **conventions)
    return user_target(fn, name=name, **conventions)


def fuzz_kernel(fn, *, dtype=None, device: str | None = None, seconds: float | None = None,
                budget: int = DEFAULT_BUDGET, seed: int = 0, profile="ci", checks=CHECKS,
                determinism_runs: int = 2, repro_dir=None, name: str | None = None,
                layout: str | None = None, causal_alignment: str | None = None, lse: str | None = None,
                empty_rows: str | None = None) -> Report:
    """Fuzz ``fn`` and return a ``Report``. ``dtype``: one of "fp64", "fp32", "fp16", "bf16" or a
    tuple of them (default fp32 and fp64; one the kernel does not take is skipped); ``device``:
    "cpu", "cuda", "cuda:N" (default: CUDA when present); ``seconds``: wall-clock budget (None:
    none; running out makes the report incomplete, never passed); ``budget``: examples per search
    round; ``repro_dir``: write each deviation's reproducer script there (None: keep the source in
    the report only). Bad arguments raise ``UsageError``."""
    from .cli import check_device
    from .repro import script, write_scripts

    dtypes = DEFAULT_DTYPES if dtype is None else ((dtype,) if isinstance(dtype, str) else tuple(dtype))
    device = check_device(device)
    target = _target(fn, name, dict(layout=layout, causal_alignment=causal_alignment, lse=lse,
                                    empty_rows=empty_rows))
    try:
        c = campaign(target, device=device, dtypes=dtypes, budget=budget, seed=seed, profile=profile, checks=checks,
                     determinism_runs=determinism_runs, seconds=seconds)
    except ValueError as e:
        raise UsageError(str(e)) from None
    paths = write_scripts(c.deviations, target, pathlib.Path(repro_dir)) if repro_dir is not None and c.deviations \
        else [""] * len(c.deviations)
    found = tuple(Finding(d.check, d.tensor, d.reason, d.dtype, d, d.reproducer(), d.diagnosis, script(d, target),
                          str(p)) for d, p in zip(c.deviations, paths))
    s = c.summary
    return Report(bool(s["passed"]), bool(s["complete"]), found, s.get("harness_error", ""), s, format_summary(s))
