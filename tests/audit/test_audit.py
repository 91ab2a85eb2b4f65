"""The audit report: derived status chips (stale, failed controls, fully checked), the report model,
its HTML/Markdown/JSON renderings, the SVG graph and the ``flashproof audit`` verb."""
from __future__ import annotations

import argparse
import json
import re
import sys

import pytest

from flashproof.proofs.audit import cli as audit, formulas as audit_formulas, html as audit_html, md as audit_md, \
    model as audit_model, view as audit_view
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


def test_html_is_offline_and_complete(report, tmp_path):
    html_path = audit.write_report(report, tmp_path / "r")
    html = html_path.read_text(encoding="utf-8")
    n_items = sum(len(s["items"]) for s in report["sections"])
    assert html.count('<section class="item card"') == n_items
    assert len(re.findall(r'<section class="item card".*?class="chip" data-status="', html, re.S)) >= n_items
    assert html.count('<tr class="claim"') == len(report["ledger"])
    # one folder, no network: every stylesheet, script and font is a relative file that was written
    refs = re.findall(r'<(?:link|script)\b[^>]*(?:href|src)="([^"]+)"', html)
    assert sorted(refs) == ["static/audit.css", "static/audit.js", "static/katex/katex.min.css",
                            "static/katex/katex.min.js"]
    for ref in refs:
        assert (html_path.parent / ref).is_file(), ref
    css = (html_path.parent / "static/katex/katex.min.css").read_text()
    fonts = re.findall(r"url\(([^)]+)\)", css)
    assert fonts and all((html_path.parent / "static/katex" / f).is_file() for f in fonts)
    assert not re.search(r"<(img|iframe)\b|@import", html)
    assert "https://" not in html and re.findall(r"http://[^\"' ]+", html) == ["http://www.w3.org/2000/svg"]
    for r in report["ledger"]:
        assert f'id="claim-{r["id"]}"' in html
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert [i for i in set(ids) if ids.count(i) > 1] == []


def test_each_obligation_rendered_once_with_every_item_it_checks(report):
    v = audit_view.page(report)
    by_id = {o["id"]: o for o in v["obligations"]}
    assert len(by_id) == len(v["obligations"])
    for sec in report["sections"]:
        for it in sec["items"]:
            for o in it["obligations"]:
                assert it["id"] in by_id[o["id"]]["checks"]
    html = audit_html.render(report)
    for oid, o in by_id.items():
        assert html.count(f'id="ob-{oid}"') == 1
        assert html.count(f'href="#ob-{oid}"') == len(o["checks"])  # one link from each item it checks
    assert any(len(o["checks"]) > 1 for o in by_id.values())


def test_assumptions_list_every_item_that_rests_on_them(report):
    v = audit_view.page(report)
    items = [it for sec in v["sections"] for it in sec["items"]]
    for a in (it for it in items if it["kind"] == "assumption"):
        assert a["rested_on_by"] == [it["id"] for it in items if a["id"] in it["assumptions"]]
    assert sum(bool(it["rested_on_by"]) for it in items) >= 5


def test_formulas_name_registered_items_and_cover_the_page():
    from flashproof.spec.registry import collect as collect_items

    items = collect_items()
    assert audit_formulas.unknown_ids(items) == []
    page = [i for i, it in items.items() if it.source == audit_model.PAGE and it.kind != "assumption"
            and it.module != audit_model.CLAIMS_MODULE]  # claims are in the ledger
    assert page and [i for i in page if not audit_formulas.formulas_for(i)] == []


def test_unknown_record_fields_are_shown_and_missing_ones_do_not_break(report):
    """Fields another part adds later (scope, role, solvers, ...) appear as they are; a report
    without them renders as before."""
    rep = json.loads(json.dumps(report))
    it = rep["sections"][0]["items"][0]
    it["scope"] = "bounded: n ≤ 6"
    ob = it["obligations"][0]
    ob["role"] = "lemma"
    ob["solvers"] = ["z3", "cvc5"]
    html = audit_html.render(rep)
    assert '<tr class="extra" data-field="scope"><th>scope</th><td>bounded: n ≤ 6</td></tr>' in html
    assert '<tr class="extra" data-field="role"><th>role</th><td>lemma</td></tr>' in html
    assert '<tr class="extra" data-field="solvers"><th>solvers</th><td>z3, cvc5</td></tr>' in html
    assert audit_view.extra_fields({"id": "x", "note": {"a": 1}, "empty": None}, frozenset({"id"})) == \
        [("note", '{"a": 1}')]
    bare = json.loads(json.dumps(report))  # a report whose records carry only the fields the templates name
    for sec in bare["sections"]:
        for item in sec["items"]:
            for key in [k for k in item if k not in audit_view.ITEM_KEYS]:
                del item[key]
            for o in item["obligations"]:
                for key in [k for k in o if k not in audit_view.OBLIGATION_KEYS]:
                    del o[key]
    assert 'data-field="' not in audit_html.render(bare)  # nothing extra shown when nothing extra is there


def test_text_is_escaped(report):
    rep = json.loads(json.dumps(report))
    it = rep["sections"][0]["items"][0]
    it["statement"] = "<script>alert(1)</script> & u < p"
    html = audit_html.render(rep)
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; u &lt; p" in html and "<script>alert" not in html


def test_an_unknown_status_renders_a_chip_with_its_name():
    chip = str(audit_html.chip("checked-bounded"))
    assert 'data-status="checked-bounded"' in chip and ">checked-bounded<" in chip


def test_templates_and_static_files_are_package_data():
    """Every file under templates/ and static/ matches a package-data glob of pyproject.toml, so a
    wheel carries the report's templates, CSS/JS and the vendored KaTeX."""
    import fnmatch
    import tomllib
    from pathlib import Path

    root = Path(audit_html.__file__).resolve().parent
    conf = tomllib.loads((root.parents[1] / "pyproject.toml").read_text())
    globs = conf["tool"]["setuptools"]["package-data"]["flashproof.proofs.audit"]
    files = [p.relative_to(root).as_posix() for d in ("templates", "static") for p in (root / d).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    assert len(files) > 20
    # setuptools globs: '*' does not cross '/'
    missing = [f for f in files if not any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)]
    assert missing == []


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


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "0"], "--jobs: expected a positive integer, received 0"),
    (["--jobs", "-3"], "--jobs: expected a positive integer, received -3"),
    (["--trail", "{tmp}"], "--trail: expected a file, received"),
    (["--out", "{tmp}/afile"], "--out: expected a folder, received"),
    (["--cache-dir", "{tmp}/afile"], "--cache-dir: expected a folder, received"),
], ids=["jobs-zero", "jobs-negative", "trail-is-a-folder", "out-is-a-file", "cache-dir-is-a-file"])
def test_audit_bad_argument_exits_2(argv, message, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as exc:
        _args(tmp_path, *[a.format(tmp=tmp_path) for a in argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_audit_prove_passes_the_cache_settings_through(tmp_path):
    args = _args(tmp_path, "--prove", "--jobs", "3", "--cache-dir", str(tmp_path / "cc"))
    assert audit.prove_command(args) == ["prove", "--jobs", "3", "--out", str(tmp_path / "t"),
                                         "--cache-dir", str(tmp_path / "cc")]
    args = _args(tmp_path, "--prove", "--no-cache")
    assert audit.prove_command(args)[-1] == "--no-cache" and "--cache-dir" not in audit.prove_command(args)


def test_audit_prove_runs_prove_with_those_arguments_and_names_the_paths(tmp_path, monkeypatch, capsys):
    calls, real_run = [], audit.subprocess.run

    class Done:
        returncode = 0

    def fake_run(cmd, *a, **k):
        if cmd[:3] != [audit.sys.executable, "-m", "flashproof"]:
            return real_run(cmd, *a, **k)  # git, for the provenance
        calls.append(cmd)
        (tmp_path / "t").mkdir(exist_ok=True)
        (tmp_path / "t" / "audit.json").write_text(json.dumps({"schema": "flashproof.audit/1", "obligations": []}))
        return Done()

    monkeypatch.setattr(audit.subprocess, "run", fake_run)
    assert audit.run(_args(tmp_path, "--prove", "--cache-dir", str(tmp_path / "cc"))) == 0
    assert calls and calls[0][1:] == ["-m", "flashproof", "prove", "--jobs", str(audit.os.cpu_count() or 1),
                                      "--out", str(tmp_path / "t"), "--cache-dir", str(tmp_path / "cc")]
    out = capsys.readouterr().out
    assert str(tmp_path / "t" / "audit.json") in out and str(tmp_path / "cc") in out and "out/audit.json" not in out


def test_audit_prove_into_a_trail_not_named_audit_json_is_refused(tmp_path, capsys):
    p = argparse.ArgumentParser()
    audit.add_arguments(p)
    args = p.parse_args(["--trail", str(tmp_path / "audit-partial.json"), "--out", str(tmp_path / "r"), "--prove"])
    assert audit.run(args) == 2
    assert "must be named audit.json" in capsys.readouterr().err and not (tmp_path / "r").exists()
