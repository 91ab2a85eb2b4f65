"""The Triton kernels of attention_with_kvcache (the CPU runs them under TRITON_INTERPRET=1, set by
conftest) against the oracle, by the tolerance rule, on the shared case table: ragged lengths,
Nq 1…16, contiguous and paged caches (permuted tables), poison past the lengths, GQA ratios 1–8,
windows, and forced split counts (partial (out, lse) pairs merged by the merge kernel), in
float32 and float16. The first autotune config runs (``autotune=False``): the interpreter cannot
time configurations."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from support.kvcache_problems import CASES, failures, make, reference, run, verdicts  # noqa: E402

#: the first config's BLOCK_N is 64: lengths above 64·s give s non-empty splits; the case table's
#: lengths (≤ 70) mostly leave the later splits empty, so the long cases below cover full splits
LONG = [("long/ragged-splits-full", dict(lengths=[0, 1, 130, 300], heads_q=4, heads_kv=2, n_q=3)),
        ("long/paged16-Nq5-G4", dict(lengths=[200, 257], heads_q=8, heads_kv=2, n_q=5, page_size=16)),
        ("long/window-left70-paged32", dict(lengths=[90, 333], n_q=4, window=(70, None), page_size=32))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", CASES + [(n, p, {}) for n, p in LONG], ids=[c[0] for c in CASES] + [n for n, _ in LONG])
def test_triton_path_matches_oracle(case, dtype):
    _, problem, call = case
    p = make(dtype=dtype, **problem)
    ref = reference(p)
    bad = []
    for splits in (None, 1, 3, 5):
        got = run(p, backend="triton", autotune=False, num_splits=splits, **call)
        assert got.out.dtype == dtype and got.lse.dtype == torch.float32
        bad.append(failures(verdicts(p, got, ref), f"num_splits={splits}: "))
    assert not any(bad), " | ".join(b for b in bad if b)


def test_triton_and_torch_paths_agree_on_empty_rows():
    """Rows with no readable key are exactly 0 with lse −inf on both paths (length 0; L < Nq)."""
    p = make(lengths=[0, 1, 2], n_q=4, page_size=16)
    for backend in ("torch", "triton"):
        got = run(p, backend=backend, num_splits=2, **({"autotune": False} if backend == "triton" else {}))
        assert torch.all(got.out[0] == 0) and torch.all(torch.isneginf(got.lse[0]))
        assert torch.all(got.out[1, :, :3] == 0) and torch.all(torch.isneginf(got.lse[1, :, :3]))
        assert torch.isfinite(got.lse[1, :, 3]).all() and torch.isfinite(got.out).all()
