"""The audit report: derived status chips (stale, failed controls, fully checked), the report model,
its HTML/Markdown/JSON renderings, the SVG graph and the ``flashproof audit`` verb."""
from __future__ import annotations

import argparse
import json
import re
import sys

import pytest

from flashproof.proofs.audit import cli as audit, html as audit_html, md as audit_md, model as audit_model
from flashproof.proofs.engine import cache
from flashproof.proofs.audit.svg import graph_svg, layers
from flashproof.proofs.engine.core import Obligation, Outcome
from flashproof.proofs.engine.runner import make_record
from flashproof.proofs.engine.status import derive
from flashproof.spec.registry import Item

MOD = __name__


def _item(iid, kind="theorem", uses=(), checked_by=(), source="x.txt"):
    return Item(iid, kind, f"title {iid}", f"statement {iid}", source, ("Literature-sourced",), tuple(uses),
                tuple(checked_by), (), "tests")


def _ob(oid, checks=(), of=None):
    def fn(ctx):
        """Toy obligation: the encoding text."""
        return Outcome("proved")
    fn.__qualname__ = f"fn_{oid}"
    return Obligation(oid, fn, tuple(checks), {"n": 2}, {"n": 2}, (), "z3", "refuted" if of else "proved",
                      of, "planted" if of else None, MOD, oid)


def _rec(ob, status, obligations, cex=None):
    key = cache.content_hash(ob, bounds=ob.bounds, base=obligations.get(ob.of) if ob.of else None)
    return make_record(ob, Outcome(status, counterexample=cex), seconds=0.01, bounds=ob.bounds, deep=False, key=key)


@pytest.fixture
def toy():
    """A ← B ← C (C uses B uses A); each checked by one obligation with one control."""
    items = {"A": _item("A", "definition", checked_by=["OA"]), "B": _item("B", uses=["A"], checked_by=["OB"]),
             "C": _item("C", uses=["B"], checked_by=["OC"]), "D": _item("D", "remark")}
    obs = {}
    for i in "ABC":
        obs[f"O{i}"] = _ob(f"O{i}", [i])
        obs[f"O{i}/ctl"] = _ob(f"O{i}/ctl", of=f"O{i}")
    good = [_rec(o, "refuted" if o.of else "proved", obs, {"x": 1} if o.of else None) for o in obs.values()]
    return items, obs, good


def _statuses(items, obs, records):
    return audit_model.item_statuses(items, obs, audit_model.record_states(obs, records, cache_dir=None))


def test_fresh_complete_results_agree_with_status_derive(toy):
    items, obs, good = toy
    st = _statuses(items, obs, good)
    assert st == {"A": "fully-checked", "B": "fully-checked", "C": "fully-checked", "D": "unchecked"}
    assert st == {k: v.status for k, v in derive(items, good).items()}


def test_stale_result_is_never_checked(toy):
    items, obs, good = toy
    recs = [dict(r, content_hash="0" * 64) if r["obligation"] == "OA" else r for r in good]
    st = _statuses(items, obs, recs)
    assert st["A"] == "stale"
    assert st["B"] == st["C"] == "checked"  # their own evidence is fresh, but they use a stale item


def test_stale_control_makes_the_item_stale(toy):
    items, obs, good = toy
    recs = [dict(r, content_hash="f" * 64) if r["obligation"] == "OB/ctl" else r for r in good]
    assert _statuses(items, obs, recs)["B"] == "stale"


def test_result_cache_under_the_current_hash_is_fresh_evidence(toy, tmp_path):
    """A partial run overwrites the trail; a cached result under the current hash still counts."""
    items, obs, good = toy
    for r in good:
        cache.store(tmp_path, r["content_hash"], r)
    stale_trail = [dict(r, content_hash="0" * 64) for r in good if r["obligation"].startswith("OA")]
    states = audit_model.record_states(obs, stale_trail, cache_dir=tmp_path)
    assert states["OA"]["source"] == "cache" and not states["OA"]["stale"]
    assert states["OB"]["source"] == "cache"
    assert audit_model.item_statuses(items, obs, states)["C"] == "fully-checked"
    # a cache entry under another hash is not evidence
    assert _statuses(items, obs, stale_trail)["A"] == "stale"


def test_failed_obligation_or_control(toy):
    items, obs, good = toy
    bad_ob = [_rec(obs["OA"], "unknown", obs) if r["obligation"] == "OA" else r for r in good]
    assert _statuses(items, obs, bad_ob)["A"] == "failed"
    # a control that was not refuted (the check cannot fail) voids the obligation's evidence
    bad_ctl = [_rec(obs["OC/ctl"], "proved", obs) if r["obligation"] == "OC/ctl" else r for r in good]
    assert _statuses(items, obs, bad_ctl)["C"] == "failed"
    assert derive(items, bad_ctl)["C"].status == "failed"  # the trail's status rule agrees (audit.json/md)


def test_missing_results_are_unchecked(toy):
    items, obs, good = toy
    st = _statuses(items, obs, [r for r in good if r["obligation"] != "OB/ctl"])
    assert st["B"] == "unchecked" and st["C"] == "checked"
    assert set(_statuses(items, obs, []).values()) == {"unchecked"}


def test_orphan_results_are_listed(toy):
    items, obs, good = toy
    states = audit_model.record_states(obs, good + [dict(good[0], obligation="GONE")], cache_dir=None)
    assert states["GONE"]["orphan"] and states["GONE"]["stale"]


def test_layers_point_rightwards():
    nodes = [{"id": i, "title": i, "kind": "theorem", "status": "checked"} for i in "ABCD"]
    edges = [["A", "B"], ["B", "C"], ["A", "C"], ["D", "C"]]
    col = layers(nodes, edges)
    assert all(col[u] < col[v] for u, v in edges)
    svg = graph_svg(nodes, edges)
    assert svg.count('class="node"') == 4 and svg.count('class="edge"') == 4
    assert '<script' not in svg


@pytest.fixture(scope="module")
def report():
    """The real registry and ledger, with results for the claims obligations only (fast)."""
    from flashproof.proofs.engine import runner, trail
    from flashproof.proofs.engine.discover import collect
    from flashproof.spec.registry import collect as collect_items

    items = collect_items()
    obs, _ = collect()
    mine = [o for o in obs.values() if o.id.startswith("RECOMPUTE-CL-00")]
    recs = runner.execute(mine, all_obs=obs, jobs=2, timeout=60, cache_dir=None)
    doc = trail.build(items, obs, recs, name_errs=[], import_errs={}, total_seconds=1.0, jobs=2, argv=[], partial=True)
    return json.loads(json.dumps(audit.build_report(doc), default=str))


def test_report_has_every_item_and_claim(report):
    from flashproof.spec.seed_claims import CLAIMS
    from flashproof.spec.registry import collect as collect_items

    items = collect_items()
    shown = [it["id"] for sec in report["sections"] for it in sec["items"]]
    expected = [i for i, it in items.items() if it.module != "flashproof.spec.seed_claims"]
    assert sorted(shown) == sorted(expected) and len(shown) == len(set(shown))
    assert [r["id"] for r in report["ledger"]] == [c.id for c in CLAIMS]
    assert all(it["status"] in audit_model.STATUSES for sec in report["sections"] for it in sec["items"])
    page = report["sections"][0]["items"]
    assert all(it["source"] == audit_model.PAGE for it in page)
    for r in report["ledger"]:
        if r["obligation"]:
            assert r["obligation"]["state"] == "ok", r["id"]
    assert any("partial run" in p for p in report["problems"])
    for key in ("date", "commit", "python", "z3", "sympy", "machine"):
        assert report["provenance"][key]


def test_html_is_offline_and_complete(report):
    html = audit_html.render(report)
    n_items = sum(len(s["items"]) for s in report["sections"])
    assert html.count('<section class="item"') == n_items
    assert len(re.findall(r'<section class="item"[^>]*>.*?class="chip" data-status="', html, re.S)) == n_items
    assert html.count('<tr class="claim"') == len(report["ledger"])
    # one folder, no network: no external stylesheet, script, image or font
    assert not re.search(r'<(link|img|iframe)\b|\bsrc=|@import|url\((?!#)', html)
    assert "https://" not in html and re.findall(r"http://[^\"' ]+", html) == ["http://www.w3.org/2000/svg"]
    for r in report["ledger"]:
        assert f'id="claim-{r["id"]}"' in html


def test_markdown_and_json(report, tmp_path):
    md = audit_md.render(report)
    for r in report["ledger"]:
        assert f"({r['id']})" in md
    for sec in report["sections"]:
        for it in sec["items"]:
            assert f"`{it['id']}`" in md
    html = audit.write_report(report, tmp_path / "a")
    assert html.name == "index.html"
    back = json.loads((tmp_path / "a" / "index.json").read_text())
    assert back["schema"] == audit_model.SCHEMA and back["ledger"] == report["ledger"]
    assert (tmp_path / "a" / "graph.svg").read_text().startswith("<svg")


def _args(tmp_path, *extra):
    p = argparse.ArgumentParser()
    audit.add_arguments(p)
    return p.parse_args(["--trail", str(tmp_path / "t" / "audit.json"), "--out", str(tmp_path / "r"), *extra])


def test_verb_without_results_renders_unchecked(tmp_path, capsys):
    assert audit.run(_args(tmp_path, "--no-prove", "--cache-dir", str(tmp_path / "nocache"))) == 0
    rep = json.loads((tmp_path / "r" / "index.json").read_text())
    trail = tmp_path / "t" / "audit.json"
    assert rep["prove_run"] is None and any(f"no {trail}" in p for p in rep["problems"])
    assert {it["status"] for s in rep["sections"] for it in s["items"]} <= {"unchecked", "assumed"}
    assert audit.run(_args(tmp_path, "--no-prove", "--no-cache", "--strict")) == 1


def test_verb_rejects_a_foreign_json(tmp_path, capsys):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "audit.json").write_text(json.dumps({"schema": "something-else"}))
    assert audit.run(_args(tmp_path, "--no-prove")) == 2
    assert "flashproof.audit/1" in capsys.readouterr().err


def test_cli_wires_the_verb():
    from flashproof import cli

    assert cli.VERBS["audit"][0] == "flashproof.proofs.audit.cli"
    assert sys.modules["flashproof.proofs.audit.cli"] is audit
