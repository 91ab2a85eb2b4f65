"""The torch backend: the same tiled algorithm as the Triton kernel, in plain torch (CPU or GPU).

Forward (FlashAttention-2, all query rows at once, one key tile of ``BLOCK_N`` keys per step):
the running state per row is (m, ℓ, acc); a tile with scores s merges in as

    m' = max(m, max_j s_j)           ref = m' if m' > −inf else 0      (the ⊥ guard)
    α  = e^(m − ref)                 p_j = e^(s_j − ref)  (0 on masked pairs)
    ℓ' = α ℓ + Σ_j p_j               acc' = α acc + p V

and at the end out = acc / ℓ (0 when ℓ = 0), lse = m + log ℓ (−inf when ℓ = 0). The backward
recomputes p = e^(s − lse) per tile and uses δ = rowsum(dO ∘ O) − dlse.

Dropout (``prob.dropout``): each tile's keep bits z are regenerated from the seed and the pairs'
positions (``dropout.keep_bits``, the Triton kernels' Philox); the forward accumulates (p ∘ z) V and
scales out by 1/(1 − p) (ℓ, lse undropped); the backward uses the same z: dV += (r ∘ p)ᵀ dO and
dP = r ∘ (dO Vᵀ) with r = z/(1 − p), and δ = rowsum(dO ∘ O) with the dropped-out O.

Arithmetic is float32 (float64 for float64 inputs). Tiles with no allowed pair are skipped. Keys
or queries read only by masked pairs are zeroed before any product, so NaN/inf planted there
cannot leak through 0 · NaN.
"""
from __future__ import annotations

import torch

from .dropout import keep_bits

BLOCK_N = 64  # keys per tile


def forward(q, k, v, prob, route=None):
    """q (B, Hq, Nq, D), k (B, Hkv, Nk, D), v (B, Hkv, Nk, Dv) -> out (B, Hq, Nq, Dv) in q's
    dtype, lse (B, Hq, Nq) float32 (float64 for float64 inputs). ``route``: the plan (unused here)."""
    cdt = torch.float64 if q.dtype == torch.float64 else torch.float32
    B, Hq, Nq, _ = q.shape
    out = torch.zeros(B, Hq, Nq, v.shape[3], dtype=cdt, device=q.device)
    lse = torch.full((B, Hq, Nq), float("-inf"), dtype=cdt, device=q.device)
    for qs, ks, allowed in _segments(q, k, prob):
        o, l = _forward(q[:, :, qs].to(cdt), _heads(k[:, :, ks], prob).to(cdt),
                        _heads(v[:, :, ks], prob).to(cdt), allowed, prob, _kept(q, k, qs, ks, prob))
        out[:, :, qs], lse[:, :, qs] = o, l
    return out.to(q.dtype), lse


def backward(q, k, v, out, lse, dout, dlse, prob, route=None):
    """Gradients (dq, dk, dv) shaped like (q, k, v), in their dtype."""
    cdt = lse.dtype
    dq = torch.zeros(q.shape, dtype=cdt, device=q.device)
    dk = torch.zeros(k.shape, dtype=cdt, device=q.device)
    dv = torch.zeros(v.shape, dtype=cdt, device=q.device)
    finite = lse > float("-inf")
    delta = (dout.to(cdt) * out.to(cdt)).sum(-1)  # δ = rowsum(dO ∘ O), (B, Hq, Nq)
    if dlse is not None:
        delta = delta - torch.where(finite, dlse.to(cdt), 0)
    lse_ref = torch.where(finite, lse, 0)
    head_map = _head_map(q.shape[1], k.shape[1], prob)
    for qs, ks, allowed in _segments(q, k, prob):
        g = _backward(q[:, :, qs].to(cdt), _heads(k[:, :, ks], prob).to(cdt),
                      _heads(v[:, :, ks], prob).to(cdt), dout[:, :, qs].to(cdt),
                      lse_ref[:, :, qs], delta[:, :, qs], allowed, prob, _kept(q, k, qs, ks, prob))
        dq[:, :, qs] = g[0]
        dk[:, :, ks] = torch.zeros_like(dk[:, :, ks]).index_add_(1, head_map, g[1])
        dv[:, :, ks] = torch.zeros_like(dv[:, :, ks]).index_add_(1, head_map, g[2])
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _head_map(hq, hkv, prob):
    """(Hq,) int64: the kv head each query head reads."""
    h = torch.arange(hq)
    return h % hkv if "gqa_map" in prob.bugs else h // prob.groups


def _heads(x, prob):
    """(B, Hkv, N, ·) -> (B, Hq, N, ·): the kv head of every query head."""
    return x.index_select(1, _head_map(x.shape[1] * prob.groups, x.shape[1], prob).to(x.device))


def _segments(q, k, prob):
    """Yield (query slice, key slice, allowed) per sequence; allowed(j0, j1) -> bool
    (B|1, Hq|1, n_q, j1 − j0) for keys j0..j1 of the segment."""
    Nq, Nk = q.shape[2], k.shape[2]
    dense = prob.mask
    if prob.tiles is not None:
        t = prob.tiles
        tiled = t.tiles.repeat_interleave(t.block_q, 2)[:, :, :Nq].repeat_interleave(t.block_k, 3)[..., :Nk]
        dense = tiled if dense is None else dense & tiled
    if prob.seqlens is None:
        spans = [(0, Nq, 0, Nk)]
    else:
        cq, ck = prob.seqlens[0].tolist(), prob.seqlens[1].tolist()
        spans = list(zip(cq, cq[1:], ck, ck[1:]))
    for q0, q1, k0, k1 in spans:
        if q1 > q0:
            sub = None if dense is None else dense[:, :, q0:q1, k0:k1]
            yield slice(q0, q1), slice(k0, k1), _allowed_fn(q1 - q0, k1 - k0, prob.window, sub, q.device)


def _allowed_fn(nq, nk, window, dense, device):
    left, right = window
    pos = torch.arange(nq, device=device)[:, None] + (nk - nq)  # bottom-right aligned position

    def allowed(j0, j1):
        j = torch.arange(j0, j1, device=device)[None, :]
        a = torch.ones(nq, j1 - j0, dtype=torch.bool, device=device)
        if left is not None:
            a &= j >= pos - left
        if right is not None:
            a &= j <= pos + right
        a = a[None, None]  # (1, 1, nq, j1 − j0)
        return a if dense is None else a & dense[..., j0:j1]
    return allowed


def _kept(q, k, qs, ks, prob):
    """None without dropout, else kept(j0, j1) -> bool (B, Hq, n, j1 − j0): the keep bits of the
    segment's query rows qs and its keys ks.start + j0 .. ks.start + j1 − 1 (tensor row indices)."""
    if prob.dropout is None:
        return None
    B, Hq, Nq = q.shape[:3]
    Nk, dev = k.shape[2], q.device
    ar = lambda a, b: torch.arange(a, b, dtype=torch.int64, device=dev)  # noqa: E731
    b, h, i = ar(0, B)[:, None, None, None], ar(0, Hq)[None, :, None, None], ar(qs.start, qs.stop)[None, None, :, None]

    def kept(j0, j1):
        return keep_bits(prob.dropout, Hq, Nq, Nk, b, h, i, ar(ks.start + j0, ks.start + j1)[None, None, None, :])
    return kept


def _tiles(nk, prob):
    n = nk // BLOCK_N if "tile_floor" in prob.bugs else -(-nk // BLOCK_N)
    return [(t * BLOCK_N, min((t + 1) * BLOCK_N, nk)) for t in range(n)]


def _live(a, x, dim):
    """Zero the rows of x (…, n, ·) that no allowed pair reads; a (…, nq, nk) reduced over dim."""
    return torch.where(a.any(dim)[..., None], x, 0)


def _forward(q, k, v, allowed, prob, kept=None):
    """One segment. q (B, Hq, n, D), k (B, Hq, m, D), v (B, Hq, m, Dv) in compute dtype; kept: the
    segment's dropout bits (``_kept``) or None."""
    B, H, n, _ = q.shape
    bugs = prob.bugs
    m = torch.full((B, H, n), float("-inf"), dtype=q.dtype, device=q.device)
    l = torch.zeros((B, H, n), dtype=q.dtype, device=q.device)
    acc = torch.zeros((B, H, n, v.shape[3]), dtype=q.dtype, device=q.device)
    for j0, j1 in _tiles(k.shape[2], prob):
        a = allowed(j0, j1)  # (B|1, H|1, n, bn)
        if not a.any():
            continue
        kb, vb = _live(a, k[:, :, j0:j1], -2), _live(a, v[:, :, j0:j1], -2)
        s = torch.where(a, (q @ kb.transpose(-1, -2)) * prob.scale, float("-inf"))  # (B, H, n, bn)
        if "no_max" in bugs:
            m_new = torch.zeros_like(m)
        else:
            m_new = torch.maximum(m, s.amax(-1))
        ref = m_new if "unguarded_inf" in bugs else torch.where(m_new > float("-inf"), m_new, 0)
        alpha = torch.ones_like(m) if "no_alpha" in bugs else torch.exp(m - ref)
        p = torch.exp(s - ref[..., None])  # e^(−inf − ref) = 0 on masked pairs
        l = alpha * l + p.sum(-1)
        if kept is not None:
            p = torch.where(kept(j0, j1), p, 0)  # dropped pairs leave ℓ alone, only the value sum
        acc = alpha[..., None] * acc + p @ vb
        m = m_new
    empty = l == 0
    out = acc / torch.where(empty, 1, l)[..., None]
    if kept is not None:
        out = out * prob.dropout.scale
    lse = torch.where(empty, float("-inf"), m + torch.log(torch.where(empty, 1, l)))
    return out, lse


def _backward(q, k, v, do, lse, delta, allowed, prob, kept=None):
    """One segment; lse with −inf replaced by 0. Returns (dq (B, Hq, n, D), dk (B, Hq, m, D),
    dv (B, Hq, m, Dv)) per query head (the caller sums GQA groups). kept: as ``_forward``'s (the
    same bits: the forward's mask, replayed)."""
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for j0, j1 in _tiles(k.shape[2], prob):
        a = allowed(j0, j1)
        if not a.any():
            continue
        kb, vb = _live(a, k[:, :, j0:j1], -2), _live(a, v[:, :, j0:j1], -2)
        qb, dob = _live(a, q, -1), _live(a, do, -1)
        s = (qb @ kb.transpose(-1, -2)) * prob.scale  # (B, H, n, bn)
        p = torch.where(a, torch.exp(s - lse[..., None]), 0)
        z = None if kept is None else kept(j0, j1)  # r = z/(1 − p): dV += (r ∘ p)ᵀ dO, dP = r ∘ (dO Vᵀ)
        pv = p if z is None else torch.where(z, p * prob.dropout.scale, 0)
        dv[:, :, j0:j1] += pv.transpose(-1, -2) @ dob
        dp = dob @ vb.transpose(-1, -2)
        if z is not None:
            dp = torch.where(z, dp * prob.dropout.scale, 0)
        ds = torch.where(a, p * (dp - delta[..., None]), 0)
        dq += (ds @ kb) * prob.scale
        dk[:, :, j0:j1] += (ds.transpose(-1, -2) @ qb) * prob.scale
    return dq, dk, dv
