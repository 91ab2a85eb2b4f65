"""bench/kvcache_order.py's plumbing on the CPU (its timings mean something only on the GPU): the whole
run at tiny shapes with the clocks replaced by stand-ins that still make every call, then the tables and
the JSON; and its pure helpers (clock CSV, read windows). Catches a row, a column or a lambda that
would only fail on the lent H200."""
from __future__ import annotations

import functools
import json
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from flashproof.bench import kvcache as kvb  # noqa: E402
from flashproof.bench import kvcache_order as order  # noqa: E402

CSV = """timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu
2026/12/01 20:05:01.000, 1980 MHz, 3201 MHz, 350.00 W, 40
2026/12/01 20:05:01.050, 1755 MHz, 3201 MHz, 690.50 W, 41
2026/12/01 20:05:01.100, [N/A], 3201 MHz, 300.00 W, 41
"""


def test_clock_samples_are_read_and_matched_to_a_row(tmp_path):
    path = tmp_path / "clocks.csv"
    path.write_text(CSV)
    got = order.read_clocks(str(path))
    assert [s[1:] for s in got] == [(1980.0, 3201.0, 350.0), (1755.0, 3201.0, 690.5)]   # header, N/A skipped
    t0, t1 = got[0][0], got[1][0]
    assert t1 - t0 == pytest.approx(0.05)
    assert order.clocks_in(got, (t1 - 0.01, t1 + 0.01)) == (1755.0, 3201.0, 690.5)
    assert order.clocks_in(got, (t0 - 9, t0 - 8)) == (1980.0, 3201.0, 350.0)   # none inside: the nearest
    assert order.read_clocks(str(tmp_path / "absent.csv")) == [] and order.clocks_in([], (0, 1)) is None


def test_warm_up_ends_after_its_minimum_once_the_blocks_agree_and_after_twice_it_in_any_case():
    assert not kvb.warmed([], 0.0, min_ms=100)
    assert not kvb.warmed([1.08, 1.08, 1.08], 50.0, min_ms=100)           # a steady slow level: not yet
    assert kvb.warmed([1.08, 1.0, 1.005, 1.009], 120.0, min_ms=100)       # the last 3 within 1 % after 100 ms
    assert not kvb.warmed([1.0, 1.0, 1.02], 150.0, min_ms=100)
    assert not kvb.warmed([1.09, 1.08, 1.07, 1.00, 1.00], 150.0, min_ms=100)   # still falling in the window
    assert not kvb.warmed([1.0, 1.0], 150.0, min_ms=100)                   # fewer blocks than the window
    assert kvb.warmed([1.3, 1.0, 1.2], 200.0, min_ms=100)                  # twice the minimum: stop anyway
    assert kvb.warmed([], 0.0, min_ms=0)
    with pytest.raises(ValueError, match="window >= 1"):
        kvb.warmed([1.0], 0.0, min_ms=1, window=0)


def test_read_windows():
    w = order.windows([(0.0, 2.0), (4.0, 3.0), (6.0, 4.0), (30.0, 4.5)])
    assert w == dict(first_5ms=2.5, ms_5_20=4.0, after_20ms=4.5, slowest=2.0)


def test_the_whole_run_on_cpu(monkeypatch, tmp_path, capsys):
    calls = []

    def fake_trace(fns, *, blocks=7, block_ms=2.0, warmup_ms=0.0):
        for f in fns:
            calls.append(f())
        t = time.time()
        return kvb.GraphTrace([1.0 + 0.01 * i for i in range(blocks)], t, [t + 0.001 * (i + 1) for i in range(blocks)],
                              [1.2, 1.0, 1.0, 1.0] if warmup_ms else [])

    def fake_eager(fn, calls=10):
        fn()
        return 0.9
    for mod in (kvb, order):
        monkeypatch.setattr(mod, "DEV", "cpu")
    monkeypatch.setattr(kvb, "D", 16)
    monkeypatch.setattr(kvb, "graph_trace", fake_trace)
    monkeypatch.setattr(kvb, "copy_tbps", lambda: 2.7)
    monkeypatch.setattr(kvb, "read_tbps", lambda: 4.3)
    monkeypatch.setattr(order, "eager_ms", fake_eager)
    monkeypatch.setattr(order, "big_free", lambda gib=0: None)
    monkeypatch.setattr(order, "allocate", lambda gib: torch.empty(4))
    monkeypatch.setattr(order, "read_trace", lambda buf, calls=60: [(0.0, 3.0), (6.0, 4.0), (25.0, 4.2)])
    real_probe = order.scrub_probe
    monkeypatch.setattr(order, "scrub_probe", lambda: real_probe(64))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(order.time, "sleep", lambda s: None)
    # on the CPU the default call would take the torch path: point it at the Triton interpreter, so that
    # its output can equal the forced call's bitwise as on the GPU
    monkeypatch.setattr(order, "attention_with_kvcache",
                        functools.partial(order.attention_with_kvcache, backend="triton", tuning="first"))
    real_order, real_sweep = order.order_experiment, order.sweep
    monkeypatch.setattr(order, "order_experiment", lambda Nq, *a, **kw: real_order(Nq, *a, **kw, shape=(2, 8, 2, 128)))
    monkeypatch.setattr(order, "sweep", lambda copy, deadline, rows, skipped: real_sweep(
        copy, deadline, rows, skipped, batches=(1, 2), nqs=(1, 5), Nk=64))
    out = tmp_path / "order.json"
    assert order.main(["--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert calls, "no timed call ran"
    for title in ("copy anchor", "Order at B = 8", "D / F in each phase", "Eager calls", "Read rate", "16k sweep"):
        assert title in printed, title
    got = json.loads(out.read_text())
    phases = [(r["Nq"], r["phase"], r["label"]) for r in got["order"]]
    assert [p for p in phases if p[0] == 1] == [(1, "A", x) for x in "DFDFD"] + [(1, "B", x) for x in "FDFD"] + [
        (1, "C", "D"), (1, "C", "F"), (1, "C2", "D"), (1, "C2", "F"), (1, "I", "D"), (1, "I", "F"), (1, "T", "D"),
        (1, "T", "F"), (1, "W", "D"), (1, "W", "F"), (1, "S", "D"), (1, "S", "F"), (1, "S", "D"), (1, "L", "D"),
        (1, "L", "F")]
    assert {p[1] for p in phases if p[0] == 5} == {"A", "B", "C", "C2", "I", "T", "W", "S"}
    assert [len(r["warmup"]) for r in got["order"] if r["phase"] == "S"] == [4] * 6
    assert [(r["B"], r["Nq"], r["check"]) for r in got["sweep"]] == [(1, 1, True), (1, 5, True), (2, 1, True),
                                                                       (2, 5, True)]
    assert len(got["probe"]) == 4 and len(got["eager"]) == 6
    assert [(c["name"], c["ok"]) for c in got["checks"]] == [
        ("order/B2-8-2-128/Nq1", True), ("order/Nq1/default-equals-forced", True),
        ("order/B2-8-2-128/Nq5", True), ("order/Nq5/default-equals-forced", True)]
