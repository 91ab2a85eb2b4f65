"""Dropout's random bits: counter-based, reproducible from (seed, position), regenerated, never stored.

The keep bit of pair (b, h, i, j) — batch b, query head h, query row i (its row in the q tensor:
packed rows for varlen), key column j (counted from its sequence's first key: for varlen the key's
row in k minus its sequence's start ``cu_seqlens_k[s]``; otherwise its row in k) — is a function of
the seed and that position only. One Philox call serves eight neighbouring keys of a row:

    row     = (b · Hq + h) · Nq + i                               (Nq, Nk: the q and k tensors' rows)
    counter = row · ⌈Nk / 8⌉ + ⌊j / 8⌋                           (int64)
    w0..w3  = Philox-4x32-10(key = (seed mod 2³², seed div 2³²), counter = (counter mod 2³², counter div 2³², 0, 0))
    u       = 16-bit half number (j mod 8) of w0 w1 w2 w3 read little-endian:
              half (j mod 2) (0: low) of word ⌊(j mod 8) / 2⌋
    keep    = u ≥ t,   t = round(p · 2¹⁶)

So the drop probability realised is p_r = t / 2¹⁶ (|p_r − p| ≤ 2⁻¹⁷; ``realised_p``), and a kept
probability is scaled by 1/(1 − p_r) = 2¹⁶ / (2¹⁶ − t), which keeps the dropped-out map unbiased:
E[keep / (1 − p_r)] = 1 exactly. p below 2⁻¹⁷ rounds to t = 0, no pair is dropped, and the call is
the undropped one (``make`` returns None); p at or above 1 − 2⁻¹⁷ would round to keep nothing and is
refused. (The previous scheme drew one Philox call per pair and used one of its four words: eight
times the integer work per pair, which dominated the Triton score loop; docs/kernel.md, dropout.)

The counter (w0..w3) is Triton's ``tl.randint4x(seed, counter)`` (``triton/language/random.py`` splits an
int64 counter into the first two counter words), which the Triton kernels call once per 8 keys of a
row (``triton/fwd.py::dropout_keep``) and spread over the keys with ``tl.interleave``; ``philox`` below
is the same function in torch integer ops, which the torch kernels call tile by tile. The groups of 8
keys start at key columns that are multiples of 8 in every kernel (their key tiles start at multiples
of 16), so the bits do not depend on tile sizes: both backends draw the SAME bits, the forward and the
backward of one call draw the same bits (the backward regenerates them; no mask is saved), and
``dropout_mask`` gives them to tests and users.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["Dropout", "make", "seed_tensor", "philox", "threshold", "realised_p", "keep_bits", "dropout_mask",
           "MAX_SEED", "BITS", "GROUP"]

#: seeds are integers in [0, MAX_SEED): 63 bits, so that Triton passes them as a signed int64
MAX_SEED = 2 ** 63
#: width of one pair's uniform draw, and the keys that share one Philox call (4 words · 32 / BITS)
BITS, GROUP = 16, 8
_LEVELS = 2 ** BITS
_M32 = 0xFFFFFFFF
# Philox-4x32 constants (Salmon et al., 2011), as Triton's philox_impl states them
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_ROUND_A, _ROUND_B = 0xD2511F53, 0xCD9E8D57
ROUNDS = 10


class Dropout(NamedTuple):
    """A call's dropout: p (the drop probability asked for, 0 < p < 1); seed (int in [0, 2⁶³), or None
    where the call gave none and ``seed_tensor`` draws it in front of the op); t = round(p · 2¹⁶) (drop
    when the 16-bit draw is below it, 1 ≤ t < 2¹⁶); scale = 2¹⁶ / (2¹⁶ − t) = 1/(1 − p_r), the realised
    drop probability p_r = t / 2¹⁶ (kept probabilities are multiplied by it)."""

    p: float
    seed: int
    t: int
    scale: float


def threshold(p: float) -> int:
    """t = round(p · 2¹⁶), halves rounded up (exact: p · 2¹⁶ only shifts p's exponent)."""
    return int(p * _LEVELS + 0.5)


def realised_p(p: float) -> float:
    """The drop probability a call with ``dropout_p=p`` realises: t / 2¹⁶ with t = round(p · 2¹⁶), within
    2⁻¹⁷ of p (0.0 for p < 2⁻¹⁷: such a call drops nothing). The verified reference takes this p."""
    drop = make(p, 0)
    return 0.0 if drop is None else drop.t / _LEVELS


def make(dropout_p, dropout_seed) -> Dropout | None:
    """The checked dropout of a call: None when dropout_p rounds to t = 0 (dropout_p = 0, or below
    2⁻¹⁷: the call is exactly the undropped one), else a ``Dropout`` (its seed None when dropout_seed is
    None: ``seed_tensor`` draws one). Reads no tensor value, so it runs where ``torch.compile`` traces.
    ValueError/TypeError name what was expected."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"dropout_p must be a float in [0, 1), got {type(dropout_p).__name__}")
    p = float(dropout_p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1) (kept entries are scaled by 1/(1 - p)), got {dropout_p!r}")
    if dropout_seed is not None and (isinstance(dropout_seed, bool) or not isinstance(dropout_seed, int)):
        raise TypeError(f"dropout_seed must be None or an int in [0, 2**63), got {type(dropout_seed).__name__}")
    if dropout_seed is not None and not 0 <= dropout_seed < MAX_SEED:
        raise ValueError(f"dropout_seed must lie in [0, 2**63), got {dropout_seed}")
    t = threshold(p)
    if t >= _LEVELS:
        raise ValueError(f"dropout_p must lie in [0, 1 - 2**-17): the drop probability realised is "
                         f"round(p * 2**16) / 2**16, which is 1 (nothing kept) for the {dropout_p!r} received")
    if t == 0:
        return None
    return Dropout(p, None if dropout_seed is None else int(dropout_seed), t, _LEVELS / (_LEVELS - t))


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


def philox(seed: int, counter: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The four output words (w0, w1, w2, w3) of Philox-4x32-10 (Triton's ``tl.randint4x(seed, counter)``),
    each as int64 values in [0, 2³²) of ``counter``'s shape, for int64 ``counter`` ≥ 0."""
    c0 = counter & _M32
    c1 = (counter >> 32) & _M32
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0, k1 = seed & _M32, (seed >> 32) & _M32
    for _ in range(ROUNDS):
        hi_b, lo_b = _mulhilo(_ROUND_B, c2)
        hi_a, lo_a = _mulhilo(_ROUND_A, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return c0, c1, c2, c3


def keep_bits(drop: Dropout, Hq: int, Nq: int, Nk: int, b, h, i, j) -> torch.Tensor:
    """bool keep bits of the pairs (b, h, i, j) of a call whose q has Hq heads and Nq rows and whose k has
    Nk rows (the module docstring's formula): b, h, i int64 tensors that broadcast together with j, the
    key columns (counted from the sequence's first key), an int64 tensor that varies along its last dim
    only (shape (1, …, 1, c)). Philox runs once per group of 8 columns that j touches, not per pair."""
    if j.dim() == 0 or any(n != 1 for n in j.shape[:-1]):
        raise ValueError(f"keep_bits: j must vary along its last dim only, shape (1, ..., 1, c); got {tuple(j.shape)}")
    if j.numel() == 0:
        return torch.ones(torch.broadcast_shapes(b.shape, h.shape, i.shape, j.shape), dtype=torch.bool, device=j.device)
    g0, g1 = int(j.min()) // GROUP, int(j.max()) // GROUP + 1
    g = torch.arange(g0, g1, dtype=torch.int64, device=j.device)  # the groups j touches
    rows = (b * Hq + h) * Nq + i  # (…, 1): the pairs' rows in q
    if rows.dim() != j.dim() or rows.shape[-1] != 1:
        raise ValueError(f"keep_bits: b, h, i must have j's rank and size 1 in its last dim; got {tuple(rows.shape)} "
                         f"against j {tuple(j.shape)}")
    words = philox(drop.seed, rows * ((Nk + GROUP - 1) // GROUP) + g)  # 4 × (…, G)
    halves = torch.stack([x for w in words for x in (w & (_LEVELS - 1), w >> BITS)], -1)  # (…, G, 8)
    u = halves.flatten(-2)[..., j.flatten() - GROUP * g0]  # (…, c): key 8g + 2k + e takes half e of word k
    return u >= drop.t


def _key_columns(Nk: int, cu_seqlens_k, device) -> torch.Tensor:
    """(Nk,) int64: each key row's column within its sequence (its row without varlen)."""
    j = torch.arange(Nk, dtype=torch.int64, device=device)
    if cu_seqlens_k is None:
        return j
    cu = torch.as_tensor(cu_seqlens_k, device=device).to(torch.int64)
    if cu.ndim != 1 or cu.numel() < 2 or int(cu[0]) != 0 or int(cu[-1]) != Nk or bool((cu[1:] < cu[:-1]).any()):
        raise ValueError(f"cu_seqlens_k must be a non-decreasing 1-D sequence from 0 to the mask's Nk = {Nk}, "
                         f"got {cu.tolist()}")
    seq = torch.searchsorted(cu, j, right=True) - 1  # the sequence that holds key row j
    return j - cu[seq]


def dropout_mask(seed: int, p: float, shape: tuple, device=None, cu_seqlens_k=None) -> torch.Tensor:
    """The keep bits ``attention(..., dropout_p=p, dropout_seed=seed)`` uses, as a bool tensor of
    ``shape`` = (B, Hq, Nq, Nk). For varlen: shape (1, Hq, total_q, total_k) (packed rows) and the call's
    ``cu_seqlens_k`` (key columns count from each sequence's start; the bits of pairs within one
    sequence are the call's, those across sequences are never read). Drop probability realised:
    ``realised_p(p)``."""
    if seed is None:
        raise ValueError("dropout_mask needs the call's dropout_seed (an int in [0, 2**63)), got None")
    drop = make(p, seed)
    B, Hq, Nq, Nk = shape
    if drop is None:
        return torch.ones(shape, dtype=torch.bool, device=device)
    ar = lambda n: torch.arange(n, dtype=torch.int64, device=device)  # noqa: E731
    j = _key_columns(Nk, cu_seqlens_k, device)
    return keep_bits(drop, Hq, Nq, Nk, ar(B)[:, None, None, None], ar(Hq)[None, :, None, None],
                     ar(Nq)[None, None, :, None], j[None, None, None, :])
