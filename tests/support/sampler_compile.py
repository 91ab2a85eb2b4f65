"""Ahead-of-time compile of every sampler kernel variant for sm_90 (the H200) on a machine without a GPU, and
the compiled kernels on CUDA against the reference: a script that tests/sampler/test_sampler_aot.py runs in
a subprocess without TRITON_INTERPRET (``python tests/support/sampler_compile.py [cuda]``).

The interpreter (TRITON_INTERPRET=1, how CI runs the coupled tests) does not catch what only the compiler
rejects (loop-carried types, branches yielding values, pointer arithmetic); Triton's own ptxas does. The
compile runs in a subprocess because the kernels must be imported without the interpreter. The same
subprocess route runs the compiled kernels on CUDA against the reference (marked gpu)."""
from __future__ import annotations

import os
import sys


VARIANTS = [("fp32", False, True, 0, 4), ("fp32", True, True, 2, 4), ("bf16", True, False, 1, 1),
            ("fp16", False, False, 2, 0), ("fp64", True, True, 0, 2),
            ("fp32", True, True, 0, 3)]  # dtype, full, has_q, greedy, K (K = 3: tiles padded to KP = 4 rows)
_PTR = {"ids_ptr": "*i64", "kb_ptr": "*i32", "ua_ptr": "*fp64", "ur_ptr": "*fp32", "ubo_ptr": "*fp64",
        "g_ptr": "*i8", "am_ptr": "*i64", "w_ptr": "*i64", "st_ptr": "*fp64", "out_ptr": "*i64"}


def compile_all() -> int:
    """Lower both kernels of every variant to a cubin for sm_90; returns the number of cubins."""
    import triton
    from triton.backends.compiler import GPUTarget

    from flashproof.kernels.sampler import triton as st
    n = 0
    for dtype, full, has_q, greedy, k in VARIANTS:
        c = dict(K=k, HAS_Q=has_q, HAS_KB=True, GREEDY=greedy, FULL=full)
        cfg = st.DEFAULT_CONFIG if k != 2 else st.TritonConfig(4096, 1024, 8, 1)  # both pipelining settings
        cells = min(cfg.num_warps, cfg.block)
        partials = dict(c, KP=st._pow2(max(k, 1)), IS_F64=dtype == "fp64", CHUNK=cfg.chunk, BLOCK=cfg.block,
                        CELLS=cells, STAGES=cfg.num_stages)
        finish = dict(c, CELL=cfg.block // cells, FB=16 if k % 2 else 1024, NFB=1 if k % 2 else 3,
                      FBLK=st.FALLBACK_BLOCK, RP=st._pow2(2 * k + 2), PP=16 if k % 2 else 32)
        for kernel, consts, warps in ((st._partials_kernel, partials, cfg.num_warps), (st._finish_kernel, finish, 4)):
            sig = {a: "constexpr" if a in consts else _PTR.get(a, f"*{dtype}" if a.endswith("_ptr") else
                                                              "fp32" if a == "tol" else "i32")
                   for a in kernel.arg_names}
            out = triton.compile(triton.compiler.ASTSource(kernel, sig, consts), target=GPUTarget("cuda", 90, 32),
                                 options={"num_warps": warps})
            assert out.asm["cubin"], (dtype, full, has_q, greedy, k, kernel)
            n += 1
    return n


def run_cuda() -> int:
    """The compiled kernels on CUDA against the reference (the families, both check modes, V up to
    151936); returns the number of problems checked."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from support.sampler_cases import build, check_coupled
    n = 0
    for check in ("full", "read"):
        for fam in ("u_edges", "draft_zero", "equal", "disjoint", "sentinel", "one_hot", "greedy"):
            for V in (3, 8193):
                check_coupled(build(V + len(fam), 5, 4, V, zeros=0.3, **{fam: True}), "cuda", backend="triton",
                              check=check)
                n += 1
        for V in (131072, 151936):
            check_coupled(build(V, 3, 4, V, u_edges=True, zeros=0.3), "cuda", backend="triton", check=check)
            n += 1
        for seed in range(6):
            check_coupled(build(seed, 7, (0, 2, 3)[seed % 3], 1000 + seed, zeros=0.3), "cuda", backend="triton",
                          check=check)
            n += 1
    return n


if __name__ == "__main__":
    print("cuda-coupled", run_cuda()) if sys.argv[1:] == ["cuda"] else print("compiled", compile_all())
