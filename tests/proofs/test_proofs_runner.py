"""The runner: statuses, timeouts, the success rule, the cache and its invalidation (fake obligations)."""
from __future__ import annotations

import sys
import time
import types

import pytest

from flashproof.proofs.engine import cache, runner, trail
from flashproof.proofs.engine.core import Obligation, Outcome


def _fake_module(tmp_path, name, body="X = 1\n"):
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    sys.modules[name] = mod
    return path


def _ob(id, fn, module, expected="proved", of=None):
    return Obligation(id, fn, ("I",), {"k": 1}, {"k": 2}, (), "z3", expected, of, "bug" if of else None, module, id)


def _proved(ctx):
    return Outcome("proved", solver="z3")


def _unknown(ctx):
    return Outcome("unknown", detail="gave up")


def _refuted_cx(ctx):
    return Outcome("refuted", counterexample={"x": 1})


def _raises(ctx):
    raise RuntimeError("boom")


SLEEP_S = 300  # far longer than the 1 s timeout: a runner that waits for the job cannot pass below


def _sleeps(ctx):
    time.sleep(SLEEP_S)
    return Outcome("proved")


def _bad_status(ctx):
    return Outcome("maybe")


def _run(obs, tmp_path, **kw):
    kw.setdefault("timeout", 20)
    return {r["obligation"]: r for r in runner.execute(obs, all_obs={o.id: o for o in obs}, jobs=2,
                                                       cache_dir=tmp_path / "cache", **kw)}


def test_statuses_and_success_rule(tmp_path):
    _fake_module(tmp_path, "fp_fake_a")
    obs = [_ob("P", _proved, "fp_fake_a"), _ob("U", _unknown, "fp_fake_a"), _ob("E", _raises, "fp_fake_a"),
           _ob("S", _bad_status, "fp_fake_a"), _ob("C", _refuted_cx, "fp_fake_a", "refuted", of="P"),
           _ob("C2", _proved, "fp_fake_a", "refuted", of="P")]
    recs = _run(obs, tmp_path)
    assert {k: (r["status"], r["ok"]) for k, r in recs.items()} == {
        "P": ("proved", True), "U": ("unknown", False), "E": ("error", False), "S": ("error", False),
        "C": ("refuted", True), "C2": ("proved", False)}
    assert "boom" in recs["E"]["detail"]
    assert recs["P"]["command"] == "flashproof prove --only P"
    assert recs["P"]["bounds"] == {"k": 1}


def test_timeout_kills_and_is_not_success(tmp_path):
    _fake_module(tmp_path, "fp_fake_t")
    t0 = time.perf_counter()
    recs = _run([_ob("T", _sleeps, "fp_fake_t")], tmp_path, timeout=1.0)
    assert recs["T"]["status"] == "timeout" and not recs["T"]["ok"]
    assert time.perf_counter() - t0 < SLEEP_S  # the job was killed, not waited for (not a speed check)


def test_audit_not_ok_when_anything_unknown(tmp_path):
    from flashproof.spec.registry import Item

    _fake_module(tmp_path, "fp_fake_b")
    obs = {"P": _ob("P", _unknown, "fp_fake_b")}
    recs = list(_run(list(obs.values()), tmp_path).values())
    items = {"I": Item("I", "theorem", "t", "s", "", (), (), ("P",), (), "m")}
    doc = trail.build(items, obs, recs, name_errs=[], import_errs={}, total_seconds=0.1, jobs=2, argv=[], partial=False)
    assert doc["ok"] is False and doc["items"][0]["status"] == "failed"
    assert doc["schema"] == trail.SCHEMA


def test_cache_hit_then_invalidated_by_source_change(tmp_path, monkeypatch):
    path = _fake_module(tmp_path, "fp_fake_c")
    ref = tmp_path / "reference.py"
    ref.write_text("def merge(): return 1\n")
    monkeypatch.setattr(cache, "_reference_files", lambda: {"flashproof.verified.reference": str(ref)})
    obs = [_ob("P", _proved, "fp_fake_c")]
    first = _run(obs, tmp_path)["P"]
    assert not first["cached"] and first["cached_from"] is None
    again = _run(obs, tmp_path)["P"]
    assert again["cached"] and again["content_hash"] == first["content_hash"]
    assert again["cached_from"][:4].isdigit() and "T" in again["cached_from"]  # the run that computed it (UTC)
    ref.write_text("def merge(): return 2  # the reference changed\n")
    after_ref = _run(obs, tmp_path)["P"]
    assert not after_ref["cached"] and after_ref["content_hash"] != first["content_hash"]
    path.write_text("X = 2  # the obligation's module changed\n")
    after_mod = _run(obs, tmp_path)["P"]
    assert not after_mod["cached"] and after_mod["content_hash"] != after_ref["content_hash"]
    forced = _run(obs, tmp_path, force=True)["P"]
    assert not forced["cached"]


def test_deep_bounds_change_the_hash(tmp_path):
    _fake_module(tmp_path, "fp_fake_d")
    ob = _ob("P", _proved, "fp_fake_d")
    assert cache.content_hash(ob, bounds=ob.bounds) != cache.content_hash(ob, bounds=ob.deep_bounds)


def test_unknown_is_not_cached(tmp_path):
    _fake_module(tmp_path, "fp_fake_e")
    obs = [_ob("U", _unknown, "fp_fake_e")]
    _run(obs, tmp_path)
    assert not _run(obs, tmp_path)["U"]["cached"]


def test_select_by_item_and_unknown_id():
    from flashproof.proofs.engine.discover import collect
    from flashproof.proofs.engine.cli import select
    from flashproof.spec.registry import collect as collect_items

    obs, _ = collect()
    items = collect_items()
    ids = {o.id for o in select(["ATT-MERGE-ASSOC"], obs, items)}
    assert ids == {"ATT-MERGE-ASSOC", "ATT-MERGE-ASSOC/second-not-rescaled"}
    ids = {o.id for o in select(["EXT-MERGE-COMM"], obs, items)}
    assert "ATT-MERGE-COMM" in ids and "ATT-MERGE-COMM/max-from-second" in ids
    with pytest.raises(ValueError, match="not an obligation, control or item id"):
        select(["NOPE"], obs, items)
