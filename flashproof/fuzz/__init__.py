"""flashproof.fuzz — differential fuzzing of attention kernels and speculative samplers against the
verified oracle.

Front door: ``flashproof fuzz --kernel MODULE:FUNCTION`` (or ``PATH.py:FUNCTION``, or a built-in
name) on the command line; ``fuzz_kernel(fn, ...) -> Report`` in Python; ``kernel(...)`` to declare
a function's conventions; ``flashproof.testing.check_attention_kernel`` in pytest. docs/fuzz.md.
"""
from .api import Finding, Report, fuzz_kernel
from .user import kernel

__all__ = ["fuzz_kernel", "kernel", "Report", "Finding"]
