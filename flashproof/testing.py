"""pytest helpers: put a fuzzing campaign into a user's test suite with one line.

    from flashproof.testing import check_attention_kernel

    def test_my_attention():
        check_attention_kernel(my_attention)          # raises AssertionError with the reproducer

``check_attention_kernel(fn, **kw)`` runs ``flashproof.fuzz.fuzz_kernel(fn, **kw)`` (same keyword
arguments: conventions, dtype, device, budget, seed, seconds, …) and returns its ``Report`` when
the kernel passed. A deviation raises ``AssertionError`` whose message carries every minimal
reproducer line and the first one's standalone script; a campaign cut short by ``seconds`` raises
``AssertionError`` too (incomplete is never passed); a failure of the harness raises
``flashproof.fuzz.errors.HarnessError`` — an error of the test, not a failure of the kernel.
"""
from __future__ import annotations

from .fuzz.api import Report, fuzz_kernel
from .fuzz.errors import HarnessError

__all__ = ["check_attention_kernel"]


def check_attention_kernel(fn, **kwargs) -> Report:
    """Fuzz ``fn``; return the ``Report`` if it passed, else raise (module docstring)."""
    report = fuzz_kernel(fn, **kwargs)
    if report.harness_error:
        raise HarnessError(report.harness_error)
    if report.deviations:
        lines = [f"{len(report.deviations)} deviation(s) of {report.summary['kernel']}:"]
        lines += [f"  {d.reproducer}" for d in report.deviations]
        lines += ["", "standalone reproducer of the first (save it and run `python FILE`):", report.deviations[0].script]
        raise AssertionError("\n".join(lines))
    if not report.passed:
        raise AssertionError(f"the campaign did not complete ({report.summary['incomplete']}); not passed")
    return report
