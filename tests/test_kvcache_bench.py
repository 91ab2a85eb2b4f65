"""bench/kvcache.py's plumbing on the CPU (the GPU run is the only place its timings mean anything): one
tiny shape through ``time_shape`` with the three clocks replaced by stand-ins that still run each call,
then the tables and the target counts from those rows. Catches a row, a column or a lambda that would
only fail on the lent H200."""
from __future__ import annotations

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "kvcache.py")
_spec = importlib.util.spec_from_file_location("bench_kvcache", _PATH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture
def cpu_bench(monkeypatch):
    """The bench on CPU tensors: each clock runs its calls once (so every lambda is exercised) and
    returns a fixed time, 2 ms for ours' graph, 3 ms for everything else."""
    calls = []

    def fake(fns, **_):
        fns = fns if isinstance(fns, list) else [fns]
        for f in fns:
            calls.append(f())
        return bench.Spread(3.0, 2.5, 3.5)

    def fake_graph(fns, **_):
        fake(fns)
        return bench.Spread(2.0, 1.9, 2.2)
    monkeypatch.setattr(bench, "DEV", "cpu")
    monkeypatch.setattr(bench, "graph_ms", fake_graph)
    monkeypatch.setattr(bench, "call_ms", fake)
    monkeypatch.setattr(bench, "host_us", fake)
    monkeypatch.setattr(bench, "D", 16)
    monkeypatch.setattr(bench, "PAGE", 16)
    monkeypatch.setattr(bench, "BIG_PAGE", 32)
    return calls


def test_time_shape_rows_and_tables(cpu_bench, capsys):
    shape = (2, 4, 2, 1, 64)
    rows = bench.time_shape(*shape, ["ours", "ours-paged", "ours-paged-big", "ours-splits", "ours-configs",
                                     "ours-paged-configs", "ours-other-merge", "ours-last", "sdpa-cudnn"], seed=0,
                            copy=4.0, tuning="first")
    assert cpu_bench, "no call ran"
    got = {(r["provider"], r["method"]) for r in rows}
    assert {("ours", "graph"), ("ours", "call"), ("ours", "host"), ("ours", "validate"),
            ("ours-paged", "graph"), ("ours-paged-big", "graph")} <= got
    assert {(f"ours-S{s}", "graph") for s in bench.SWEEP} <= got
    from flashproof.kernels.kvcache.config import CONFIGS
    assert {(f"ours{p}-C{i}", "graph") for i in range(len(CONFIGS)) for p in ("", "-paged")} <= got
    assert {("ours", "forward"), ("ours", "allocs")} <= got
    assert (rows[-1]["provider"], rows[-1]["method"]) == ("ours-last", "graph")  # after every other row
    ours = next(r for r in rows if (r["provider"], r["method"]) == ("ours", "graph"))
    kv_bytes = 2 * 2 * 64 * 2 * 16 * 2                       # B·Hkv·Nk·(D + Dv)·2 bytes
    assert ours["tbps"] == pytest.approx(kv_bytes / 1e12 / 2e-3)
    assert ours["pct_copy"] == pytest.approx(100 * ours["tbps"] / 4.0)
    for method in ("host", "validate", "forward", "allocs"):  # µs of host time carry no bandwidth
        assert next(r for r in rows if (r["provider"], r["method"]) == ("ours", method))["tbps"] is None
    # SDPA's cuDNN backend does not run on CPU tensors: a row that says so, never a number
    cudnn = [r for r in rows if r["provider"] == "sdpa-cudnn"]
    assert cudnn and all(r["ms"] is None and "refused" in r["note"] for r in cudnn)
    meet = bench.print_tables(rows, [shape], 4.0)
    out = capsys.readouterr().out
    assert "% of read" in out and "cuDNN/ours" in out and "best S" in out and "Forced kernel configs" in out
    assert meet == [dict(shape=shape, vs_cudnn=None, pct_copy=ours["pct_copy"], paged=1.0)]
    assert "paged-32/contig" in out
    assert "timed first" in out and "| 2 | 4/2 | 1 | 64 | 2.000 | 2.000 | 1.00 | - | - |" in out


def test_targets_count_what_the_issue_asks(capsys):
    """cuDNN/ours ≥ 1, ≥ 85 % of the read bandwidth at Nk ≥ 8k, paged within 5 %: counted from the graph rows."""
    def row(B, Nk, provider, ms, pct=None):
        return dict(B=B, Hq=32, Hkv=8, Nq=1, Nk=Nk, provider=provider, method="graph", ms=ms, lo=ms, hi=ms,
                    tbps=1.0, pct_copy=pct, note="", copies=1, chosen_splits=1)
    rows = [row(1, 16384, "ours", 1.0, 90), row(1, 16384, "sdpa-cudnn", 1.1), row(1, 16384, "ours-paged", 1.04),
            row(2, 16384, "ours", 1.0, 80), row(2, 16384, "sdpa-cudnn", 0.9), row(2, 16384, "ours-paged", 1.2),
            row(4, 4096, "ours", 1.0, 50)]
    shapes = [(1, 32, 8, 1, 16384), (2, 32, 8, 1, 16384), (4, 32, 8, 1, 4096)]
    bench.print_tables(rows, shapes, 4.0)
    out = capsys.readouterr().out
    assert ("ours >= cuDNN at 1 of 3 shapes; >= 85 % of the read bandwidth at 1 of 2 shapes with Nk >= 8k; "
            "paged within 5 % of contiguous at 1 of 3") in out


def test_reference_over_several_requests(monkeypatch):
    """``reference`` over requests of different lengths combines each request's magnitudes (the proved
    rule's nested ``bound_inputs`` included) into one dict; its outputs agree with the dense oracle."""
    monkeypatch.setattr(bench, "DEV", "cpu")
    g = torch.Generator().manual_seed(0)
    B, Hq, Hkv, Nq, n_max, D = 2, 4, 2, 2, 9, 8
    q = torch.randn(B, Hq, Nq, D, generator=g)
    k = torch.randn(B, Hkv, n_max, D, generator=g)
    v = torch.randn(B, Hkv, n_max, D, generator=g)
    ref, mags = bench.reference(q, k, v, [3, 9], causal=True, window=None, scale=D ** -0.5)
    assert ref["out"].shape == (B, Hq, Nq, D)
    assert mags["bound_inputs"]["n_k"] == 9 and mags["out"] == max(v[0, :, :3].abs().max(), v[1].abs().max())


def test_other_merge_rows_where_there_are_splits(cpu_bench, monkeypatch):
    """With splits (132 SMs stood in for the CPU's one), the A/B rows of the other merge form are there."""
    from flashproof.kernels.kvcache import api
    monkeypatch.setattr(api, "_sm_count", lambda device: 132)
    from flashproof.kernels.kvcache import plan
    monkeypatch.setattr(plan, "SPLIT_KEYS_PER_SPLIT", 128)   # two splits of 512 keys (a short CPU call)
    monkeypatch.setattr(plan, "SHORT_SPLITS", 1)             # (not up to 16 of 128 keys)
    plan.choose_num_splits.cache_clear()
    try:
        rows = bench.time_shape(1, 2, 1, 1, 1024, ["ours-other-merge"], seed=0, copy=4.0, tuning="first")
    finally:
        plan.choose_num_splits.cache_clear()
    assert {(r["provider"], r["method"]) for r in rows} == {("ours-other-merge", "graph"),
                                                           ("ours-other-merge", "forward")}
    assert all(r["chosen_splits"] == 2 and r["ms"] is not None for r in rows)
    assert "merge kernel (2 launches)" in rows[0]["note"]      # S = 2: the route fuses, so the A/B is the kernel


def test_a_time_box_stops_the_timing_and_the_tables_still_print(monkeypatch, tmp_path, capsys):
    """SIGTERM (scripts/gpu_kvcache.sh's time box) during the timing: the shapes timed so far are in the
    tables and the JSON, the rest listed as skipped, and the bench exits normally."""
    import json
    import signal
    import types

    def one_shape(B, Hq, Hkv, Nq, Nk, providers, *, seed, copy):
        if seed > 100:                       # the second shape: the box's signal arrives inside a provider
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except Exception:                # noqa: BLE001 - as the bench's guarded(): must not swallow it
                pass
        return [dict(B=B, Hq=Hq, Hkv=Hkv, Nq=Nq, Nk=Nk, provider="ours", method="graph", ms=1.0, lo=1.0, hi=1.0,
                     tbps=1.0, pct_copy=25.0, note="num_splits=1", copies=1, chosen_splits=1)]
    monkeypatch.setattr(bench, "time_shape", one_shape)
    monkeypatch.setattr(bench, "copy_tbps", lambda: 4.0)
    monkeypatch.setattr(bench, "read_tbps", lambda: 4.5)
    monkeypatch.setattr(bench.torch.cuda, "get_device_name", lambda i: "stand-in")
    monkeypatch.setattr(bench.torch.cuda, "get_device_properties",
                        lambda i: types.SimpleNamespace(multi_processor_count=1, L2_cache_size=2 ** 20))
    out = tmp_path / "kv.json"
    assert bench.main(["--skip-check", "--skip-e2e", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "stopped by SIGTERM" in printed and "| 64 | 32/8 | 1 | 32768 | 1 | 1.000 |" in printed
    got = json.loads(out.read_text())
    assert len(got["rows"]) == 1 and len(got["skipped_shapes"]) == 21
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_the_wait_after_a_release_grows_with_the_bytes_released():
    """``release_wait_s``: nothing released, no wait; 16 GiB waits 0.11 s at 0.15 TB/s, above the
    25–45 ms after which the H200 timed normally again (19:28 run)."""
    assert bench.release_wait_s(0) == 0
    assert bench.release_wait_s(8_600_000_000) == 8_600_000_000 / bench.RELEASE_BYTES_PER_S
    assert bench.release_wait_s(16 * 2 ** 30) == 16 * 2 ** 30 / bench.RELEASE_BYTES_PER_S
    assert bench.release_wait_s(2 * 2 ** 30) < bench.release_wait_s(4 * 2 ** 30)
    with pytest.raises(ValueError, match="freed_bytes must be >= 0"):
        bench.release_wait_s(-1)


def test_the_bench_releases_memory_only_through_release_memory():
    """Every ``empty_cache`` of the bench waits for the driver afterwards: the one call is inside
    ``release_memory``."""
    import inspect
    src = inspect.getsource(bench)
    assert src.count("torch.cuda.empty_cache()") == 1
    assert "torch.cuda.empty_cache()" in inspect.getsource(bench.release_memory)


def test_the_idle_after_new_inputs_grows_with_their_bytes():
    """``settle_s``: 4.3 GB (B = 8, 64/8, 128k) idles the 0.2 s that left no row slow on the H200; twice the
    bytes, twice the time; none, none."""
    assert bench.settle_s(0) == 0
    assert bench.settle_s(8 * 8 * 131072 * 2 * 128 * 2) == pytest.approx(0.215, abs=0.005)
    assert bench.settle_s(2 * 10 ** 9) == pytest.approx(2 * bench.settle_s(10 ** 9))
    with pytest.raises(ValueError, match="new_bytes must be >= 0"):
        bench.settle_s(-1)
