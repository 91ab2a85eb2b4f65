"""GPU timing of the speculative sampler: ours vs a straightforward multi-pass torch implementation,
with a sweep of Triton configurations (launch-1 tiling) in the same run.

    python -m flashproof.bench.sampler --out out/sampler_bench.json        # H200 defaults + sweep
    python -m flashproof.bench.sampler --configs 16384/512/4/3,8192/512/4/2  # other candidates
    TRITON_INTERPRET=1 python -m flashproof.bench.sampler --device cpu --batch 8 --vocab 4096 --no-sweep \
        --reps 3 --warmup 1                                                       # CPU smoke run

Correctness first: every implementation and every swept configuration gets the same injected uniforms
(random, u = 0, u = 1 − 2^-24) and must return the multi-pass baseline's tokens (it follows the same
fixed-point rule position by position); a row that does not is marked and never chosen, and the exit
status is 1. Then each is timed (CUDA events, median of --reps after --warmup):
  ms      — one whole call, as a caller sees it: the host work, two launches, the one host sync;
  gpu ms  — Triton rows only: --reps calls of the two launches back to back with no sync, divided by
            --reps (the device time per call while the host keeps ahead; ms − gpu ms ≈ host overhead).
Two floors, bytes / --bandwidth (4.29 TB/s measured on the H200):
  full floor   — every input row, B·(2K+1)·V·4 bytes for fp32 (1.21 GB, 0.28 ms at the defaults):
                 what check="full" must read (it validates every row that could be read);
  needed floor — only what the answer depends on: 2 entries per tested draft position, then per
                 request the drawn row pair (p_target and p_draft at the first rejection) or the
                 bonus row: what check="read" must read. It depends on the acceptance pattern and is
                 computed from this problem's actual outcome.
A probe row reads every input once with torch (three sums) as a practical bound. The default of
``rejection_sample`` is marked '*'. The sweep's choice is the fastest check="full" configuration with
identical tokens (printed, and recorded as "choice" in the JSON next to every candidate); DEFAULT_CONFIG
in kernels/sampler/triton.py is set by hand from such a run, never by the bench.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from flashproof.kernels.sampler.api import (UNIFORM_BITS, WEIGHT_BITS, SamplerUniforms, _resolve_backend, draw_uniforms, rejection_sample,
                      row_sum_tol)

__all__ = ["multipass_sample", "make_problem", "needed_bytes", "main"]

# TritonConfig (chunk, block, num_warps, num_stages) candidates timed besides the default (both check
# modes each; ~2 s of compilation per candidate on the H200 host). Axes: programs per request (chunk),
# bytes per step and warps (block, num_warps: 4 fp32 lanes per thread per row at 512/4 and 1024/8),
# prefetch depth (num_stages; 1 = no cp.async pipelining).
SWEEP = [(8192, 512, 4, 3), (32768, 512, 4, 3), (4096, 512, 4, 3), (16384, 512, 4, 2), (16384, 512, 4, 4),
         (16384, 512, 4, 1), (16384, 1024, 8, 3), (16384, 256, 2, 3), (16384, 1024, 4, 2)]


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


def _time_gpu(fn, device, warmup, reps):
    """Device time per call of ``fn`` launched ``reps`` times back to back (no sync in between)."""
    for _ in range(warmup):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps


def _parse_configs(text: str):
    from flashproof.kernels.sampler.triton import TritonConfig
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        parts = item.split("/")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            raise SystemExit(f"--configs: {item!r} is not chunk/block/num_warps/num_stages")
        out.append(TritonConfig(*map(int, parts)))
    return out


def _tag(cfg) -> str:
    return f"{cfg.chunk}/{cfg.block}/w{cfg.num_warps}/s{cfg.num_stages}"


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
    ap.add_argument("--configs", default=None, help="candidates instead of SWEEP: chunk/block/warps/stages,...")
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    dev = torch.device(a.device)
    B, K, V = a.batch, a.k, a.vocab
    ids, pd, pt, pb = make_problem(B, K, V, dev)
    u = draw_uniforms(B, K, device=dev, generator=torch.Generator(device=dev).manual_seed(1))

    from flashproof.kernels.interpreter import interpreting
    from flashproof.kernels.sampler import triton as sampler_triton
    triton_ok = sampler_triton.available() and (dev.type == "cuda" or interpreting())
    default_backend = _resolve_backend("auto", pt)
    default_cfg = sampler_triton.DEFAULT_CONFIG
    cands = [default_cfg]
    if triton_ok and a.sweep:
        extra = _parse_configs(a.configs) if a.configs else [sampler_triton.TritonConfig(*c) for c in SWEEP]
        cands += [c for c in extra if c != default_cfg]
    # the uniforms every implementation must agree on: the timed ones, fresh ones, u = 0, u = 1 − 2^-24
    checks = [u, draw_uniforms(B, K, device=dev, generator=torch.Generator(device=dev).manual_seed(10))]
    e = 1 - 2.0 ** -24
    checks += [SamplerUniforms(*(torch.full_like(t, v) for t in u)) for v in (0.0, e)]
    expected = [multipass_sample(ids, pd, pt, pb, uu) for uu in checks]

    def same(call) -> bool:
        ok = True
        for uu, (t2, n2) in zip(checks, expected):
            o = call(uu)
            ok &= bool(torch.equal(o.tokens, t2) and torch.equal(o.num_accepted, n2))
        return ok

    impls = []  # (name, call(uniforms) -> SpecSample, check, is_default, config, backend)
    for chk in ("full", "read"):
        impls.append((f"ours torch check={chk}", lambda uu, chk=chk: rejection_sample(
            ids, pd, pt, pb, uniforms=uu, check=chk, backend="torch"), chk,
            default_backend == "torch" and chk == "full", None, "torch"))
    if triton_ok:
        for cfg in cands:
            for chk in ("full", "read"):
                impls.append((f"ours triton check={chk} {_tag(cfg)}", lambda uu, chk=chk, cfg=cfg: rejection_sample(
                    ids, pd, pt, pb, uniforms=uu, check=chk, backend="triton", triton_config=cfg), chk,
                    default_backend == "triton" and chk == "full" and cfg == default_cfg, cfg, "triton"))
    ours = rejection_sample(ids, pd, pt, pb, uniforms=u)  # the default call
    es = pt.element_size()
    full_bytes = B * (2 * K + 1) * V * es
    need_bytes = needed_bytes((B, K), V, es, ours.num_accepted.cpu())
    floor_full = full_bytes / a.bandwidth * 1e3
    floor_need = need_bytes / a.bandwidth * 1e3
    rows = []
    t_compile = 0.0
    for name, call, chk, is_default, cfg, be in impls:
        t0 = time.perf_counter()
        identical = same(call)  # first calls: compiles this configuration's kernels
        t_compile += time.perf_counter() - t0
        ms = _time(lambda: call(u), dev, a.warmup, a.reps)
        gpu_ms = None
        if be == "triton" and dev.type == "cuda":
            tol = row_sum_tol(pt.dtype)
            fn = lambda: sampler_triton.sample(ids, pd, pt, pb, None, u.accept, u.residual, u.bonus,  # noqa: E731
                                               False, full=chk == "full", tol=tol, config=cfg)
            gpu_ms = _time_gpu(fn, dev, a.warmup, a.reps)
        need_ms = floor_need if chk == "read" else floor_full
        rows.append({"impl": name, "default": is_default, "check": chk, "ms": ms, "gpu_ms": gpu_ms,
                     "config": None if cfg is None else cfg._asdict(), "identical": identical,
                     "GB_per_s_full": full_bytes / (ms * 1e-3) / 1e9, "x_floor_full": ms / floor_full,
                     "x_floor_needed": ms / need_ms,
                     "gpu_x_floor": None if gpu_ms is None else gpu_ms / need_ms})
    base_ms = _time(lambda: multipass_sample(ids, pd, pt, pb, u), dev, a.warmup, a.reps)
    probe_ms = _time(lambda: torch.stack([pt.sum(), pd.sum(), pb.sum()]).tolist(), dev, a.warmup, a.reps)
    for name, ms in (("probe: torch sums (read all once)", probe_ms), ("multi-pass torch", base_ms)):
        rows.append({"impl": name, "default": False, "check": "full", "ms": ms, "gpu_ms": None, "config": None,
                     "identical": True, "GB_per_s_full": full_bytes / (ms * 1e-3) / 1e9,
                     "x_floor_full": ms / floor_full, "x_floor_needed": ms / floor_full, "gpu_x_floor": None})
    for r in rows:
        r["speedup_vs_multipass"] = base_ms / r["ms"]
    identical = all(r["identical"] for r in rows)
    choice = {}
    for chk in ("full", "read"):
        ok = [r for r in rows if r["config"] is not None and r["check"] == chk and r["identical"]]
        if ok:
            best = min(ok, key=lambda r: r["ms"])
            choice[chk] = {"config": best["config"], "ms": best["ms"], "x_floor": best["x_floor_needed"],
                           "is_default": best["config"] == default_cfg._asdict()}
    res = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "torch": torch.__version__,
           "triton": getattr(sampler_triton.triton, "__version__", None), "B": B, "K": K, "V": V,
           "dtype": str(pt.dtype).replace("torch.", ""), "bandwidth": a.bandwidth,
           "full_GB": full_bytes / 1e9, "floor_full_ms": floor_full, "needed_GB": need_bytes / 1e9,
           "floor_needed_ms": floor_need, "target_full_ms": 1.5 * floor_full, "tokens_identical": identical,
           "default": f"rejection_sample(backend='auto' -> '{default_backend}', check='full'"
                      + (f", {default_cfg})" if default_backend == "triton" else ")"),
           "default_config": default_cfg._asdict(), "choice": choice,
           "mean_accepted": float(ours.num_accepted.float().mean()), "rows": rows,
           "seconds": {"first_calls_incl_compile": t_compile, "total": time.perf_counter() - t_start}}
    print(f"{res['device']}  B={B} K={K} V={V} {res['dtype']}  tokens identical: {identical}  "
          f"mean accepted {res['mean_accepted']:.2f}")
    print(f"full floor   {full_bytes / 1e9:.3f} GB  {floor_full:.3f} ms  (every row; what check='full' reads; "
          f"target 1.5x = {1.5 * floor_full:.3f} ms)")
    print(f"needed floor {need_bytes / 1e9:.3f} GB  {floor_need:.3f} ms  (tested entries + drawn rows; "
          f"what check='read' reads)")
    print(f"default (*): {res['default']}")
    print(f"  {'impl':46s} {'ms':>8s} {'gpu ms':>8s} {'x full':>7s} {'x need':>7s} {'vs multi':>9s}  same")
    for r in rows:
        mark = "*" if r["default"] else " "
        gpu = f"{r['gpu_ms']:8.3f}" if r["gpu_ms"] is not None else f"{'':8s}"
        print(f"{mark} {r['impl']:46s} {r['ms']:8.3f} {gpu} {r['x_floor_full']:7.2f} {r['x_floor_needed']:7.2f} "
              f"{r['speedup_vs_multipass']:8.2f}x  {'yes' if r['identical'] else 'NO'}")
    for chk, c in choice.items():
        cfg = sampler_triton.TritonConfig(**c["config"])
        verdict = "= DEFAULT_CONFIG" if c["is_default"] else f"(DEFAULT_CONFIG is {tuple(default_cfg)})"
        print(f"sweep choice, check={chk}: {cfg}  {c['ms']:.3f} ms = {c['x_floor']:.2f}x its floor  {verdict}")
    print(f"first calls (compilation) {t_compile:.1f} s, total {res['seconds']['total']:.1f} s")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(res, indent=2))
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
