"""The torch path of the speculative sampler (CPU and GPU): the rule of ``api.py`` in batched torch ops,
every data check deferred to one host sync (``api._Deferred``). Bit-identical tokens to the Triton path
and to the verified reference: the draw is integer fixed point (``_fixed``, ``_inverse_cdf``)."""
from __future__ import annotations

import torch

from .api import (UNIFORM_BITS, WEIGHT_BITS, SpecSample, _check_inputs, _check_rows, _check_uniforms, _Deferred,
                  _fail, _row_report, draw_uniforms, row_sum_tol)


def _fixed(w: torch.Tensor) -> torch.Tensor:
    """⌊w·2^40⌋ as int64 (w float64 ≥ 0: the scaling by a power of two is exact)."""
    return torch.floor(w * float(2 ** WEIGHT_BITS)).to(torch.int64)


def _inverse_cdf(W: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """W: (B, V) int64 weights, u: (B,) float64 -> (B,) tokens, min{y : ⌊U·T/2^31⌋ < C_y}."""
    C = torch.cumsum(W, dim=-1)  # exact (integers)
    T = C[:, -1]
    U = torch.floor(u * float(2 ** UNIFORM_BITS)).to(torch.int64)
    mask = (1 << UNIFORM_BITS) - 1
    thr = U * (T >> UNIFORM_BITS) + ((U * (T & mask)) >> UNIFORM_BITS)  # = ⌊U·T/2^31⌋, no overflow
    return torch.searchsorted(C, thr[:, None], right=True)[:, 0]  # #{y : C_y ≤ thr} (C is non-decreasing)


def sample(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens, uniforms, generator, greedy,
           check) -> SpecSample:
    """``api.rejection_sample`` with backend="torch" (arguments as there, already resolved)."""
    defer = _Deferred()  # every data check below is read back with one host sync, before returning
    B, K, V, k_b = _check_inputs(draft_token_ids, p_draft, p_target, p_bonus, num_draft_tokens, defer)
    dev = p_target.device
    u = (draw_uniforms(B, K, device=dev, generator=generator) if uniforms is None
         else _check_uniforms(uniforms, B, K, dev, defer))
    any_greedy = greedy if isinstance(greedy, bool) else True  # a tensor: decided per row, no sync
    g = torch.as_tensor(greedy, device=dev)
    if g.dtype != torch.bool or g.shape not in ((), (B,)):
        _fail(f"greedy must be a bool or a (B,) = ({B},) bool tensor, received {g.dtype} {tuple(g.shape)}")
    g = g.expand(B)
    pos = torch.arange(K, device=dev)
    valid = pos[None, :] < k_b[:, None]  # (B, K)
    ids = draft_token_ids.to(torch.int64)
    bad_id = valid & ((ids < 0) | (ids >= V))

    def report_id():
        b, i = (int(x) for x in bad_id.nonzero()[0])
        _fail(f"draft_token_ids[{b}, {i}] = {int(ids[b, i])} is not a token id in [0, {V})")
    defer.add(bad_id, report_id)
    if check == "full":
        _check_rows(p_draft, p_target, p_bonus, valid, B, defer)
    ids0 = torch.where(valid & ~bad_id, ids, 0)  # (B, K): safe to gather

    # --- accept tests: u·p_draft(x) < p_target(x) in float64 (exact product, no division)
    pt_x = p_target.gather(2, ids0[..., None]).squeeze(-1).double()  # (B, K)
    pd_x = torch.ones_like(pt_x) if p_draft is None else p_draft.gather(2, ids0[..., None]).squeeze(-1).double()
    acc = pt_x > u.accept * pd_x
    if any_greedy:
        acc = torch.where(g[:, None], p_target.argmax(-1) == ids, acc)  # first argmax on ties
    acc = acc & valid
    n_acc = torch.cumprod(acc.to(torch.int64), dim=1).sum(1) if K > 0 else torch.zeros(B, dtype=torch.int64, device=dev)
    rejected = n_acc < k_b  # (B,)

    # --- the one row each request draws from: residual at the first rejection, else the bonus row
    ar = torch.arange(B, device=dev)
    n_c = n_acc.clamp(max=max(K - 1, 0))
    x_rej = ids0[ar, n_c] if K > 0 else torch.zeros(B, dtype=torch.int64, device=dev)  # (B,) the rejected draft
    if K > 0:
        sel_p = torch.where(rejected[:, None], p_target[ar, n_c], p_bonus)  # (B, V), input dtype
        sel_q_rows = None if p_draft is None else p_draft[ar, n_c]  # (B, V), used where rejected
    else:
        sel_p, sel_q_rows = p_bonus, None
    if sel_q_rows is None:
        sel_q = torch.zeros((B, V), dtype=torch.float64, device=dev)
        sel_q[ar, x_rej] = 1.0
    else:
        sel_q = sel_q_rows.double()
    sel_q = torch.where(rejected[:, None], sel_q, 0.0)
    if check == "read":
        tol = row_sum_tol(p_target.dtype)
        lab = lambda idx: f" (the row drawn from by request {idx[0]})"  # noqa: E731
        every = torch.ones(B, dtype=torch.bool, device=dev)
        _row_report("p_target/p_bonus", sel_p, every, tol, lab, defer)
        if p_draft is not None and K > 0:
            _row_report("p_draft", sel_q_rows, rejected, tol, lab, defer)
        bad_x = valid[..., None] & ~(torch.stack([pt_x, pd_x], -1) >= 0)

        def report_x():
            b, i, _ = (int(x) for x in bad_x.nonzero()[0])
            _fail(f"p_target/p_draft at [{b}, {i}, draft token {int(ids[b, i])}] is NaN or negative")
        defer.add(bad_x, report_x)
    u_draw = torch.where(rejected, u.residual, u.bonus)
    sel_p64 = sel_p.double()
    w = (sel_p64 - sel_q).clamp_min(0.0)
    # empty residual (every W_y = ⌊w_y·2^40⌋ is 0, i.e. max w < 2^-40): draw from p_target (stated policy)
    empty = w.amax(-1) < 2.0 ** -WEIGHT_BITS
    tok = _inverse_cdf(_fixed(torch.where(empty[:, None], sel_p64, w)), u_draw)
    if any_greedy:
        tok = torch.where(g, sel_p.argmax(-1), tok)

    tokens = torch.full((B, K + 1), -1, dtype=torch.int64, device=dev)
    tokens[:, :K] = torch.where(pos[None, :] < n_acc[:, None], ids, -1)
    tokens[ar, n_acc] = tok
    defer.raise_first()  # NaN/garbage above only ever reaches a raised error, never the caller
    return SpecSample(tokens, n_acc)
