"""GPU timing of the speculative sampler: ours vs a straightforward multi-pass torch implementation.

    python -m flashproof.kernels.sampler_bench --out out/sampler_bench.json        # H200 defaults
    python -m flashproof.kernels.sampler_bench --device cpu --batch 8 --vocab 4096  # smoke run

Correctness first: every implementation gets the same injected uniforms and must return identical
tokens (the multi-pass one follows the same fixed-point rule, position by position). Then each is
timed (CUDA events, median of --reps after --warmup; the time includes the one host sync). Two floors,
bytes / --bandwidth (4.29 TB/s measured on the H200):
  full floor   — every input row, B·(2K+1)·V·4 bytes for fp32 (1.21 GB, 0.28 ms at the defaults):
                 what check="full" must read (it validates every row that could be read);
  needed floor — only what the answer depends on: 2 entries per tested draft position, then per
                 request the drawn row pair (p_target and p_draft at the first rejection) or the
                 bonus row: what check="read" must read. It depends on the acceptance pattern and is
                 computed from this problem's actual outcome.
A probe row reads every input once with torch (three sums) as a practical bound. The Triton rows are
repeated for a few TritonConfig (chunk, block, num_warps) settings; the default configuration of
``rejection_sample`` is marked with '*'.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from .sampler import UNIFORM_BITS, WEIGHT_BITS, SamplerUniforms, _resolve_backend, draw_uniforms, rejection_sample

__all__ = ["multipass_sample", "make_problem", "needed_bytes", "main"]

# TritonConfig (chunk, block, num_warps, num_stages) timed besides the default (row tag shows it)
SWEEP = [(4096, 1024, 4, 1), (8192, 2048, 8, 3)]  # each config compiles 2–4 kernels: keep it short


def multipass_sample(ids, p_draft, p_target, p_bonus, u: SamplerUniforms):
    """The straightforward way: accept tests, then a residual draw at EVERY position (B, K, V) and a
    bonus draw, then pick. Same fixed-point rule as ``rejection_sample``; no validation."""
    B, K, V = p_target.shape
    pt_x = p_target.gather(2, ids[..., None])[..., 0].double()
    pd_x = p_draft.gather(2, ids[..., None])[..., 0].double()
    acc = pt_x > u.accept * pd_x  # (B, K)
    n_acc = torch.cumprod(acc.long(), 1).sum(1)
    scale = float(2 ** WEIGHT_BITS)
    W = torch.floor((p_target.double() - p_draft.double()).clamp_min(0) * scale).long()  # (B, K, V)
    Wp = torch.floor(p_target.double() * scale).long()
    W = torch.where(W.sum(-1, keepdim=True) == 0, Wp, W)  # empty residual: draw from p_target
    rows = torch.cat([W, torch.floor(p_bonus.double() * scale).long()[:, None]], 1)  # (B, K+1, V)
    C = rows.cumsum(-1)
    T = C[..., -1]
    uu = torch.cat([u.residual[:, None].expand(B, K), u.bonus[:, None]], 1)
    U = torch.floor(uu * float(2 ** UNIFORM_BITS)).long()
    mask = (1 << UNIFORM_BITS) - 1
    thr = U * (T >> UNIFORM_BITS) + ((U * (T & mask)) >> UNIFORM_BITS)
    draws = (C <= thr[..., None]).sum(-1)  # (B, K+1)
    ar = torch.arange(B, device=ids.device)
    tokens = torch.full((B, K + 1), -1, dtype=torch.int64, device=ids.device)
    tokens[:, :K] = torch.where(torch.arange(K, device=ids.device)[None] < n_acc[:, None], ids, -1)
    tokens[ar, n_acc] = draws[ar, n_acc]
    return tokens, n_acc


def make_problem(B, K, V, device, dtype=torch.float32, seed=0, sharp=1.0):
    g = torch.Generator(device=device).manual_seed(seed)
    logits_t = torch.randn(B, K + 1, V, device=device, generator=g) * 2
    logits_d = logits_t[:, :K] + sharp * torch.randn(B, K, V, device=device, generator=g)
    pt_all = torch.softmax(logits_t, -1).to(dtype)
    pd = torch.softmax(logits_d, -1).to(dtype)
    ids = torch.multinomial(pd.reshape(-1, V).float(), 1, generator=g).reshape(B, K)
    return ids, pd, pt_all[:, :K].contiguous(), pt_all[:, K].contiguous()


def needed_bytes(ids_shape, V, elem, num_accepted, one_hot=False) -> int:
    """Bytes the answer depends on: 2 entries (1 if one-hot) per tested draft position, then the drawn
    row pair (1 row if one-hot) for a request that rejected, or its bonus row. num_accepted: (B,) on the CPU."""
    B, K = ids_shape
    per_pos = 1 if one_hot else 2
    n = num_accepted.tolist()
    tested = sum(min(k + 1, K) for k in n)  # the accept chain stops at the first rejection
    rejected = sum(1 for k in n if k < K)
    rows = rejected * per_pos + (B - rejected)
    return (tested * per_pos + rows * V) * elem


def _time(fn, device, warmup, reps):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=131072)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--bandwidth", type=float, default=4.29e12, help="copy bandwidth in bytes/s (floor)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    ap.add_argument("--no-sweep", dest="sweep", action="store_false", help="time only the default TritonConfig")
    a = ap.parse_args(argv)
    dev = torch.device(a.device)
    B, K, V = a.batch, a.k, a.vocab
    ids, pd, pt, pb = make_problem(B, K, V, dev)
    u = draw_uniforms(B, K, device=dev, generator=torch.Generator(device=dev).manual_seed(1))

    from . import sampler_triton
    triton_ok = sampler_triton.available() and (dev.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1")
    backends = ["torch"] + (["triton"] if triton_ok else [])
    default_backend = _resolve_backend("auto", pt)
    ours = rejection_sample(ids, pd, pt, pb, uniforms=u)
    base_tokens, base_n = multipass_sample(ids, pd, pt, pb, u)
    identical = bool(torch.equal(ours.tokens, base_tokens) and torch.equal(ours.num_accepted, base_n))
    for s in range(3):  # more seeds, including the u = 0 and u = 1 − 2^-24 edges
        uu = draw_uniforms(B, K, device=dev, generator=torch.Generator(device=dev).manual_seed(10 + s))
        if s == 1:
            uu = SamplerUniforms(torch.zeros_like(uu.accept), torch.zeros_like(uu.residual), torch.zeros_like(uu.bonus))
        if s == 2:
            e = 1 - 2.0 ** -24
            uu = SamplerUniforms(torch.full_like(uu.accept, e), torch.full_like(uu.residual, e),
                                 torch.full_like(uu.bonus, e))
        t2, n2 = multipass_sample(ids, pd, pt, pb, uu)
        for be in backends:
            for chk in ("full", "read"):
                o = rejection_sample(ids, pd, pt, pb, uniforms=uu, backend=be, check=chk)
                identical &= bool(torch.equal(o.tokens, t2) and torch.equal(o.num_accepted, n2))

    es = pt.element_size()
    full_bytes = B * (2 * K + 1) * V * es
    need_bytes = needed_bytes((B, K), V, es, ours.num_accepted.cpu())
    floor_full = full_bytes / a.bandwidth * 1e3
    floor_need = need_bytes / a.bandwidth * 1e3
    impls = []  # (name, fn, check mode or None, is_default, config)
    for be in backends:
        cfgs = [None] + ([sampler_triton.TritonConfig(*c) for c in SWEEP] if be == "triton" and a.sweep else [])
        for cfg in cfgs:
            for chk in ("full", "read"):
                tag = "" if cfg is None else f" {cfg.chunk}/{cfg.block}/w{cfg.num_warps}/s{cfg.num_stages}"
                impls.append((f"ours {be} check={chk}{tag}",
                              lambda be=be, chk=chk, cfg=cfg: rejection_sample(ids, pd, pt, pb, uniforms=u, check=chk,
                                                                               backend=be, triton_config=cfg),
                              chk, be == default_backend and chk == "full" and cfg is None, cfg))
    impls.append(("probe: torch sums (read all once)",
                  lambda: torch.stack([pt.sum(), pd.sum(), pb.sum()]).tolist(), "full", False, None))
    impls.append(("multi-pass torch", lambda: multipass_sample(ids, pd, pt, pb, u), "full", False, None))
    rows = []
    for name, fn, chk, is_default, cfg in impls:
        ms = _time(fn, dev, a.warmup, a.reps)
        need_ms = floor_need if chk == "read" else floor_full
        rows.append({"impl": name, "default": is_default, "check": chk, "ms": ms,
                     "config": None if cfg is None else cfg._asdict(),
                     "GB_per_s_full": full_bytes / (ms * 1e-3) / 1e9, "x_floor_full": ms / floor_full,
                     "x_floor_needed": ms / need_ms})
    base_ms = rows[-1]["ms"]
    for r in rows:
        r["speedup_vs_multipass"] = base_ms / r["ms"]
    res = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "torch": torch.__version__,
           "B": B, "K": K, "V": V, "dtype": "float32", "bandwidth": a.bandwidth,
           "full_GB": full_bytes / 1e9, "floor_full_ms": floor_full, "needed_GB": need_bytes / 1e9,
           "floor_needed_ms": floor_need, "tokens_identical": identical,
           "default": f"rejection_sample(backend='auto' -> '{default_backend}', check='full'"
                      + (f", {sampler_triton.DEFAULT_CONFIG})" if default_backend == "triton" else ")"),
           "mean_accepted": float(ours.num_accepted.float().mean()), "rows": rows}
    print(f"{res['device']}  B={B} K={K} V={V} fp32  tokens identical: {identical}  "
          f"mean accepted {res['mean_accepted']:.2f}")
    print(f"full floor   {full_bytes / 1e9:.3f} GB  {floor_full:.3f} ms  (every row; what check='full' reads)")
    print(f"needed floor {need_bytes / 1e9:.3f} GB  {floor_need:.3f} ms  (tested entries + drawn rows; "
          f"what check='read' reads)")
    print(f"default (*): {res['default']}")
    print(f"  {'impl':52s} {'ms':>8s} {'x full':>7s} {'x need':>7s} {'vs multi':>9s}")
    for r in rows:
        mark = "*" if r["default"] else " "
        print(f"{mark} {r['impl']:52s} {r['ms']:8.3f} {r['x_floor_full']:7.2f} {r['x_floor_needed']:7.2f} "
              f"{r['speedup_vs_multipass']:8.2f}x")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=2))
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
