"""``scaled_dot_product_attention``: ``torch.nn.functional.scaled_dot_product_attention``'s signature
and semantics, on flashproof's kernels (a thin front over ``attention()``, hence over the one router,
``dispatch.plan``, and the custom op of ``op.py``).

What it maps, and how:

* ``is_causal``: SDPA's is top-left aligned (query i sees keys j ≤ i, whatever Nq and Nk are);
  ``attention(causal=True)`` is bottom-right aligned. For Nq ≥ Nk top-left causal is the window
  (None, Nq − Nk); for Nq < Nk it needs a right edge left of the diagonal, given as the boolean mask
  j ≤ i.
* ``attn_mask``: boolean (True = takes part) or float (added to the scaled scores), broadcastable to
  (B, Hq, Nq, Nk) as SDPA broadcasts it — (Nq, Nk), (B, 1, 1, Nk) key padding, (B, 1, Nq, Nk), … —
  expanded without a copy. A float mask is added to the scores by the Triton kernels on CUDA (a bias
  tile per score tile, broadcast dims read with stride 0) and by the torch kernels on CPU; one whose
  entries are all 0 or −inf is the boolean mask ``attn_mask == 0`` (``api.validate``), which Gluon
  also takes. A float mask that requires grad gets its gradient (dS summed over its broadcast dims;
  torch and Triton). ``attn_mask`` together with
  ``is_causal`` is refused, as SDPA refuses it. A float mask must have q's dtype (as SDPA requires).
* GQA (Hq ≠ Hkv) only with ``enable_gqa=True``; without it, the error SDPA raises (a RuntimeError
  naming the head dims).
* ``dropout_p``: passed to ``attention(dropout_p=…)`` (SDPA applies it whatever the module's training
  mode, and so does this; the drop probability realised is round(p · 2¹⁶) / 2¹⁶, and p must be below
  1 − 2⁻¹⁷: ``attention``'s docstring); a fresh seed per call comes from torch's default generator, so
  ``torch.manual_seed`` reproduces a run. It is drawn by a tensor op (``dropout.seed_tensor``) and read
  only inside the custom op, so ``torch.compile(fullgraph=True)`` traces a dropout call without a
  graph break.
* Shapes: q (…, Hq, Nq, D), k (…, Hkv, Nk, D), v (…, Hkv, Nk, Dv) with 3 or 4 dims (a 3-D call is
  one head); out (…, Hq, Nq, Dv).

Where SDPA returns NaN — a query row with no allowed key (an all-False boolean row, an all −inf float
row) — this returns out 0 and lse −inf (and zero gradients): flashproof's convention, which the spec
proves the kernels keep (the softmax of an empty row is the empty sum; 0 is the value that merges
as "no contribution" when split keys are combined).

``return_lse=True`` returns ``AttnOut(out, lse)`` with lse (…, Hq, Nq) float32 (float64 for float64
inputs), natural log.
"""
from __future__ import annotations

import math

import torch

from .api import AttnOut, attention

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, return_lse=False, backend="auto", tuning="autotune"):
    """SDPA's call on flashproof's kernels (module docstring: semantics and the empty-row convention).

    query (…, Hq, Nq, D), key (…, Hkv, Nk, D), value (…, Hkv, Nk, Dv) -> out (…, Hq, Nq, Dv), or
    ``AttnOut(out, lse)`` with ``return_lse=True`` (lse (…, Hq, Nq)). ``backend``, ``tuning``: as
    ``attention``'s.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() not in (3, 4):
            raise ValueError(f"{name} must be 3-D (B, N, D) or 4-D (B, H, N, D), got shape {tuple(t.shape)}")
    if not query.dim() == key.dim() == value.dim():
        raise ValueError(f"query, key, value must have one number of dims, got {query.dim()}, {key.dim()}, "
                         f"{value.dim()}")
    if not isinstance(is_causal, bool) or not isinstance(enable_gqa, bool):
        raise TypeError(f"is_causal and enable_gqa must be bools, got {type(is_causal).__name__}, "
                        f"{type(enable_gqa).__name__}")
    one_head = query.dim() == 3
    q, k, v = (t.unsqueeze(1) if one_head else t for t in (query, key, value))  # (B, H, N, ·)
    B, Hq, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    if Hq != Hkv and not enable_gqa:
        raise RuntimeError(f"The size of tensor a ({Hq}) must match the size of tensor b ({Hkv}) at non-singleton "
                           "dimension 1 (query and key heads differ: pass enable_gqa=True for grouped-query attention)")
    if enable_gqa and (Hkv == 0 or Hq % Hkv):
        raise RuntimeError(f"enable_gqa=True needs the query heads to be a multiple of the key/value heads, "
                           f"got Hq={Hq}, Hkv={Hkv}")
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    mask = bias = None
    window = None
    if attn_mask is not None:
        m = _broadcast_mask(attn_mask, query, B, Hq, Nq, Nk)
        if m.dtype == torch.bool:
            mask = m
        else:
            bias = m
    elif is_causal:
        if Nq >= Nk:
            window = (None, Nq - Nk)  # bottom-right position i + Nk − Nq, right edge Nq − Nk past it: j ≤ i
        else:
            i = torch.arange(Nq, device=q.device)
            mask = (torch.arange(Nk, device=q.device)[None, :] <= i[:, None])[None, None]  # (1, 1, Nq, Nk)
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    res = attention(q, k, v, window=window, mask=mask, bias=bias, scale=scale, return_lse=True, backend=backend,
                    tuning=tuning, dropout_p=dropout_p)
    out, lse = res
    if one_head:
        out, lse = out.squeeze(1), lse.squeeze(1)
    return AttnOut(out, lse) if return_lse else out


def _broadcast_mask(attn_mask, query, B, Hq, Nq, Nk):
    """attn_mask as a (B|1, Hq|1, Nq, Nk) view (SDPA's broadcasting: right-aligned, size-1 dims
    stretch); bool, or float of query's dtype."""
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"attn_mask must be a tensor (bool or float), got {type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and attn_mask.dtype != query.dtype:
        raise RuntimeError("Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                           f"attn_mask.dtype: {attn_mask.dtype} and  query.dtype: {query.dtype} instead.")
    target = (B, Hq, Nq, Nk) if query.dim() == 4 else (B, Nq, Nk)
    if attn_mask.dim() > len(target):
        raise RuntimeError(f"attn_mask of shape {tuple(attn_mask.shape)} has more dims than the scores "
                           f"{target}")
    shape = (1,) * (len(target) - attn_mask.dim()) + tuple(attn_mask.shape)
    for got, want in zip(shape, target):
        if got not in (1, want):
            raise RuntimeError(f"attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to the scores "
                               f"{target}")
    m = attn_mask.reshape(shape)
    if query.dim() == 3:
        m = m.unsqueeze(1)  # (B|1, 1, Nq|1, Nk|1)
    return m.expand(m.shape[0], m.shape[1], Nq, Nk)
