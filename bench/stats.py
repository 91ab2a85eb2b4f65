"""The median and range of repeated measurements: the one summary every timing script here reports
(``bench/kvcache.py``'s ms per call, ``examples/spec_e2e.py``'s seconds per step and speed-ups).

Pure Python (``statistics`` only), so any script may import it without pulling in torch or a kernel.
"""
from __future__ import annotations

import statistics
from typing import NamedTuple

__all__ = ["Spread", "spread"]


class Spread(NamedTuple):
    """The median of repeated measurements and their range (fastest, slowest), in the samples' unit."""

    median: float
    lo: float
    hi: float


def spread(samples) -> Spread:
    """``Spread`` of a non-empty sequence of numbers."""
    samples = list(samples)
    if not samples:
        raise ValueError("spread needs at least one sample, got none")
    return Spread(statistics.median(samples), min(samples), max(samples))
