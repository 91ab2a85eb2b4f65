"""Dropout's random bits: counter-based, reproducible from (seed, position), regenerated, never stored.

The keep bit of pair (b, h, i, j) — batch b, query head h, query row i, key row j, with i and j
the row indices in the q and k tensors (packed rows for varlen) — is a function of the seed and
that position only:

    offset = ((b · Hq + h) · Nq + i) · Nk + j                      (int64)
    u      = Philox-4x32-10(key = (seed mod 2³², seed div 2³²), counter = (offset mod 2³², offset div 2³², 0, 0))[0]
    keep   = u ≥ t,   t = ⌊p · 2³²⌋                                (keep probability 1 − t/2³², within 2⁻³² of 1 − p)

and a kept probability is scaled by 1/(1 − p). This is exactly Triton's ``tl.randint(seed, offset)``
(``triton/language/random.py``: ``randint4x`` splits an int64 offset into the first two counter
words), which the Triton kernels call in their score loops; ``philox`` below is the same function in
torch integer ops, which the torch kernels call tile by tile. So both backends draw the SAME bits,
the forward and the backward of one call draw the same bits (the backward regenerates them from
the seed; no mask is saved), and ``dropout_mask`` gives them to tests and users.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["Dropout", "make", "seed_tensor", "philox", "threshold", "keep_bits", "dropout_mask", "MAX_SEED"]

#: seeds are integers in [0, MAX_SEED): 63 bits, so that Triton passes them as a signed int64
MAX_SEED = 2 ** 63
_M32 = 0xFFFFFFFF
# Philox-4x32 constants (Salmon et al., 2011), as Triton's philox_impl states them
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
ROUNDS = 10


class Dropout(NamedTuple):
    """A call's dropout: p (drop probability, 0 < p < 1); seed (int in [0, 2⁶³), or None where the call
    gave none and ``seed_tensor`` draws it in front of the op); t = ⌊p · 2³²⌋ (drop when the 32-bit draw
    is below it); scale = 1/(1 − p) (kept probabilities are multiplied by it)."""

    p: float
    seed: int
    t: int
    scale: float


def threshold(p: float) -> int:
    """t = ⌊p · 2³²⌋ (exact: multiplying a float by 2³² only shifts its exponent)."""
    return int(p * 2.0 ** 32)


def make(dropout_p, dropout_seed) -> Dropout | None:
    """The checked dropout of a call: None when dropout_p is 0 (the call is exactly the undropped
    one), else a ``Dropout`` (its seed None when dropout_seed is None: ``seed_tensor`` draws one).
    Reads no tensor value, so it runs where ``torch.compile`` traces. ValueError/TypeError name what
    was expected."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"dropout_p must be a float in [0, 1), got {type(dropout_p).__name__}")
    p = float(dropout_p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1) (kept entries are scaled by 1/(1 - p)), got {dropout_p!r}")
    if dropout_seed is not None and (isinstance(dropout_seed, bool) or not isinstance(dropout_seed, int)):
        raise TypeError(f"dropout_seed must be None or an int in [0, 2**63), got {type(dropout_seed).__name__}")
    if dropout_seed is not None and not 0 <= dropout_seed < MAX_SEED:
        raise ValueError(f"dropout_seed must lie in [0, 2**63), got {dropout_seed}")
    if p == 0.0:
        return None
    return Dropout(p, None if dropout_seed is None else int(dropout_seed), threshold(p), 1.0 / (1.0 - p))


def seed_tensor(dropout_seed) -> torch.Tensor:
    """The seed as the op takes it: an int64 (1,) CPU tensor holding ``dropout_seed``, or, for None, a
    fresh draw from torch's default CPU generator in [0, 2⁶²) (as SDPA draws a fresh seed per call;
    ``torch.manual_seed`` makes a run reproducible). Drawn with ``torch.randint``, a tensor op, so that
    ``torch.compile(fullgraph=True)`` traces it without a graph break (under inductor the draw comes
    from inductor's own generator, itself seeded from torch's); the op body reads the value
    (``seed_value``), where nothing is traced."""
    if dropout_seed is None:
        return torch.randint(0, 2 ** 62, (1,), dtype=torch.int64)
    return torch.tensor([dropout_seed], dtype=torch.int64)


def seed_value(seed: torch.Tensor | None) -> int | None:
    """The int seed held by ``seed_tensor``'s result (None stays None); TypeError for anything else."""
    if seed is None:
        return None
    if seed.dtype != torch.int64 or seed.numel() != 1:
        raise TypeError(f"the op's dropout_seed must be an int64 tensor of one element, got {seed.dtype} "
                        f"of shape {tuple(seed.shape)}")
    return int(seed.item())


def _mulhilo(a: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) 32-bit words of a · x for a constant a < 2³² and int64 x in [0, 2³²), without
    overflowing int64: a = a_hi · 2¹⁶ + a_lo, so a · x = (x · a_hi) · 2¹⁶ + x · a_lo with both
    partial products < 2⁴⁸."""
    a_hi, a_lo = a >> 16, a & 0xFFFF
    u = x * a_hi          # < 2^48
    t = x * a_lo          # < 2^48
    hi = (u + (t >> 16)) >> 16
    lo = (((u & 0xFFFF) << 16) + t) & _M32
    return hi, lo


def philox(seed: int, offset: torch.Tensor) -> torch.Tensor:
    """The first output word of Philox-4x32-10 (Triton's ``tl.randint(seed, offset)``), as int64
    values in [0, 2³²), for int64 ``offset`` ≥ 0 (any shape)."""
    c0 = offset & _M32
    c1 = (offset >> 32) & _M32
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0, k1 = seed & _M32, (seed >> 32) & _M32
    for _ in range(ROUNDS):
        hi_b, lo_b = _mulhilo(_ROUND_B, c2)
        hi_a, lo_a = _mulhilo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return c0


def keep_bits(drop: Dropout, Hq: int, Nq: int, Nk: int, b, h, i, j) -> torch.Tensor:
    """bool keep bits of the pairs (b, h, i, j) (int64 tensors that broadcast together) of a call
    whose q has Hq heads and Nq rows and whose k has Nk rows."""
    offset = ((b * Hq + h) * Nq + i) * Nk + j
    return philox(drop.seed, offset) >= drop.t


def dropout_mask(seed: int, p: float, shape: tuple, device=None) -> torch.Tensor:
    """The keep bits ``attention(..., dropout_p=p, dropout_seed=seed)`` uses, as a bool tensor of
    ``shape`` = (B, Hq, Nq, Nk) (for varlen: (1, Hq, total_q, total_k), packed rows)."""
    if seed is None:
        raise ValueError("dropout_mask needs the call's dropout_seed (an int in [0, 2**63)), got None")
    drop = make(p, seed)
    B, Hq, Nq, Nk = shape
    if drop is None:
        return torch.ones(shape, dtype=torch.bool, device=device)
    ar = lambda n: torch.arange(n, dtype=torch.int64, device=device)  # noqa: E731
    return keep_bits(drop, Hq, Nq, Nk, ar(B)[:, None, None, None], ar(Hq)[None, :, None, None],
                     ar(Nq)[None, None, :, None], ar(Nk)[None, None, None, :])
