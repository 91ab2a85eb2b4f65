"""An attention problem: a small, printable spec and the tensors it builds, deterministically.

The fuzzer's strategies draw a ``ProblemSpec`` (plain ints, bools and tuples, so hypothesis can
shrink it and a failure prints as a reproducer); ``build(spec)`` turns it into float64 CPU tensors
with ``torch.Generator(seed)``. Rebuilding the same spec gives the same tensors bit for bit.

Conventions (those of ``docs/fuzz.md`` and DESIGN.md):

* Shapes as SDPA: q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv), dout (B, Hq, Nq, Dv);
  query head h reads kv head h // (Hq // Hkv).
* ``allowed`` (B, Hq, Nq, Nk) bool, True = the pair takes part. It is the conjunction of the
  causal rule (bottom-right: key j ≤ i + Nk − Nq), the window (key j within
  [i + Nk − Nq − left, i + Nk − Nq + right]), the varlen block diagonal (causal and window apply
  inside each sequence, each aligned bottom-right) and the drawn mask family.
* Varlen problems are packed: B = 1 and the sequences lie one after another along N; ``seqlens``
  lists (len_q, len_k) per sequence, zero lengths allowed.
* ``sparse``: the mask of a tile family (``TILE_KINDS``, no empty rows, no varlen, ``block`` a power
  of two ≥ 16) is exactly ``BlockSparseMask(tiles, block, block)`` together with the causal / window
  structure; with ``sparse`` the checks hand it to kernels with a block-sparse API (ours) in that form
  (``Case.block_sparse``, ``targets.block_tiles``), without it as the dense boolean mask: both routes
  are fuzzed on the same masks, and a reproducer names its route. ``sparse_route(spec)`` says which.
  ``density``: the fraction of tiles "block_sparse" keeps (0.6 unless a profile draws others: 0.1
  leaves whole query-tile rows and key-tile columns off, 0 every tile, 1 none).
* ``dlse`` (B, Hq, Nq) is the cotangent of the returned LSE that goes back with ``dout``: None (zero)
  from ``build`` (the oracle's gradients are then those of Σ dout·out, as before it existed);
  the gradient check sets ``lse_cotangent(spec)`` (split-KV and ring merges differentiate the
  LSE): multiples of 1/8 in [−1, 1], exact in every dtype a kernel may return its LSE in, from
  their own generator stream (seed + 2³²), so the other tensors of a spec are unchanged.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

__all__ = ["ProblemSpec", "Problem", "build", "lse_cotangent", "MASK_KINDS", "TILE_KINDS", "POISONS", "DENSITY",
           "sparse_route", "structure", "expand_tiles"]

#: The mask families (besides causal / window / varlen structure). "none" is the shrink target.
MASK_KINDS = ("none", "random", "single_key", "late_keys", "block_sparse")
#: The mask families whose masks are whole ``block`` × ``block`` tiles (on or off), so that with the
#: causal / window structure they are exactly a ``BlockSparseMask`` (``sparse_route``).
TILE_KINDS = ("block_sparse", "late_keys")
#: The default fraction of tiles the "block_sparse" family keeps (``ProblemSpec.density``).
DENSITY = 0.6
#: Values planted where no allowed pair reads (fully masked keys, rows with no allowed key).
POISONS = (None, "nan", "inf", "-inf", "1e30")


class ProblemSpec(NamedTuple):
    """Everything needed to rebuild one problem. Shrinks toward the all-False / smallest values."""

    batch: int = 1
    heads_q: int = 1
    heads_kv: int = 1
    n_q: int = 1
    n_k: int = 1
    d: int = 1
    dv: int = 1
    causal: bool = False
    window: tuple | None = None        # (left, right) keys around the aligned diagonal, or None
    seqlens: tuple | None = None       # varlen: ((len_q, len_k), ...); then batch == 1
    mask_kind: str = "none"
    block: int = 16                    # the tile size the mask families aim at (edges, holes)
    empty_rows: bool = False           # plant fully masked rows
    huge_logits: float = 0.0           # 0: off; else the target max |score| (scale ≫ 1/√d)
    ties: bool = False                 # copy a dominant key into another tile: exact ties of the max
    zero_q: bool = False               # some query rows are 0 (flat softmax rows)
    late_max: bool = False             # the last key ×4: many rows' max sits in the last tile (max grows)
    poison: str | None = None          # one of POISONS
    noncontig: bool = False            # hand the kernel non-contiguous views
    seed: int = 0
    sparse: bool = False               # a tile-structured mask goes to kernels that take one as a BlockSparseMask
    density: float = DENSITY           # the fraction of tiles "block_sparse" keeps (each tile on with this chance)

    def describe(self) -> str:
        """A one-line reproducer: the non-default fields, as ``ProblemSpec(...)`` arguments."""
        default = ProblemSpec()
        parts = [f"{f}={getattr(self, f)!r}" for f in self._fields
                 if getattr(self, f) != getattr(default, f) or f in ("n_q", "n_k", "d", "seed")]
        return "ProblemSpec(" + ", ".join(parts) + ")"


class Problem(NamedTuple):
    """Float64 CPU tensors of one problem (shapes in the module docstring) and its spec."""

    spec: ProblemSpec
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    dout: torch.Tensor
    allowed: torch.Tensor
    scale: float
    cu_seqlens_q: torch.Tensor | None
    cu_seqlens_k: torch.Tensor | None
    dlse: torch.Tensor | None = None   # the LSE cotangent (B, Hq, Nq); None: zero

    def rounded(self, dtype: torch.dtype) -> "Problem":
        """The same problem with q, k, v, dout rounded through ``dtype`` (kept in float64), so the
        oracle sees exactly the numbers a ``dtype`` kernel receives."""
        r = lambda t: t.to(dtype).to(torch.float64)  # noqa: E731
        return self._replace(q=r(self.q), k=r(self.k), v=r(self.v), dout=r(self.dout))

    @property
    def empty_rows(self) -> torch.Tensor:
        """(B, Hq, Nq) bool: rows with no allowed key (output 0, LSE −inf, gradients 0)."""
        return ~self.allowed.any(dim=-1)


def _check(spec: ProblemSpec) -> None:
    for f in ("batch", "heads_q", "heads_kv", "n_q", "n_k", "d", "dv", "block"):
        if getattr(spec, f) < 1:
            raise ValueError(f"ProblemSpec.{f} must be >= 1, received {getattr(spec, f)}")
    if spec.heads_q % spec.heads_kv:
        raise ValueError(f"heads_q ({spec.heads_q}) must be a multiple of heads_kv ({spec.heads_kv}) for GQA")
    if spec.mask_kind not in MASK_KINDS:
        raise ValueError(f"mask_kind must be one of {MASK_KINDS}, received {spec.mask_kind!r}")
    if spec.poison not in POISONS:
        raise ValueError(f"poison must be one of {POISONS}, received {spec.poison!r}")
    if isinstance(spec.density, bool) or not isinstance(spec.density, (int, float)) or not 0 <= spec.density <= 1:
        raise ValueError(f"ProblemSpec.density must be a number in [0, 1], received {spec.density!r}")
    if spec.seqlens is not None:
        if spec.batch != 1:
            raise ValueError(f"varlen problems are packed with batch 1, received batch {spec.batch}")
        tq, tk = sum(a for a, _ in spec.seqlens), sum(b for _, b in spec.seqlens)
        if (tq, tk) != (spec.n_q, spec.n_k):
            raise ValueError(f"seqlens sum to ({tq}, {tk}) but n_q, n_k = ({spec.n_q}, {spec.n_k})")


def structure(n_q: int, n_k: int, causal: bool, window, device=None) -> torch.Tensor:
    """(n_q, n_k) bool: the causal and window rules of one sequence, aligned bottom-right as
    ``attention()`` defines them: key j for query i iff i + n_k − n_q − left ≤ j ≤ i + n_k − n_q + right,
    ``window`` = (left, right) with None unbounded (or None: no window), ``causal`` capping right at 0."""
    i = torch.arange(n_q, device=device).unsqueeze(1)
    j = torch.arange(n_k, device=device).unsqueeze(0)
    diag = i + (n_k - n_q)  # the key aligned with query i
    left, right = window if window is not None else (None, None)
    if causal:
        right = 0 if right is None else min(right, 0)
    ok = torch.ones(n_q, n_k, dtype=torch.bool, device=device)
    if left is not None:
        ok &= j >= diag - left
    if right is not None:
        ok &= j <= diag + right
    return ok


def expand_tiles(tiles: torch.Tensor, block_q: int, block_k: int, n_q: int, n_k: int) -> torch.Tensor:
    """(…, ceil(n_q / block_q), ceil(n_k / block_k)) tiles → (…, n_q, n_k): each tile spread over its
    block_q × block_k pairs, the edge tiles cut."""
    return tiles.repeat_interleave(block_q, dim=-2)[..., :n_q, :].repeat_interleave(block_k, dim=-1)[..., :n_k]


def _structure(spec: ProblemSpec, n_q: int, n_k: int) -> torch.Tensor:
    """(n_q, n_k) bool: causal and window rules for one sequence, aligned bottom-right."""
    return structure(n_q, n_k, spec.causal, spec.window)


def _family_mask(spec: ProblemSpec, g: torch.Generator) -> torch.Tensor:
    """(B, Hq, Nq, Nk) bool for the drawn mask family (True = allowed)."""
    B, H, nq, nk, b = spec.batch, spec.heads_q, spec.n_q, spec.n_k, spec.block
    shape = (B, H, nq, nk)
    kind = spec.mask_kind
    if kind == "none":
        return torch.ones(shape, dtype=torch.bool)
    if kind == "random":
        return torch.rand(shape, generator=g) < 0.7
    if kind == "single_key":
        # One allowed key per row, at a tile edge: 0, b−1, b or the last key.
        edges = torch.tensor(sorted({0, min(b - 1, nk - 1), min(b, nk - 1), nk - 1}))
        pick = edges[torch.randint(len(edges), (B, H, nq), generator=g)]
        return torch.nn.functional.one_hot(pick, nk).bool()
    if kind == "late_keys":
        # Keys of the first ⌊(nk−1)/b⌋ tiles (at least one tile when nk > b) are masked for all rows.
        start = ((nk - 1) // b) * b
        ok = torch.zeros(shape, dtype=torch.bool)
        ok[..., start:] = True
        return ok
    # block_sparse: whole (b × b) tiles switched off at random (each kept with chance spec.density).
    tiles = torch.rand(B, H, math.ceil(nq / b), math.ceil(nk / b), generator=g) < spec.density
    return expand_tiles(tiles, b, b, nq, nk)


def sparse_route(spec: ProblemSpec) -> bool:
    """Whether the checks hand ``spec``'s mask to a kernel with a block-sparse API as a
    ``BlockSparseMask(tiles, spec.block, spec.block)`` (module docstring): ``spec.sparse`` and a mask
    that is sure to be one (a tile family, no empty rows, no varlen, a block the API takes)."""
    b = spec.block
    return (spec.sparse and spec.mask_kind in TILE_KINDS and not spec.empty_rows and spec.seqlens is None
            and b >= 16 and b & (b - 1) == 0)


def _allowed(spec: ProblemSpec, g: torch.Generator) -> torch.Tensor:
    if spec.seqlens is None:
        ok = _structure(spec, spec.n_q, spec.n_k).expand(spec.batch, spec.heads_q, -1, -1).clone()
    else:
        ok = torch.zeros(1, spec.heads_q, spec.n_q, spec.n_k, dtype=torch.bool)
        oq = ok_k = 0
        for lq, lk in spec.seqlens:
            ok[:, :, oq:oq + lq, ok_k:ok_k + lk] = _structure(spec, lq, lk)
            oq, ok_k = oq + lq, ok_k + lk
    ok &= _family_mask(spec, g)
    if spec.empty_rows:
        ok &= ~(torch.rand(spec.batch, spec.heads_q, spec.n_q, 1, generator=g) < 0.3)
    return ok


def build(spec: ProblemSpec) -> Problem:
    """The tensors of ``spec`` (float64, CPU), deterministic in ``spec.seed``."""
    _check(spec)
    g = torch.Generator().manual_seed(spec.seed)
    B, Hq, Hkv, nq, nk, d, dv = (spec.batch, spec.heads_q, spec.heads_kv, spec.n_q, spec.n_k,
                                 spec.d, spec.dv)
    randn = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    q, k, v, dout = randn(B, Hq, nq, d), randn(B, Hkv, nk, d), randn(B, Hkv, nk, dv), randn(B, Hq, nq, dv)
    allowed = _allowed(spec, g)
    if spec.zero_q:
        q = q * (torch.rand(B, Hq, nq, 1, generator=g) >= 0.5)
    if spec.ties and nk >= 2:
        # Make key 0 dominant and copy it into the last key (another tile when nk > block).
        k[:, :, 0] *= 3.0
        k[:, :, -1] = k[:, :, 0]
        v[:, :, -1] = randn(B, Hkv, dv)
    if spec.late_max and nk >= 2:
        # The running max then grows at the last tile for the rows whose q points along k_last:
        # the online-softmax rescale (α = e^(m_old − m_new)) must fire. Ties alone never grow it.
        k[:, :, -1] *= 4.0
    scale = 1.0 / math.sqrt(d)
    if spec.huge_logits:
        raw = (q @ k.repeat_interleave(Hq // Hkv, dim=1).transpose(-1, -2)).abs()  # (B, Hq, Nq, Nk)
        top = raw[allowed].max().item() if allowed.any() else 0.0  # the largest allowed |q·k|
        scale = spec.huge_logits / top if top > 0 else 1.0
    if spec.poison is not None:
        q, k, v = _poison(spec, q, k, v, allowed)
    cu_q = cu_k = None
    if spec.seqlens is not None:
        cu_q = torch.tensor([0] + [a for a, _ in spec.seqlens], dtype=torch.int32).cumsum(0).to(torch.int32)
        cu_k = torch.tensor([0] + [b for _, b in spec.seqlens], dtype=torch.int32).cumsum(0).to(torch.int32)
    return Problem(spec, q, k, v, dout, allowed, float(scale), cu_q, cu_k)


def lse_cotangent(spec: ProblemSpec) -> torch.Tensor:
    """(B, Hq, Nq) float64: the LSE cotangent the gradient check feeds back (module docstring)."""
    g = torch.Generator().manual_seed(spec.seed + (1 << 32))
    return torch.randint(-8, 9, (spec.batch, spec.heads_q, spec.n_q), generator=g).to(torch.float64) / 8


def _poison(spec: ProblemSpec, q, k, v, allowed):
    """Plant the poison in K and V rows no query of their kv-head group may read and in Q rows that
    may read no key. Those entries feed only masked pairs (see docs/fuzz.md, "poison"); the checks
    also hand poisoned problems to the kernel as views whose head-dim padding holds the poison."""
    val = float(spec.poison)
    group = spec.heads_q // spec.heads_kv
    B, Hkv = k.shape[:2]
    key_read = allowed.reshape(B, Hkv, group, spec.n_q, spec.n_k).any(dim=2).any(dim=2)  # (B, Hkv, Nk)
    k, v = k.clone(), v.clone()
    k[~key_read] = val
    v[~key_read] = val
    q = q.clone()
    q[~allowed.any(dim=-1)] = val
    return q, k, v
