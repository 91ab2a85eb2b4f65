"""The Triton kernels' host side: argument packing, autotuning and launches of ``fwd.py`` and ``bwd.py``,
for the calls ``dispatch.plan`` sends here (forward and/or backward "triton").

Every autotuned configuration computes the same function (lengths, head dims and masks are all
handled by predicates, never by a divisibility assumption); the tile constraints that do exist
are ``tl.static_assert``s in the kernels and ``_prune`` here drops configurations that break them.
``Plan.tuning`` picks the autotuner: "autotune" times every configuration of a new key, "first"
runs the first configuration that fits in shared memory. Under the interpreter (CPU) one small
configuration is used. Q/K/V (and dO) are loaded through TMA tensor descriptors where their layout
allows it (``_descriptors``), else through pointers: the same values either way.
(Triton 3.6's warp specialisation, ``tl.range(warp_specialize=True)``, does not compile the forward's
interior loop for sm_90: its NVGPUWarpSpecialization pass asserts in TaskIdPropagation.)
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import triton

from ...interpreter import interpreting
from .bwd import attn_bwd_delta, attn_bwd_dkdv, attn_bwd_dq
from .fwd import LOG2E, attn_fwd
from . import plan as plan_lists

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover — older Triton: pointer loads only
    TensorDescriptor = None

INTERPRET = interpreting()  # read once: Triton decided at import whether its kernels are interpreted


def _configs(shapes, pre_hook=None, explicit=False):
    """shapes: (BLOCK_M, BLOCK_N, num_warps, num_stages) tuples, the first one the default.
    Head dims above 128 keep only the small fallbacks at the end (see ``_prune``). Under the
    interpreter one small configuration replaces them unless ``explicit`` (a test's choice)."""
    if INTERPRET and not explicit:
        shapes = [(16, 16, 4, 1)]
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s, pre_hook=pre_hook)
            for m, n, w, s in shapes]


def _descriptors(prob, *ts):
    """The tensors ``ts`` as 4-D TensorDescriptors (blocks set per configuration by ``_set_blocks``)
    when TMA can load them all: not varlen, non-empty, last dim contiguous, base and the other
    strides 16-byte aligned, no broadcast (stride-0) dim; else None (the pointer path, which takes
    any layout)."""
    if TensorDescriptor is None or prob.seqlens is not None:
        return None
    for t in ts:
        if (t.numel() == 0 or t.stride(-1) != 1 or t.data_ptr() % 16
                or any(st * t.element_size() % 16 or (st == 0 and n > 1) for st, n in zip(t.stride()[:-1], t.shape))):
            return None
    return tuple(TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, 16, 16]) for t in ts)


#: block rows and columns of each descriptor argument: the query-side tensors stream BLOCK_M rows,
#: the key-side ones BLOCK_N; V and dO are DV wide
_DESC_BLOCKS = {"Q": ("BLOCK_M", "BLOCK_D"), "DO": ("BLOCK_M", "BLOCK_DV"), "K": ("BLOCK_N", "BLOCK_D"),
                "V": ("BLOCK_N", "BLOCK_DV")}


def _set_blocks(nargs):
    """Autotuner pre-hook: the descriptors' block shapes follow the configuration being run."""
    if TensorDescriptor is None:
        return
    for name, (rows, cols) in _DESC_BLOCKS.items():
        if isinstance(nargs.get(name), TensorDescriptor):
            nargs[name].block_shape = [1, 1, nargs[rows], nargs[cols]]


def _prune(configs, named_args, **kwargs):
    """Drop configurations whose tiles do not nest in the block-sparse mask's tiles, or are too
    large for the padded head dim (shared memory). The autotuner skips a configuration that runs
    out of shared memory."""
    args = {**named_args, **kwargs}
    tq, tk = args.get("TILE_Q", 0), args.get("TILE_K", 0)
    big = max(args["BLOCK_D"], args["BLOCK_DV"]) > 128
    keep = [c for c in configs
            if (not tq or (tq % c.kwargs["BLOCK_M"] == 0 and tk % c.kwargs["BLOCK_N"] == 0))
            and (not big or (c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= 32 * 64 and c.num_stages <= 2))]
    if not keep:
        keep = [triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=4, num_stages=1)]
    return keep


def _prune_first(configs, named_args, **kwargs):
    """``_prune``, then only the first configuration whose tiles fit ``SMEM_BUDGET`` (tuning="first")."""
    keep = _prune(configs, named_args, **kwargs)
    args = {**named_args, **kwargs}
    fits = [c for c in keep if _smem_estimate(c, args) <= SMEM_BUDGET]
    return (fits or keep[-1:])[:1]


#: shared memory per block on sm_90 is 227 KiB; the estimate below ignores scratch (reductions,
#: layout conversions), hence the margin
SMEM_BUDGET = 200 * 1024


def _smem_estimate(c, args) -> int:
    """Bytes of the tiles a kernel keeps in shared memory: the resident operand once, the streamed
    pair (K/V in the forward and dQ kernels, Q/dO in the dK/dV kernels) ``num_stages`` times.
    Used by the first-configuration mode (which cannot fall back on the autotuner skipping a
    configuration that fails to compile): fp32 tiles are twice the bytes of bf16 ones, and the first
    configurations are sized for bf16 (an H200 run showed fp32 at d = 128 asking for 257 KiB)."""
    q = args.get("Q")
    q = getattr(q, "base", q)  # a TensorDescriptor's tensor
    esize = q.element_size() if hasattr(q, "element_size") else 2
    bm, bn = c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]
    width = args["BLOCK_D"] + args["BLOCK_DV"]
    resident, streamed = (bn, bm) if "DK" in args else (bm, bn)
    return esize * width * (resident + max(c.num_stages, 1) * streamed)


_KEY = ["BLOCK_D", "BLOCK_DV", "IS_VARLEN", "HAS_LEFT", "HAS_RIGHT", "HAS_MASK", "HAS_TILES", "TILE_Q",
        "TILE_K", "DOT_PREC", "DROPOUT", "HAS_BIAS"]
#: Every autotuned kernel, in one place: (kernel, configuration shapes (BLOCK_M, BLOCK_N, num_warps,
#: num_stages) — the first the default —, extra autotuning key, extra autotune arguments).
#: ``tests/kernels/test_correctness.py`` runs each shape on its own against the oracle.
TUNED = {
    "fwd": (attn_fwd, [(128, 64, 8, 3), (128, 128, 8, 3), (128, 64, 4, 3), (64, 64, 4, 3), (64, 128, 4, 3),
                       (128, 32, 4, 4), (64, 32, 4, 2), (32, 32, 4, 2)],
            ["GQA_MAP", "NO_ALPHA", "NO_MAX", "UNGUARDED", "TILE_FLOOR", "USE_DESC", "FMA"], {}),
    "dkdv": (attn_bwd_dkdv, [(32, 128, 4, 3), (64, 128, 8, 3), (64, 64, 4, 3), (32, 64, 4, 3), (32, 32, 4, 2),
                             (16, 32, 4, 2)], ["GQA_MAP", "USE_DESC", "WRITE_DS"], {}),
    "dq": (attn_bwd_dq, [(128, 32, 4, 3), (128, 64, 8, 3), (64, 64, 4, 3), (64, 32, 4, 3), (64, 32, 4, 2),
                         (32, 32, 4, 2)], ["GQA_MAP", "USE_DESC"], {}),
}


def autotuned(name, shapes=None, tuning="autotune"):
    """The autotuner of ``TUNED[name]`` over ``shapes`` if given (a test's single configuration;
    then also under the interpreter), else the table's; ``tuning`` as ``Plan.tuning``."""
    kernel, default, extra_key, kw = TUNED[name]
    configs = _configs(shapes or default, pre_hook=_set_blocks, explicit=shapes is not None)
    prune = _prune_first if tuning == "first" else _prune
    return triton.autotune(configs, key=_KEY + extra_key, prune_configs_by={"early_config_prune": prune},
                           **kw)(kernel)


class Tuners(NamedTuple):
    """The autotuned forward, dK/dV and dQ kernels one call launches."""

    fwd: object
    dkdv: object
    dq: object


def tuners(shapes=None, tuning="autotune") -> Tuners:
    """A set of autotuners; ``shapes``: {"fwd" | "dkdv" | "dq": [(BLOCK_M, BLOCK_N, warps, stages)]}
    to run given configurations (the configuration tests), else the table's."""
    shapes = shapes or {}
    return Tuners(*(autotuned(n, shapes.get(n), tuning) for n in Tuners._fields))


#: the autotuners of each ``Plan.tuning`` mode
TUNERS = {mode: tuners(tuning=mode) for mode in ("autotune", "first")}

#: (autotuner, q's dtype, its key values) -> the configuration it chose.
#: A launch whose key was seen goes straight to the kernel with that configuration: Triton 3.6's
#: ``Autotuner.run`` rebuilds its key on every call with a list scan per argument (~65 arguments
#: here; ~0.1 ms of host time a launch in a cProfile on the H200 machine), which bounds small calls.
_CHOSEN: dict = {}


def _launch(tuner, grid, *args, **kwargs):
    """``tuner[grid](*args, **kwargs)``, through the configuration ``tuner`` chose for this key once
    it has chosen one (its config pre-hook, which sets descriptor block shapes, still runs). Every
    key entry of our autotuners is a keyword argument; the tensors' dtypes follow q's."""
    if not hasattr(tuner, "keys"):  # a test's wrapper around an autotuner: launch through it
        return tuner[grid](*args, **kwargs)
    q = args[0]
    dtype = getattr(q, "base", q).dtype
    key = (tuner, dtype, *(kwargs[k] for k in tuner.keys if k in kwargs))
    cfg = _CHOSEN.get(key)
    if cfg is None:
        tuner[grid](*args, **kwargs)
        _CHOSEN[key] = tuner.best_config
        return
    full = {**kwargs, **cfg.all_kwargs()}
    if cfg.pre_hook is not None:
        cfg.pre_hook({**dict(zip(tuner.arg_names, args)), **full})
    tuner.fn[grid](*args, **full)


def _pow2(n: int) -> int:
    """The smallest power of two >= n >= 1 (``triton.next_power_of_2``'s value, without its ~7 µs of
    call overhead a time; the host calls this for every launch)."""
    return 1 << (n - 1).bit_length()


def _pad(d):
    return max(16, _pow2(d))


def _pad_dv(D, Dv, varlen):
    """BLOCK_DV: Dv padded like ``_pad``, and to at least BLOCK_D for varlen launches. On the H200 (Triton 3.6)
    the varlen forward with BLOCK_DV < BLOCK_D (d >= 32) hit illegal memory accesses or returned NaN rows,
    varying from run to run of one launch, with poisoned strided inputs and a dense mask, while its indices
    are in bounds (KER-BOUNDS-*-REPORTED, the interpreter's bounds check); the root cause is not found (not
    the 8-warp wait race: 4 warps faulted too). Every varlen launch with BLOCK_DV >= BLOCK_D passed there, so
    varlen V tiles are as wide as the q/k ones (lanes past Dv are masked). scripts/gpu_varlen.sh, A-TRITON-CODEGEN."""
    return max(_pad(Dv), _pad(D)) if varlen else _pad(Dv)


def _bucket(n):
    return _pow2(max(n, 1))


_DUMMIES: dict = {}


def _dummies(dev):
    """Placeholder int32 / uint8 arguments of the features a call does not use (never read), one
    pair per device: two allocations and fills less per launch."""
    if dev not in _DUMMIES:
        _DUMMIES[dev] = (torch.zeros(1, dtype=torch.int32, device=dev), torch.zeros(1, dtype=torch.uint8, device=dev))
    return _DUMMIES[dev]


#: longest sequence (or packed total) the Triton kernels take: their index arithmetic is int32, and with
#: window sides clamped to max(Nq, Nk) every intermediate stays below 3·2^29 + 1 < 2^31
#: (``proofs/obligations/kernels/``, item KER-TILES)
MAX_LEN = 2 ** 29


def _index_args(window, Nq, Nk):
    """(left, right) as the kernels take them: 0 for an absent side, a side clamped to max(Nq, Nk) (a
    wider side allows nothing more: key j < Nk ≤ i + Nk − Nq + right once right ≥ Nq, and
    j ≥ 0 ≥ i + Nk − Nq − left once left ≥ Nk). Lengths above ``MAX_LEN`` raise."""
    if max(Nq, Nk) > MAX_LEN:
        raise ValueError(f"the Triton kernels take sequence lengths up to {MAX_LEN} (int32 index arithmetic), "
                         f"got Nq={Nq}, Nk={Nk}")
    cap = max(Nq, Nk)
    return tuple(0 if w is None else min(w, cap) for w in window)


def _common(q, k, v, prob, lists=("KV", "Q")):
    """Launch arguments shared by the forward and the two gradient kernels; ``lists``: the
    block-sparse walk lists the caller's kernels read."""
    B, Hq, Nq, D = q.shape
    Hkv, Nk, Dv = k.shape[1], k.shape[2], v.shape[3]
    dev = q.device
    dummy_i, dummy_u8 = _dummies(dev)
    left, right = prob.window
    drop = prob.dropout  # placeholders (never read) without dropout
    c = dict(seed=drop.seed if drop else 0, drop_t=drop.t if drop else 0, drop_scale=drop.scale if drop else 1.0,
             DROPOUT=drop is not None)
    c.update(Hq=Hq, Hkv=Hkv, GROUPS=prob.groups, Nq=Nq, Nk=Nk, D=D, scale=prob.scale,
             **dict(zip(("left", "right"), _index_args(prob.window, Nq, Nk))),
             HAS_LEFT=left is not None, HAS_RIGHT=right is not None,
             BLOCK_D=_pad(D), BLOCK_DV=_pad_dv(D, Dv, prob.seqlens is not None),
             DOT_PREC="ieee" if q.dtype == torch.float32 else "tf32",
             GQA_MAP="gqa_map" in prob.bugs)
    if prob.seqlens is not None:
        cu_q, cu_k, max_q, max_k = prob.seqlens
        c.update(CU_Q=cu_q, CU_K=cu_k, IS_VARLEN=True, n_seq=cu_q.numel() - 1, max_q=max_q, max_k=max_k)
    else:
        c.update(CU_Q=dummy_i, CU_K=dummy_i, IS_VARLEN=False, n_seq=B, max_q=Nq, max_k=Nk)
    if prob.mask is not None:
        u = prob.mask.contiguous().view(torch.uint8)  # (B|1, Hq|1, Nq, Nk): broadcast dims get stride 0
        strides = tuple(0 if u.shape[i] == 1 else u.stride(i) for i in range(2)) + (u.stride(2), u.stride(3))
        c.update(MASK=u, HAS_MASK=True, mask_strides=strides)
    else:
        c.update(MASK=dummy_u8, HAS_MASK=False, mask_strides=(0, 0, 0, 0))
    if prob.bias is not None:  # (B|1, Hq|1, Nq, Nk), any strides (an expanded mask keeps its stride-0 dims)
        b = prob.bias
        c.update(BIAS=b, HAS_BIAS=True, bias_strides=tuple(0 if b.shape[i] == 1 else b.stride(i) for i in range(4)))
    else:
        c.update(BIAS=dummy_u8, HAS_BIAS=False, bias_strides=(0, 0, 0, 0))
    if prob.tiles is not None:
        c.update({f"{n}_{x}": dummy_i for n in ("KV", "Q") for x in ("NUM", "IDX")})  # lists not asked for
        c.update(tile_lists(prob, B, Hq, Nq, Nk, lists), TQ=prob.tiles.tiles.shape[2], TK=prob.tiles.tiles.shape[3],
                 HAS_TILES=True, TILE_Q=prob.tiles.block_q, TILE_K=prob.tiles.block_k)
    else:
        c.update({f"{n}_{x}": dummy_i for n in ("KV", "Q") for x in ("NUM", "IDX")},
                 TQ=1, TK=1, HAS_TILES=False, TILE_Q=0, TILE_K=0)
    return c


def tile_lists(prob, B, Hq, Nq, Nk, names=("KV", "Q"), block=1024, cache=plan_lists.WALK_LISTS):
    """The walk lists ``names`` of a block-sparse call (``plan.walk_lists``: KV_NUM, KV_IDX per query
    tile, Q_NUM, Q_IDX per key tile), from the per-mask ``cache``: built on the device the first time a
    mask is seen with this geometry (the forward builds KV, the first backward adds Q), reused by every
    later call with the same, unmodified tiles tensor. Tiles that the window excludes entirely are not
    listed (a causal mask's tiles above the diagonal are never visited). ``block``: columns per step of
    the list kernel (a test makes it small, with a fresh ``cache``, to take several steps)."""
    t = prob.tiles
    left, right = prob.window
    geom = plan_lists.Geometry(B, Hq, Nq, Nk, t.block_q, t.block_k, *_index_args(prob.window, Nq, Nk),
                               left is not None, right is not None, t.dense is not None, tuple(t.tiles.shape),
                               tuple(t.tiles.stride()), t.tiles.device)
    return plan_lists.walk_lists(t.tiles, geom, names, cache, block)


def _common_once(q, k, v, prob, lists):
    """``_common`` of this call, computed by whichever of its Triton forward / backward runs first and
    kept in ``prob.cache``; the walk lists ``lists`` are added when a later kernel needs them."""
    c = prob.cache.get("common")
    if c is None:
        c = prob.cache["common"] = _common(q, k, v, prob, lists)
    elif prob.tiles is not None:
        c.update(tile_lists(prob, q.shape[0], q.shape[1], q.shape[2], k.shape[2], lists))
    return c


def _dropout_args(c):
    """The dropout arguments of every kernel: seed, drop threshold, 1/(1 − p), DROPOUT."""
    return {n: c[n] for n in ("seed", "drop_t", "drop_scale", "DROPOUT")}


def _bias_args(c):
    """The additive-bias arguments of every kernel: the bias, its four strides, HAS_BIAS."""
    return dict(BIAS=c["BIAS"], **dict(zip(("sbb", "sbh", "sbi", "sbj"), c["bias_strides"])), HAS_BIAS=c["HAS_BIAS"])


def forward(q, k, v, prob, route, tuned=None, mem=torch):
    """q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv), lse (B, Hq, Nq) fp32.
    route: the ``dispatch.Plan`` (tuning, fma). For the kernel tests only (``attention()`` passes
    neither): tuned, a ``Tuners`` to launch instead of the plan's; mem, what allocates the results
    (``empty``/``empty_like`` as torch's), so that a test can surround them with guard regions."""
    B, Hq, Nq, _ = q.shape
    out = mem.empty(B, Hq, Nq, v.shape[3], dtype=q.dtype, device=q.device)
    lse = mem.empty(B, Hq, Nq, dtype=torch.float32, device=q.device)
    if Nq == 0:
        return out, lse
    tuned = tuned or TUNERS[route.tuning]
    c = _common_once(q, k, v, prob, ("KV",))
    grid = lambda META: (triton.cdiv(c["max_q"], META["BLOCK_M"]), c["n_seq"] * Hq)  # noqa: E731
    descs = _descriptors(prob, q, k, v)
    _launch(tuned.fwd, grid, *(descs or (q, k, v)), out, lse, c["CU_Q"], c["CU_K"], c["MASK"], c["KV_NUM"],
            c["KV_IDX"], *q.stride(), *k.stride(), *v.stride(), *out.stride(), *c["mask_strides"],
            Hq, c["Hkv"], c["GROUPS"], Nq, c["Nk"], c["TQ"], c["TK"], c["D"], v.shape[3],
            c["scale"] * LOG2E, c["left"], c["right"], _bucket(c["max_q"]),
            BLOCK_D=c["BLOCK_D"], BLOCK_DV=c["BLOCK_DV"], IS_VARLEN=c["IS_VARLEN"], HAS_LEFT=c["HAS_LEFT"],
            HAS_RIGHT=c["HAS_RIGHT"], HAS_MASK=c["HAS_MASK"], HAS_TILES=c["HAS_TILES"], TILE_Q=c["TILE_Q"],
            TILE_K=c["TILE_K"], DOT_PREC=c["DOT_PREC"], NO_ALPHA="no_alpha" in prob.bugs,
            NO_MAX="no_max" in prob.bugs, UNGUARDED="unguarded_inf" in prob.bugs,
            TILE_FLOOR="tile_floor" in prob.bugs, GQA_MAP=c["GQA_MAP"], USE_DESC=descs is not None,
            FMA=route.fma, **_dropout_args(c), **_bias_args(c))
    return out, lse


def delta(out, dout, lse, dlse, mem=torch):
    """δ (B, Hq, Nq) fp32 = rowsum(out ∘ dout) − dlse (dlse only on rows with a finite lse): the
    first launch of every backward, the Gluon one included. out, dout (B, Hq, Nq, Dv)."""
    B, Hq, Nq, Dv = out.shape
    d = mem.empty_like(lse)
    has_dlse = dlse is not None
    if has_dlse:
        dlse = dlse.to(torch.float32).contiguous()  # autograd may hand an expanded (stride-0) tensor
    bm = 16 if INTERPRET else 64
    attn_bwd_delta[(triton.cdiv(Nq, bm), B * Hq)](
        out, dout, lse, dlse if has_dlse else lse, d, *out.stride(), *dout.stride(), Hq, Nq, Dv,
        BLOCK_M=bm, BLOCK_DV=_pad(Dv), HAS_DLSE=has_dlse)
    return d


def backward(q, k, v, out, lse, dout, dlse, prob, route, tuned=None, mem=torch, ds=None):
    """Gradients (dq, dk, dv) shaped like (q, k, v), in their dtype. Launches (see ``bwd.py``): δ, the
    dK/dV kernel and the dQ kernel (no atomics, bitwise reproducible, 7 N²d products). ``route``,
    ``tuned``, ``mem`` as in ``forward``. ``ds``: None, or a zero contiguous (B, Hq, Nq, Nk) float32
    tensor into which the dK/dV kernel writes dS (a bias's gradient before its broadcast dims are summed)."""
    B, Hq, Nq, D = q.shape
    Nk = k.shape[2]
    dk, dv = mem.empty_like(k), mem.empty_like(v)
    if Nq == 0 or Nk == 0:
        return torch.zeros_like(q), dk.zero_(), dv.zero_()
    tuned = tuned or TUNERS[route.tuning]
    c = _common_once(q, k, v, prob, ("KV", "Q"))
    dlt = delta(out, dout, lse, dlse, mem)
    common = dict(BLOCK_D=c["BLOCK_D"], BLOCK_DV=c["BLOCK_DV"], IS_VARLEN=c["IS_VARLEN"], HAS_LEFT=c["HAS_LEFT"],
                  HAS_RIGHT=c["HAS_RIGHT"], HAS_MASK=c["HAS_MASK"], HAS_TILES=c["HAS_TILES"], TILE_Q=c["TILE_Q"],
                  TILE_K=c["TILE_K"], DOT_PREC=c["DOT_PREC"], GQA_MAP=c["GQA_MAP"], **_dropout_args(c),
                  **_bias_args(c))
    scalars = (Hq, c["Hkv"], c["GROUPS"], Nq, Nk, c["TQ"], c["TK"], D, v.shape[3], c["scale"] * LOG2E, c["scale"],
               c["left"], c["right"])
    grid_kv = lambda META: (triton.cdiv(c["max_k"], META["BLOCK_N"]), c["n_seq"] * c["Hkv"])  # noqa: E731
    tail = (c["CU_Q"], c["CU_K"], c["MASK"], c["Q_NUM"], c["Q_IDX"])
    strides = (*q.stride(), *k.stride(), *v.stride(), *dout.stride(), *dk.stride(), *dv.stride())
    qd = _descriptors(prob, q, dout)  # streamed by the dK/dV kernel
    kd = _descriptors(prob, k, v)  # streamed by the dQ kernel
    _launch(tuned.dkdv, grid_kv, *(qd[0] if qd else q, k, v, qd[1] if qd else dout), lse, dlt, dk, dv, *tail,
            *strides, *c["mask_strides"], *scalars, _bucket(c["max_k"]), **common, USE_DESC=qd is not None,
            DS=c["BIAS"] if ds is None else ds, WRITE_DS=ds is not None)
    dq = mem.empty_like(q)
    grid_q = lambda META: (triton.cdiv(c["max_q"], META["BLOCK_M"]), c["n_seq"] * Hq)  # noqa: E731
    _launch(tuned.dq, grid_q, q, *(kd or (k, v)), dout, lse, dlt, dq, c["CU_Q"], c["CU_K"], c["MASK"], c["KV_NUM"],
            c["KV_IDX"], *q.stride(), *k.stride(), *v.stride(), *dout.stride(), *dq.stride(), *c["mask_strides"],
            *scalars, _bucket(c["max_q"]), **common, USE_DESC=kd is not None)
    return dq, dk, dv


__all__ = ["forward", "backward", "delta", "tuners", "Tuners", "TUNERS"]
