"""The KV-cache Triton kernels compile for an H100/H200 (sm_90) down to a cubin on this CPU-only
machine: ``triton.compile`` with an explicit ``GPUTarget("cuda", 90, 32)`` (32 = the warp size)
runs the whole pipeline, ptxas included. Kernels cannot be compiled while TRITON_INTERPRET is set
(the test session sets it), so the compilation runs in a child process without it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

DTYPES = ("bf16", "fp16", "fp32")
#: (name, constexprs beyond the dtype's): the decode tile, a verify tile of 8 × 5 rows, paged and
#: windowed walks, the largest tile
VARIANTS = {
    "contig/G4xNq1": dict(D=128, DV=128, GROUPS=4, BLOCK_M=16, BLOCK_D=128, BLOCK_DV=128, PAGED=False, PAGE_SIZE=16,
                          HAS_LEFT=False, HAS_RIGHT=True, BLOCK_N=64),
    "paged64/G8xNq5": dict(D=128, DV=128, GROUPS=8, BLOCK_M=64, BLOCK_D=128, BLOCK_DV=128, PAGED=True, PAGE_SIZE=64,
                           HAS_LEFT=False, HAS_RIGHT=True, BLOCK_N=128),
    "paged16/window": dict(D=64, DV=20, GROUPS=1, BLOCK_M=16, BLOCK_D=64, BLOCK_DV=32, PAGED=True, PAGE_SIZE=16,
                           HAS_LEFT=True, HAS_RIGHT=True, BLOCK_N=32),
    "contig/G16xNq8/noncausal": dict(D=128, DV=128, GROUPS=16, BLOCK_M=128, BLOCK_D=128, BLOCK_DV=128, PAGED=False, PAGE_SIZE=16,
                                     HAS_LEFT=False, HAS_RIGHT=False, BLOCK_N=64),
}


#: unit strides, which the launcher specialises to the constant 1 at run time (caches with a
#: contiguous head dim), as the compile here does too
UNIT = ("sq_d", "sk_d", "sv_d", "so_d")


def _fwd_signature(fn, dt, out_dt, consts):
    """(signature, constexprs, attrs) of ``kvcache_fwd`` as a launch on contiguous caches with
    d = 128 specialises it: unit head-dim strides are constants, pointers and the other strides
    are known multiples of 16 (what lets the loads vectorise and go asynchronous)."""
    ptr = {"Q": dt, "K": dt, "V": dt, "O": out_dt, "LSE": "fp32", "SEQLENS": "i32", "TABLE": "i32", "FO": dt,
           "FLSE": "fp32", "SEM": "i32"}
    sig, consts, attrs = {}, dict(consts), {}
    for idx, p in enumerate(fn.params):
        if p.is_constexpr:
            sig[p.name] = "constexpr"
        elif p.name in UNIT:
            sig[p.name] = "constexpr"
            consts[p.name] = 1
        elif p.name in ptr:
            sig[p.name] = "*" + ptr[p.name]
            attrs[(idx,)] = [["tt.divisibility", 16]]
        else:
            sig[p.name] = "fp32" if p.name == "qk_scale" else "i32"
            if p.name.startswith("s") and p.name[1] in "qkvo":
                attrs[(idx,)] = [["tt.divisibility", 16]]
    return sig, consts, attrs


def _streams(kernel):
    """The K/V tiles are copied to shared memory asynchronously, 16 bytes at a time (the software
    pipeline is in place and the loads are vectorised)."""
    assert "cp.async.cg.shared.global" in kernel.asm["ptx"] and ", 0x10," in kernel.asm["ptx"], \
        "no 16-byte cp.async: the K/V loads are not pipelined"


#: the largest dynamic shared memory one block may use on sm_90 (227 KiB)
SM90_SHARED = 232448


def _fits_and_streams(kernel):
    """_streams, and the block's shared memory fits sm_90 (the config that runs untuned must launch)."""
    _streams(kernel)
    assert kernel.metadata.shared <= SM90_SHARED, f"{kernel.metadata.shared} bytes of shared memory > {SM90_SHARED}"


def compile_all():
    """Compile every forward variant × dtype × (direct output, float32 partials) and the merge
    kernel × output dtype for sm_90; returns (names compiled, failures)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from flashproof.kernels.kvcache.triton import CONFIGS, kvcache_fwd, kvcache_merge, merge_stages

    names, failures = [], []

    def build(fn, sig, consts, name, warps, attrs=None, check=None, stages=3):
        names.append(name)
        try:
            k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": warps, "num_stages": stages})
            assert k.asm.get("cubin"), "no cubin"
            assert "ld.local" not in k.asm["ptx"], "register spills (local loads) in the PTX"
            if check:
                check(k)
        except Exception as e:  # noqa: BLE001 - reported by the test
            failures.append((name, f"{type(e).__name__}: {e}"[:400]))

    # every config on the decode tile with splits merged in the kernel and on the verify tile writing the
    # result directly; every config must fit the H200's shared memory per block (each is a candidate)
    for i, (block_n, warps, stages) in enumerate(CONFIGS):
        for variant, out_dt, fused in (("contig/G4xNq1", "fp32", True), ("paged64/G8xNq5", "bf16", False)):
            consts = dict(VARIANTS[variant], BLOCK_N=block_n, DOT_PREC="tf32", FUSED=fused,
                          MERGE_STAGES=merge_stages(VARIANTS[variant]["BLOCK_M"], VARIANTS[variant]["BLOCK_DV"]))
            sig, cs, attrs = _fwd_signature(kvcache_fwd, "bf16", out_dt, consts)
            build(kvcache_fwd, sig, cs, f"kvcache_fwd/bf16/{variant}/config{i}={block_n},{warps},{stages}/fused={fused}",
                  warps, attrs, _fits_and_streams, stages)
    # paged reads keep the pipeline as deep as contiguous ones (the table entries loaded one tile ahead):
    # the same shared memory per config, for pages holding whole tiles (256) and shorter ones (64)
    for i, (block_n, warps, stages) in enumerate(CONFIGS):
        shared = {}
        for page in (0, 64, 256):
            consts = dict(VARIANTS["contig/G4xNq1"], BLOCK_N=block_n, DOT_PREC="tf32", FUSED=False, MERGE_STAGES=1,
                          PAGED=bool(page), PAGE_SIZE=page or 16)
            sig, cs, attrs = _fwd_signature(kvcache_fwd, "bf16", "bf16", consts)
            build(kvcache_fwd, sig, cs, f"kvcache_fwd/bf16/page{page}/config{i}", warps, attrs,
                  lambda k, page=page: shared.__setitem__(page, k.metadata.shared), stages)
        if len(set(shared.values())) != 1:
            failures.append((f"pipeline depth config{i}", f"shared memory by page size (0: contiguous): {shared}"))
    for dt in DTYPES:
        for variant, consts in VARIANTS.items():
            consts = dict(consts, DOT_PREC="ieee" if dt == "fp32" else "tf32")
            # the result directly (S = 1), float32 partials for the merge kernel, partials merged in the kernel
            for out_dt, fused in sorted({(dt, False), ("fp32", False), ("fp32", True)}):
                sig, cs, attrs = _fwd_signature(kvcache_fwd, dt, out_dt, dict(consts, FUSED=fused, MERGE_STAGES=merge_stages(
                    consts["BLOCK_M"], consts["BLOCK_DV"])))
                # built as the first config (4 warps, 3 stages): with its 64-key tiles it must also fit
                first = consts["BLOCK_N"] == CONFIGS[0].block_n
                build(kvcache_fwd, sig, cs, f"kvcache_fwd/{dt}/{variant}/out={out_dt}/fused={fused}", 4, attrs,
                      _fits_and_streams if first else _streams)
        consts = dict(BLOCK_S=64, BLOCK_DV=128)
        sig = {p.name: "constexpr" if p.is_constexpr else "i32" for p in kvcache_merge.params}
        sig.update(OP="*fp32", LP="*fp32", O=f"*{dt}", LSE="*fp32")
        build(kvcache_merge, sig, consts, f"kvcache_merge/{dt}", 4)
    return names, failures


def test_kvcache_kernels_compile_to_sm90_cubins():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    from flashproof.kernels.kvcache.triton import CONFIGS
    # per dtype: direct, partials and fused partials (fp32: direct and partials coincide), and the merge kernel
    n = 5 * len(CONFIGS) + sum(len(VARIANTS) * len({(dt, False), ("fp32", False), ("fp32", True)}) + 1
                               for dt in DTYPES)
    assert f"compiled {n} of {n}" in r.stdout, r.stdout[-2000:]


if __name__ == "__main__":
    done, bad = compile_all()
    for name, err in bad:
        print("FAILED", name, err)
    print(f"compiled {len(done) - len(bad)} of {len(done)}")
    raise SystemExit(1 if bad else 0)
