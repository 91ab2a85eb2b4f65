"""Fuzz targets for ``flashproof.kernels.kvcache.attention_with_kvcache``: ``kvcache-torch`` and
``kvcache-triton`` (registered with ``targets`` on import).

The campaign draws dense problems; this adapter turns each into a KV-cache call with everything that
call adds to get wrong, so the oracle's verdict on the dense problem judges it:

* every sequence becomes one request (a varlen problem's sequences have ragged lengths, zeros and
  ones among them; a batched problem's requests share Nk): its keys are cache positions 0 … Nk_b − 1,
  ``cache_seqlens[b] = Nk_b``; its Nq_b queries are the last rows of Nq = max Nq_b new queries (query
  i sits at position L − Nq + i, so the bottom-right rules of the dense problem are the cache's);
  the padding rows are dropped from the answer;
* the cache holds NaN past every length (and, paged, in spare pages; table entries past a request's
  last page are −1), so any read past a length shows up in the output;
* half the problems (chosen from their shape, so a rerun repeats the choice) go to a paged cache of
  16-position pages in a permuted order, half of those stored heads first (``kv_layout="HND"``,
  (num_pages, Hkv, page_size, ·)); the split count is drawn from {None, 1, 2, 3, 5}.

Masks other than causal/window/varlen, gradients, and (Triton) float64 are not features of this call.
"""
from __future__ import annotations

import importlib.util

import torch

from . import targets

__all__ = ["to_kvcache_call", "run", "PAGE_SIZE"]

PAGE_SIZE = 16
_SPLITS = (None, 1, 2, 3, 5)


def _sequences(c: targets.Case):
    """[(q_b (Hq, Nq_b, D), k_b (Hkv, Nk_b, D), v_b (Hkv, Nk_b, Dv))] per request."""
    if c.cu_seqlens_q is None:
        return [(c.q[b], c.k[b], c.v[b]) for b in range(c.q.shape[0])]
    cq, ck = c.cu_seqlens_q.tolist(), c.cu_seqlens_k.tolist()
    return [(c.q[0, :, cq[i]:cq[i + 1]], c.k[0, :, ck[i]:ck[i + 1]], c.v[0, :, ck[i]:ck[i + 1]])
            for i in range(len(cq) - 1)]


def to_kvcache_call(c: targets.Case):
    """The KV-cache form of a structured case: (q (R, Hq, Nq, D), k_cache, v_cache, kwargs, rows) where
    rows[b] = Nq_b (the last Nq_b query rows of request b are the case's)."""
    seqs = _sequences(c)
    R = len(seqs)
    Hq, D = c.q.shape[1], c.q.shape[-1]
    Hkv, Dv = c.k.shape[1], c.v.shape[-1]
    nq = [s[0].shape[1] for s in seqs]
    nk = [s[1].shape[1] for s in seqs]
    Nq = max(1, max(nq))
    dev, dt = c.q.device, c.q.dtype
    g = torch.Generator().manual_seed(hash((R, Hq, Hkv, Nq, D, Dv, tuple(nk), c.causal, c.window)) % (1 << 31))
    paged = bool(torch.randint(2, (1,), generator=g))
    splits = _SPLITS[int(torch.randint(len(_SPLITS), (1,), generator=g))]
    hnd = bool(torch.randint(2, (1,), generator=g))   # drawn after the others: their choices are as before
    q = torch.zeros(R, Hq, Nq, D, device=dev, dtype=dt)
    for b, (qb, _, _) in enumerate(seqs):
        q[b, :, Nq - nq[b]:] = qb
    pages = [-(-n // PAGE_SIZE) for n in nk]
    n_max = PAGE_SIZE * max(1, max(pages))
    k = torch.full((R, Hkv, n_max, D), float("nan"), device=dev, dtype=dt)
    v = torch.full((R, Hkv, n_max, Dv), float("nan"), device=dev, dtype=dt)
    for b, (_, kb, vb) in enumerate(seqs):
        k[b, :, :nk[b]] = kb
        v[b, :, :nk[b]] = vb
    kw = dict(cache_seqlens=torch.tensor(nk, dtype=torch.int32, device=dev), causal=c.causal, window=c.window,
              scale=c.scale, num_splits=splits, return_lse=True)
    if not paged:
        return q, k, v, kw, nq
    per = n_max // PAGE_SIZE
    total = R * per + 2                                           # two spare pages, all NaN
    order = torch.randperm(total, generator=g)[:R * per].reshape(R, per)
    table = order.to(torch.int32).clone()
    for b in range(R):
        table[b, pages[b]:] = -1                                  # never read: past the request's last page

    def to_pages(x):                                              # (R, Hkv, n_max, ·) → (total, PAGE, Hkv, ·)
        out = torch.full((total, PAGE_SIZE, Hkv, x.shape[-1]), float("nan"), device=dev, dtype=dt)
        out[order.flatten().to(dev)] = x.reshape(R, Hkv, per, PAGE_SIZE, -1).permute(0, 2, 3, 1, 4).reshape(
            R * per, PAGE_SIZE, Hkv, -1)
        return out
    kw["block_table"] = table.to(dev)
    kc, vc = to_pages(k), to_pages(v)
    if hnd:  # the same pages stored (total, Hkv, PAGE, ·)
        kc, vc = kc.transpose(1, 2).contiguous(), vc.transpose(1, 2).contiguous()
        kw["kv_layout"] = "HND"
    return q, kc, vc, kw, nq


def run(backend: str):
    def call(c: targets.Case, deterministic: bool) -> targets.KernelOut:
        from flashproof.kernels.kvcache import attention_with_kvcache

        if not c.structured:
            raise targets.Unsupported("attention_with_kvcache takes causal/window/varlen structure only, no mask")
        # building the cache is the harness's code: a failure there is a HarnessError, not the kernel's
        q, k, v, kw, nq = targets.adapter_step(f"kvcache-{backend}", to_kvcache_call, c)
        # the campaign's tuning (Case.tuning: "first" unless --all-configs), and "first" under the interpreter
        tuning = c.tuning if c.q.is_cuda else "first"
        extra = {"tuning": tuning} if backend == "triton" else {}
        with torch.no_grad():
            r = attention_with_kvcache(q, k, v, backend=backend, **kw, **extra)
        if c.cu_seqlens_q is None:            # every request has the case's Nq queries: no padding rows
            return targets.KernelOut(r.out, r.lse)
        # the padding rows dropped from a result of the call's shapes (checked first: a wrong one is the kernel's)
        R, Hq, Nq = q.shape[:3]
        if tuple(r.out.shape[:3]) != (R, Hq, Nq) or r.lse is None or tuple(r.lse.shape) != (R, Hq, Nq):
            raise ValueError(f"attention_with_kvcache returned out {tuple(r.out.shape)}, lse "
                             f"{None if r.lse is None else tuple(r.lse.shape)} for q {tuple(q.shape)}")
        return targets.adapter_step(f"kvcache-{backend}", _unpadded, r, nq, Nq)
    return call


def _unpadded(r, nq: list, Nq: int) -> targets.KernelOut:
    """The case's query rows of the call's result: the last Nq_b rows of request b, packed."""
    out = torch.cat([r.out[b, :, Nq - n:] for b, n in enumerate(nq)], 1)          # (Hq, ΣNq_b, Dv)
    lse = torch.cat([r.lse[b, :, Nq - n:] for b, n in enumerate(nq)], 1)          # (Hq, ΣNq_b)
    return targets.KernelOut(out[None], lse[None])


def _unavailable(backend: str):
    def why(device: str) -> str | None:
        if importlib.util.find_spec("flashproof.kernels.kvcache") is None:
            return "flashproof.kernels.kvcache is not built"
        if backend == "triton":
            if importlib.util.find_spec("triton") is None:
                return "triton is not installed"
            from flashproof.kernels.interpreter import interpreting
            if device == "cpu" and not interpreting():
                return "triton on CPU needs TRITON_INTERPRET=1"
        if device.startswith("cuda") and not torch.cuda.is_available():
            return "no CUDA device"
        return None
    return why


_LACKS = frozenset({"mask", "grad", "block_sparse"})
for _backend in ("torch", "triton"):
    targets.register(targets.Target(
        f"kvcache-{_backend}", f"ours, attention_with_kvcache ({_backend} path): ragged, paged, poisoned caches",
        run(_backend), _unavailable(_backend),
        (lambda d: _LACKS) if _backend == "torch" else (lambda d: _LACKS | {"fp64"}), "fwd", (16, 64)))
