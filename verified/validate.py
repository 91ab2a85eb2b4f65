"""Input checks for the attention reference. Each failure is a ``ValueError`` that says what was
expected and what was received."""
from __future__ import annotations

from numbers import Integral
from typing import Any, Callable, Sequence

EMPTY_ROW_MODES = ("error", "zero")


def matrix(name: str, x: Any, *, rows: int | None = None, cols: int | None = None) -> tuple[int, int]:
    """Check that ``x`` is a non-empty rectangular list of rows; return its shape."""
    if not isinstance(x, Sequence) or isinstance(x, (str, bytes)):
        raise ValueError(f"{name} must be a matrix given as a list of rows, received {type(x).__name__}")
    if len(x) == 0:
        raise ValueError(f"{name} must have at least one row, received 0 rows")
    widths = []
    for r, row in enumerate(x):
        if not isinstance(row, Sequence) or isinstance(row, (str, bytes)):
            raise ValueError(f"{name}[{r}] must be a row (a list of numbers), received {type(row).__name__}")
        widths.append(len(row))
    if len(set(widths)) != 1:
        bad = next(r for r, w in enumerate(widths) if w != widths[0])
        raise ValueError(f"{name} is ragged: row 0 has {widths[0]} entries but row {bad} has {widths[bad]}")
    if widths[0] == 0:
        raise ValueError(f"{name} must have at least one column, received rows of length 0")
    if rows is not None and len(x) != rows:
        raise ValueError(f"{name} must have {rows} rows to match, received {len(x)}")
    if cols is not None and widths[0] != cols:
        raise ValueError(f"{name} must have {cols} columns to match, received {widths[0]}")
    return len(x), widths[0]


def block_size(block: Any) -> int:
    if isinstance(block, bool) or not isinstance(block, Integral):
        raise ValueError(f"block must be an integer key-block size b >= 1, received {block!r}")
    if block < 1:
        raise ValueError(f"block must be a key-block size b >= 1, received {block}")
    return int(block)


def empty_rows_mode(mode: Any) -> str:
    if mode not in EMPTY_ROW_MODES:
        raise ValueError(f"empty_rows must be one of {EMPTY_ROW_MODES}, received {mode!r}")
    return mode


def concrete_flag(f: Any) -> bool | None:
    """``True``/``False`` for a concrete mask flag (Python or numpy bool), ``None`` for a symbolic one."""
    if isinstance(f, bool):
        return f
    if type(f).__name__ in ("bool_", "bool"):
        return bool(f)
    return None


def mask(allowed: Any, n_q: int, n_k: int) -> Callable[[int, int], Any]:
    """Normalise ``allowed`` (None, a predicate ``(i, j) -> flag``, or one set of key indices per
    query row) into a predicate. Indices are 0-based."""
    if allowed is None:
        return lambda i, j: True
    if callable(allowed):
        return allowed
    if isinstance(allowed, Sequence) and not isinstance(allowed, (str, bytes)):
        if len(allowed) != n_q:
            raise ValueError(f"allowed must give one key set per query row ({n_q} rows), "
                             f"received {len(allowed)} sets")
        sets = []
        for i, s in enumerate(allowed):
            try:
                s = frozenset(s)
            except TypeError:
                raise ValueError(f"allowed[{i}] must be a set of key indices, received {type(s).__name__}") from None
            bad = [j for j in s if isinstance(j, bool) or not isinstance(j, Integral) or not 0 <= j < n_k]
            if bad:
                raise ValueError(f"allowed[{i}] holds {bad[0]!r}, but key indices run over 0..{n_k - 1}")
            sets.append(s)
        return lambda i, j: j in sets[i]
    raise ValueError("allowed must be None, a predicate (i, j) -> bool, or a list of per-row key sets; "
                     f"received {type(allowed).__name__}")


def nonempty_rows(pred: Callable[[int, int], Any], n_q: int, n_k: int, mode: str) -> None:
    """In the theorem's mode (``empty_rows="error"``) every concrete row needs an allowed key."""
    if mode != "error":
        return
    for i in range(n_q):
        flags = [concrete_flag(pred(i, j)) for j in range(n_k)]
        if any(f is None for f in flags):
            return  # a symbolic mask: emptiness is a formula, guarded inside the reference
        if not any(flags):
            raise ValueError(f"query row {i} has no allowed key; the theorem requires nonempty allowed "
                             "sets (pass empty_rows='zero' for the extension: Y = 0, LSE = -inf)")


def finite_reads(num, pred, Q, K, V, n_q: int, n_k: int, *, G=None) -> None:
    """Every entry that an allowed (i, j) pair reads must be finite; entries that only masked pairs
    touch are never read and may hold anything (NaN, inf)."""
    read_keys, read_rows = set(), set()
    for i in range(n_q):
        for j in range(n_k):
            f = concrete_flag(pred(i, j))
            if f is None or f:
                read_keys.add(j)
                read_rows.add(i)
    for name, mat, idx in (("Q", Q, read_rows), ("K", K, read_keys), ("V", V, read_keys), ("G", G, read_rows)):
        if mat is None:
            continue
        for r in sorted(idx):
            for c, x in enumerate(mat[r]):
                if not num.is_finite(x):
                    raise ValueError(f"{name}[{r}][{c}] = {x!r} is not finite, and an allowed pair reads it "
                                     "(policy: non-finite entries are accepted only where no allowed pair reads them)")


def scale(num, c: Any) -> None:
    if not num.is_finite(c):
        raise ValueError(f"scale must be finite, received {c!r}")
