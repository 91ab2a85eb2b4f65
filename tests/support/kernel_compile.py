"""Compile every attention kernel for an H100/H200 (sm_90) on a machine without a GPU: triton.compile
with an explicit GPUTarget runs the whole pipeline down to a cubin (ptxas ships with Triton), so a
change that only the GPU compiler rejects shows up on CPU. Run as a script (``python
tests/support/kernel_compile.py``) by tests/kernels/test_kernel_compile.py in a child process without
TRITON_INTERPRET (interpreted kernels cannot be compiled); prints "compiled N of M"."""
from __future__ import annotations

import os
import re
import subprocess

import torch

_INT_PTRS = {f"{n}_{x}" for n in ("KV", "Q") for x in ("NUM", "IDX")} | {"CU_Q", "CU_K"}
_DATA_PTRS = {"Q", "K", "V", "DO", "DK", "DQ", "O"}
_F32_PTRS = {"LSE", "DELTA", "DLSE", "DS"}
#: the arguments each kernel takes as tensor descriptors when USE_DESC (the Triton host's launches)
_STREAMED = {"attn_fwd": ("Q", "K", "V"), "attn_bwd_dkdv": ("Q", "DO"), "attn_bwd_dq": ("K", "V")}
#: the Gluon kernels' element types by the names of their variants
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _signature(fn, dt, consts):
    from flashproof.kernels.attention.triton.host import _DESC_BLOCKS

    sig = {}
    names = {p.name for p in fn.params}
    for p in fn.params:
        n = p.name
        if p.is_constexpr:
            sig[n] = "constexpr"
        elif n in _INT_PTRS:
            sig[n] = "*i32"
        elif n == "MASK":
            sig[n] = "*u8"
        elif n in _F32_PTRS:
            sig[n] = "*fp32"
        elif consts.get("USE_DESC") and "USE_DESC" in names and n in _STREAMED[fn.__name__]:
            rows, cols = _DESC_BLOCKS[n]  # 4-D TMA descriptors, blocks as the pre-hook sets them
            sig[n] = f"tensordesc<{dt}[1, 1, {consts[rows]}, {consts[cols]}]>"
        elif n in _DATA_PTRS or n == "BIAS" or (n == "DV" and fn.__name__ == "attn_bwd_dkdv"):
            sig[n] = f"*{dt}"
        elif n in ("qk_scale", "sm_scale", "drop_scale"):
            sig[n] = "fp32"
        elif n == "seed":  # a 63-bit seed
            sig[n] = "i64"
        elif n == "drop_t":  # the 16-bit threshold round(p * 2^16) < 2^16: Triton passes it as i32
            sig[n] = "i32"
        else:
            sig[n] = "i32"
    return sig, {n: consts[n] for n, t in sig.items() if t == "constexpr"}


BASE = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_D=64, BLOCK_DV=64, IS_VARLEN=False, HAS_LEFT=False, HAS_RIGHT=True,
            HAS_MASK=False, HAS_TILES=False, TILE_Q=0, TILE_K=0, GQA_MAP=False, NO_ALPHA=False, NO_MAX=False,
            UNGUARDED=False, TILE_FLOOR=False, HAS_DLSE=True, USE_DESC=False, FMA=True, DROPOUT=False,
            HAS_BIAS=False, WRITE_DS=False)
VARIANTS = {
    "plain": {},
    "descriptors_d128": dict(USE_DESC=True, BLOCK_M=128, BLOCK_N=128, BLOCK_D=128, BLOCK_DV=128),
    "descriptors_tiles": dict(USE_DESC=True, HAS_TILES=True, TILE_Q=128, TILE_K=128, BLOCK_D=128, BLOCK_DV=64),
    "dropout_descriptors_d128": dict(DROPOUT=True, USE_DESC=True, BLOCK_M=128, BLOCK_N=128, BLOCK_D=128, BLOCK_DV=128),
    "dropout_varlen_window_mask": dict(DROPOUT=True, IS_VARLEN=True, HAS_LEFT=True, HAS_MASK=True),
    "bias_descriptors_d128": dict(HAS_BIAS=True, USE_DESC=True, BLOCK_M=128, BLOCK_N=128, BLOCK_D=128, BLOCK_DV=128),
    "bias_dropout_varlen_window_mask": dict(HAS_BIAS=True, WRITE_DS=True, DROPOUT=True, IS_VARLEN=True, HAS_LEFT=True,
                                            HAS_MASK=True),
    "varlen_window_mask_tiles": dict(IS_VARLEN=True, HAS_LEFT=True, HAS_MASK=True, HAS_TILES=True, TILE_Q=64,
                                     TILE_K=64, BLOCK_D=32, BLOCK_DV=128),
}


def compile_sm90(fn, sig, consts, name, compiled: list, failures: list, ptx_needs=None, *, gluon=False,
                 options=None, check=None):
    """Compile ``fn`` for sm_90 down to a cubin (and check its PTX holds ``ptx_needs``, and passes
    ``check(asm)`` — asm: the PTX, cubin, ... by name — which raises AssertionError otherwise);
    ``name`` goes to ``compiled``, and to ``failures`` with the error if it fails. ``gluon``: ``fn`` is a
    Gluon kernel."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.experimental.gluon._runtime import GluonASTSource

    compiled.append(name)
    try:
        source = (GluonASTSource if gluon else ASTSource)(fn=fn, signature=sig, constexprs=consts)
        k = triton.compile(source, target=GPUTarget("cuda", 90, 32),
                           options=options or {"num_warps": 4, "num_stages": 2})
        assert k.asm.get("cubin"), "no cubin"
        if ptx_needs:
            assert ptx_needs in k.asm["ptx"], f"no {ptx_needs} in the PTX"
        if check:
            check(k.asm)
    except Exception as e:  # noqa: BLE001 - reported by the test
        failures.append((name, f"{type(e).__name__}: {e}"[:400]))


def _no_spills(asm):
    """No local memory in the PTX and no stack frame in the cubin (ptxas' register spills land there:
    ``cuobjdump -res-usage`` reports them as STACK, which the PTX cannot show)."""
    assert "ld.local" not in asm["ptx"], "spills (local loads) in the PTX"
    import tempfile

    import triton.backends.nvidia as nv
    tool = os.path.join(os.path.dirname(nv.__file__), "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(asm["cubin"])
        f.flush()
        usage = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True, check=True).stdout
    stacks = [int(x) for x in re.findall(r"STACK:(\d+)", usage)]
    assert stacks and not any(stacks), f"ptxas spilled registers: {usage.strip()[-300:]}"


def compile_all(compiled: list) -> list:
    """Compile every kernel × dtype × variant for sm_90 (their names appended to ``compiled``);
    returns the failures (name, error)."""
    from flashproof.kernels.attention.triton.bwd import attn_bwd_delta, attn_bwd_dkdv, attn_bwd_dq
    from flashproof.kernels.attention.triton.fwd import attn_fwd

    failures = []
    for fn in (attn_fwd, attn_bwd_delta, attn_bwd_dkdv, attn_bwd_dq):
        for dt, prec in (("fp32", "ieee"), ("bf16", "tf32"), ("fp16", "tf32")):
            for variant, opts in VARIANTS.items():
                if "USE_DESC" in opts and "USE_DESC" not in {p.name for p in fn.params}:
                    continue  # the delta kernel takes no descriptors
                if opts.get("BLOCK_N") == 128 and prec == "ieee":
                    continue  # fp32 at 128 x 128 x d128 never fits (the host prunes it); ptxas was killed for memory
                fma = prec != "ieee"  # the router's rule: fp32 never takes the FMA interior
                sig, consts = _signature(fn, dt, dict(BASE, **opts, DOT_PREC=prec, FMA=fma))
                compile_sm90(fn, sig, consts, f"{fn.__name__}/{dt}/{variant}", compiled, failures)
    failures += compile_gluon(compiled)
    from flashproof.kernels.attention.triton.plan import tile_plan
    for transposed in (False, True):
        sig = {p.name: "i32" for p in tile_plan.params if not p.is_constexpr}
        sig.update(TILES="*u8", NUM="*i32", IDX="*i32")
        consts = dict(HAS_LEFT=True, HAS_RIGHT=True, HAS_DENSE=False, TRANSPOSED=transposed, BLOCK=64)
        sig.update({n: "constexpr" for n in consts})
        compile_sm90(tile_plan, sig, consts, f"tile_plan/transposed={transposed}", compiled, failures)
    from flashproof.kernels.attention.triton.partials import sum_partials_kernel
    for dt in ("bf16", "fp16"):  # the GQA backward's dK / dV partial sums (fp32 in, the gradient's dtype out)
        sig = {p.name: "i32" for p in sum_partials_kernel.params if not p.is_constexpr}
        consts = dict(BLOCK_N=32, BLOCK_D=128)
        sig.update(P="*fp32", OUT=f"*{dt}", **{n: "constexpr" for n in consts})
        compile_sm90(sum_partials_kernel, sig, consts, f"sum_partials_kernel/{dt}", compiled, failures)
    return failures


def _gluon_signature(fn, typed: dict, consts: dict) -> dict:
    """``typed`` (descriptors, pointers, floats), then every other runtime argument as i32 (lengths,
    head counts, the group size and the row views' coordinates and strides: unspecialised, so one
    cubin stands for every layout and group size), then the constexprs."""
    return {p.name: "constexpr" if p.is_constexpr else typed.get(p.name, "i32") for p in fn.params} | \
        {n: "constexpr" for n in consts}


def compile_gluon(compiled: list) -> list:
    """The warp-specialised Gluon forward and backward (fp16/bf16 × causal or not × each head dim; the backward
    with G = 1 and a GQA group) down to sm_90 cubins: the register split (setmaxnreg); the backward's dQ by
    TMA bulk tensor reduce-add (``cp.reduce.async.bulk.tensor.2d.global.shared::cta.add`` and its wait
    in the PTX, no register fp32 atomic or reduction left; deterministic=True: the semaphore's acquire
    spin and release increment and the wait for the add's completion); no spills. Layouts and group sizes are runtime
    arguments (``_gluon_signature``)."""
    from flashproof.kernels.attention.gluon import bwd as GB
    from flashproof.kernels.attention.gluon import fwd as G
    from flashproof.kernels.attention.gluon.common import desc_layouts, gl_dtype
    failures = []
    variants = [("bf16", False), ("bf16", True), ("fp16", False), ("fp16", True)]  # (dtype, causal)

    def fwd_check(asm):
        ptx = asm["ptx"]
        assert re.search(rf"setmaxnreg.inc.sync.aligned.u32\s+{G.CONSUMER_REGS};", ptx), "no consumer register raise"
        _no_spills(asm)

    # each head dim it takes, dense and block-sparse (SPARSE: the walk lists' int32 counts and tiles)
    for (dt, causal), D, sparse in ((v, hd, sp) for v in variants for hd in G.HEAD_DIMS for sp in (False, True)):
        q_layout, kv_layout = desc_layouts(gl_dtype(TORCH_DTYPES[dt]), D, G.BLOCK_M_WG, G.BLOCK_N)
        qd = f"tensordesc<{dt}[{G.BLOCK_M_WG}, {D}],{q_layout!r}>"
        kd = f"tensordesc<{dt}[{G.BLOCK_N}, {D}],{kv_layout!r}>"
        desc = {"q_desc": qd, "k_desc": kd, "v_desc": kd, "o_desc": qd}
        consts = dict(HEAD_DIM=D, BLOCK_N=G.BLOCK_N, NUM_STAGES=G.NUM_STAGES, CAUSAL=causal, SPARSE=sparse,
                      CONSUMER_REGS=G.CONSUMER_REGS)
        typed = {**desc, "lse_ptr": "*fp32", "kv_num": "*i32", "kv_idx": "*i32", "sm_scale": "fp32",
                 **{n: "*i32" for n in ("s_b", "s_h", "s_m", "s_base", "count")}}  # the schedule (schedule.py)
        sig = _gluon_signature(G._attn_fwd_ws, typed, consts)
        name = f"gluon_fwd/d{D}/{dt}/causal={causal}" + ("/sparse" if sparse else "")
        compile_sm90(G._attn_fwd_ws, sig, consts, name, compiled, failures, gluon=True,
                     options={"num_warps": 4, "maxnreg": G.MAXNREG}, check=fwd_check)
    def bwd_check(asm, det):
        ptx = asm["ptx"]
        if det:  # the ordered writer: acquire spin, completion wait, release increment
            assert "ld.acquire.gpu.global.b32" in ptx and "red.release.gpu.global.add.s32" in ptx, "no semaphore"
            assert re.search(r"cp\.async\.bulk\.wait_group\s+0;", ptx), "no wait for the reduce-add's completion"
        assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add" in ptx, "no TMA dQ reduce-add in the PTX"
        if not det:
            assert "cp.async.bulk.wait_group.read" in ptx, "no wait for the reduce-add's read of its buffer"
        assert not re.search(r"(atom|red)\.\S*global\S*\.add\.f32", ptx), "a register dQ reduction is left"
        assert not re.search(r"(atom|red)\.global\S*\.add\.f32\s", ptx), "a scalar fp32 dQ atomic is left"
        assert re.search(rf"setmaxnreg.inc.sync.aligned.u32\s+{GB.CONSUMER_REGS};", ptx), "no consumer register raise"
        assert re.search(rf"setmaxnreg.dec.sync.aligned.u32\s+{GB.PRODUCER_REGS};", ptx), "no producer register drop"
        _no_spills(asm)

    # the group size G: GQA (a runtime loop over the G query heads of a KV head), and G = 1 as a
    # constexpr (Triton specialises an int argument equal to 1 at launch: Hq = Hkv compiles this one,
    # with SPLITS = 1)
    # and each head dim the backward takes (GB.HEAD_DIMS)
    # a group split over CTAs (SPLITS > 1: dK, dV go to fp32 partial sums) as well
    # and block-sparse (never deterministic; one query head per CTA: G = 1, or GQA's fp32 partials)
    cases = [(v, g, d, hd) for v in variants for g in ("gqa", "G=1", "split") for d in (False, True)
             for hd in GB.HEAD_DIMS] + [(v, g, False, hd) for v in variants for g in ("sparse/G=1", "sparse/gqa")
                                        for hd in GB.HEAD_DIMS]
    for (dt, causal), group, det, D in cases:
        q_layout, kv_layout = desc_layouts(gl_dtype(TORCH_DTYPES[dt]), D, GB.BLOCK_M, GB.BLOCK_N)
        qd = f"tensordesc<{dt}[{GB.BLOCK_M}, {D}],{q_layout!r}>"
        kd = f"tensordesc<{dt}[{GB.BLOCK_N}, {D}],{kv_layout!r}>"
        vd = f"tensordesc<fp32[{GB.BLOCK_M}],{GB.vec_layout()!r}>"
        dqd = f"tensordesc<fp32[{GB.BLOCK_M}, {D}],{GB.dq_layout(D)!r}>"
        consts = dict(NUM_STAGES=GB.NUM_STAGES, CAUSAL=causal, CONSUMER_REGS=GB.CONSUMER_REGS,
                      PRODUCER_REGS=GB.PRODUCER_REGS, DETERMINISTIC=det, SPARSE=group.startswith("sparse"),
                      **({"G": 1, "SPLITS": 1} if group.endswith("G=1") else {}))
        part = "fp32" if group in ("split", "sparse/gqa") else dt
        sig = _gluon_signature(GB._attn_bwd_ws, {"q_desc": qd, "k_desc": kd, "v_desc": kd, "do_desc": qd,
                                                 "lse_desc": vd, "delta_desc": vd, "dq_desc": dqd, "sem_ptr": "*i32",
                                                 "dk_ptr": f"*{part}", "dv_ptr": f"*{part}", "q_num": "*i32",
                                                 "q_idx": "*i32", "sm_scale": "fp32"}, consts)
        compile_sm90(GB._attn_bwd_ws, sig, consts, f"gluon_bwd/d{D}/{dt}/causal={causal}/{group}/det={det}", compiled,
                     failures, gluon=True, options={"num_warps": 4, "maxnreg": GB.MAXNREG},
                     check=lambda asm, d=det: bwd_check(asm, d))
    return failures


if __name__ == "__main__":
    names = []
    bad = compile_all(names)
    for name, err in bad:
        print("FAILED", name, err)
    print(f"compiled {len(names) - len(bad)} of {len(names)}")
    raise SystemExit(1 if bad else 0)
