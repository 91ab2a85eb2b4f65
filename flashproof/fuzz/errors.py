"""The fuzzer's own failures, kept apart from findings about a kernel.

``HarnessError``: the fuzzer itself failed (the two oracles disagree, a check crashed in our code,
a strategy could not draw). It ends the campaign with exit status 4 and is never reported as a
deviation of the kernel. ``UsageError``: the request cannot be run as given (a bad argument, a
kernel that cannot be loaded); exit status 2, checked before any example is drawn.
"""
from __future__ import annotations

__all__ = ["HarnessError", "UsageError"]


class HarnessError(RuntimeError):
    """The harness failed; its message says where. Never a finding about the kernel."""


class UsageError(ValueError):
    """A request that cannot be run as given; the message names what was expected and received."""
