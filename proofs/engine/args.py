"""Argument types and checks of ``flashproof prove`` (and ``flashproof audit``), all run before any work.

argparse calls the ``type=`` functions while parsing, so a bad ``--jobs``/``--timeout``/path is a
usage error (exit 2, message on stderr) before an obligation is imported. ``unknown_ids`` needs the
registry and runs right after discovery, before the runner starts.

    positive_int("0")      -> ArgumentTypeError("expected a positive integer, received 0")
    positive_seconds("-1") -> ArgumentTypeError("expected a positive number of seconds, received -1")
    unknown_ids(["ATT-MERGE-COM"], known) -> ["--only 'ATT-MERGE-COM': not an obligation, control or
                                              item id; did you mean ATT-MERGE-COMM?"]
"""
from __future__ import annotations

import argparse
import difflib
import math
from pathlib import Path

__all__ = ["positive_int", "positive_seconds", "directory", "file_path", "unknown_ids"]


def positive_int(text: str) -> int:
    """A count of worker processes: an integer ≥ 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, received {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, received {n}")
    return n


def positive_seconds(text: str) -> float:
    """A time limit: a finite number of seconds > 0."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, received {text!r}") from None
    if not math.isfinite(x) or x <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, received {text}")
    return x


def directory(text: str) -> Path:
    """A folder that exists or can be created: not an existing file."""
    if not text:
        raise argparse.ArgumentTypeError("expected a folder path, received an empty string")
    p = Path(text)
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"expected a folder, received {text!r}, which is a file")
    return p


def file_path(text: str) -> Path:
    """A file that exists or may be written: not an existing folder."""
    if not text:
        raise argparse.ArgumentTypeError("expected a file path, received an empty string")
    p = Path(text)
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file, received {text!r}, which is a folder")
    return p


def unknown_ids(only: list[str], known: list[str], *, show: list[str] | None = None, listed: int = 16) -> list[str]:
    """One message per ``--only`` id that is not in ``known`` (obligation, control and item ids),
    naming the close matches, or else up to ``listed`` ids of ``show`` (default: ``known``) and how
    to see them all."""
    known_set = set(known)
    msgs = []
    for oid in only:
        if oid in known_set:
            continue
        close = difflib.get_close_matches(oid, known, n=3, cutoff=0.6)
        if not close:
            up = oid.upper()
            close = [k for k in known if up and up in k.upper()][:5]
        if close:
            hint = "did you mean " + ", ".join(close) + "?"
        else:
            pool = list(show if show is not None else sorted(known))
            shown = ", ".join(pool[:listed]) + (", …" if len(pool) > listed else "")
            hint = (f"valid ids include the items {shown}, and {len(known)} ids in all "
                    "(`flashproof prove --list` shows every obligation and control)")
        msgs.append(f"--only {oid!r}: not an obligation, control or item id; {hint}")
    return msgs
