"""Progress of ``flashproof prove``: one line per finished record, with elapsed time and an ETA.

On a terminal a tqdm bar sits under the lines (tqdm redraws it in place); anywhere else (CI logs,
pipes, files) there is no bar and no carriage return, only the plain lines, each ending in
``[elapsed 00:12, eta 00:30]``. Both use one ETA rule, ``eta``.

    p = Progress(total=169, jobs=2)
    p.step(rec_line, cached=False)     # once per record
    p.close()
"""
from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

from tqdm import tqdm

__all__ = ["Progress", "eta", "clock_text"]


def eta(elapsed: float, ran: int, remaining: int) -> float | None:
    """Seconds left, from the mean time per record that actually ran (cache hits all arrive first and
    take no time, so they are left out of the rate); None until one has run."""
    if remaining <= 0:
        return 0.0
    if ran <= 0:
        return None
    return elapsed / ran * remaining


def clock_text(seconds: float | None) -> str:
    """``mm:ss`` (``h:mm:ss`` past an hour), as tqdm writes it; ``?`` when unknown."""
    return "?" if seconds is None else tqdm.format_interval(round(seconds))


class Progress:
    """Counts finished records out of ``total`` and prints their lines on ``stream`` (stdout)."""

    def __init__(self, total: int, *, stream: TextIO | None = None, clock: Callable[[], float] = time.perf_counter):
        self.total, self.done, self.ran = total, 0, 0
        self.stream = stream if stream is not None else sys.stdout
        self.clock = clock
        self.t0 = clock()
        isatty = getattr(self.stream, "isatty", None)
        # tqdm puts ", " before the postfix: the bar ends "[elapsed, eta m:ss]" (tqdm's clock, our ETA)
        self.bar = (tqdm(total=total, file=self.stream, leave=False, unit="record", postfix="eta ?",
                         bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
                    if isatty is not None and isatty() else None)

    def step(self, line: str, *, cached: bool = False) -> str:
        """Record one finished record; print and return its line (with the clock on plain output)."""
        self.done += 1
        self.ran += 0 if cached else 1
        elapsed = self.clock() - self.t0
        left = eta(elapsed, self.ran, self.total - self.done)
        if self.bar is not None:
            self.bar.set_postfix_str(f"eta {clock_text(left)}", refresh=False)
            self.bar.update(1)
            self.bar.write(line, file=self.stream)
            return line
        text = f"{line}  [elapsed {clock_text(elapsed)}, eta {clock_text(left)}]"
        print(text, file=self.stream, flush=True)
        return text

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
