"""The report in a real headless browser (Debian's chromium, installed by ``scripts/ensure_chromium.sh``).

The page loads from a file:// URL with the network off, logs no console error, and its own check
(``static/audit.js``) passes: a status chip on every item, a verdict on every claim, every formula
rendered by the vendored KaTeX, no repeated id, every in-page link has a target. A driver script
(``browser_driver.js``, appended to a copy of the page) then uses search, the status/kind/assumption
filters and an obligation link through real DOM events; the test compares what was shown with the
report data. Negative controls: a throwing statement, a removed chip, a repeated id, a broken link
and a bad formula must each be caught. A screenshot is kept under ``out/audit-browser/``.
"""
from __future__ import annotations

import collections
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from flashproof.proofs.audit import cli as audit, view

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it: scripts/ensure_chromium.sh)")
ROOT = Path(__file__).resolve().parents[2]
ARTEFACTS = ROOT / "out" / "audit-browser"
DRIVER = Path(__file__).with_name("browser_driver.js")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--window-size=1280,2000", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000"]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def _console_errors(stderr: str) -> list[str]:
    """The page's uncaught errors and console errors, as chromium logs them with --enable-logging."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln and ("Uncaught" in ln or "Error" in ln)]


def _body(dom: str) -> dict:
    m = re.search(r"<body([^>]*)>", dom)
    assert m, f"no <body> in the dumped DOM: {dom[:300]!r}"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))


class _Anchors(HTMLParser):
    """Every id and every in-page href of a DOM, and, per section, the hrefs inside it."""

    def __init__(self):
        super().__init__()
        self.ids, self.hrefs, self.section, self.links_in = [], [], None, collections.defaultdict(list)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "section":
            self.section = a.get("id")
        href = a.get("href")
        if href and href.startswith("#"):
            self.hrefs.append(href[1:])
            if self.section:
                self.links_in[self.section].append(href[1:])

    def handle_endtag(self, tag):
        if tag == "section":
            self.section = None


def _anchors(dom: str) -> _Anchors:
    p = _Anchors()
    p.feed(dom)
    return p


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The report of this checkout (using out/audit.json when it exists, else nothing proved)."""
    trail = ROOT / "out" / "audit.json"
    try:
        doc = audit._load_trail(trail)
    except ValueError:
        doc = None
    report = json.loads(json.dumps(audit.build_report(doc), default=str))
    out = tmp_path_factory.mktemp("report")
    return report, audit.write_report(report, out)


@pytest.fixture(scope="module")
def loaded(page, tmp_path_factory):
    """The untouched page as chromium left it (its DOM after the script ran) and chromium's stderr."""
    _, html = page
    res = _chromium(tmp_path_factory.mktemp("chromium"), "--dump-dom", html.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def _variant(html: Path, tmp_path: Path, name: str, edit) -> Path:
    """A copy of the page beside the original (so static/ resolves) with ``edit`` applied to its text."""
    f = html.with_name(f"{name}-{tmp_path.name}.html")
    f.write_text(edit(html.read_text(encoding="utf-8")), encoding="utf-8")
    return f


def test_report_loads_and_every_item_has_a_status(page, loaded):
    report, _ = page
    assert _console_errors(loaded.stderr) == []
    body = _body(loaded.stdout)
    assert body.get("data-audit-ready") == "ok", body
    n_items = sum(len(s["items"]) for s in report["sections"])
    assert int(body["data-audit-items"]) == n_items > 0
    assert int(body["data-audit-claims"]) == len(report["ledger"]) > 0
    chips = re.findall(r'<section class="item card"[^>]*id="item-([^"]+)".*?class="chip" data-status="([^"]+)"',
                       loaded.stdout, re.S)
    assert len(chips) == n_items
    assert {s for _, s in chips} <= {"fully-checked", "checked", "unchecked", "stale", "failed", "assumed"}


def test_formulas_render_with_the_vendored_katex_and_its_fonts(page, loaded, tmp_path):
    report, html = page
    n_formulas = sum(len(it["formulas"]) for sec in view.page(report)["sections"] for it in sec["items"])
    assert n_formulas >= 10
    assert int(_body(loaded.stdout)["data-audit-formulas"]) == n_formulas
    assert loaded.stdout.count('data-rendered="katex"') == n_formulas and 'data-rendered="error"' not in loaded.stdout
    assert loaded.stdout.count('class="katex-display"') == n_formulas  # KaTeX's own markup, not our text
    res = _chromium(tmp_path, "--dump-dom", _variant(html, tmp_path, "driven", _with_driver([])).as_uri())
    fonts = _driver_result(res.stdout)["fonts"]
    assert fonts and all(f.endswith(":loaded") or f.endswith(":unloaded") for f in fonts), fonts
    assert any(f.startswith("KaTeX_Main") and f.endswith(":loaded") for f in fonts), fonts


def test_no_id_repeats_and_every_link_has_a_target(loaded):
    a = _anchors(loaded.stdout)
    dup = [i for i, n in collections.Counter(a.ids).items() if n > 1]
    assert dup == []
    assert sorted(set(a.hrefs) - set(a.ids)) == []


def test_each_obligation_once_and_linked_both_ways(page, loaded):
    report, _ = page
    a = _anchors(loaded.stdout)
    checks: dict[str, set] = collections.defaultdict(set)
    for sec in report["sections"]:
        for it in sec["items"]:
            for o in it["obligations"]:
                checks[o["id"]].add(it["id"])
    assert checks and sum(len(v) > 1 for v in checks.values()) >= 5  # shared obligations exist
    for oid, its in checks.items():
        assert a.ids.count(f"ob-{oid}") == 1, oid
        assert {h[len("item-"):] for h in a.links_in[f"ob-{oid}"] if h.startswith("item-")} == its, oid
        for i in its:
            assert f"ob-{oid}" in a.links_in[f"item-{i}"], (i, oid)


def test_assumptions_link_every_item_that_rests_on_them(page, loaded):
    report, _ = page
    a = _anchors(loaded.stdout)
    items = [it for sec in report["sections"] for it in sec["items"]]
    assumptions = [it["id"] for it in items if it["kind"] == "assumption"]
    assert assumptions
    used = 0
    for aid in assumptions:
        expected = {it["id"] for it in items if aid in it["assumptions"]}
        shown = {h[len("item-"):] for h in a.links_in[f"item-{aid}"] if h.startswith("item-")}
        assert shown == expected, aid
        used += bool(expected)
    assert used >= 5  # "Used by: —" on every assumption card is what this replaced


def _with_driver(cases: list[dict]):
    script = "<script>window.DRIVER_CASES = " + json.dumps(cases) + ";</script><script>" + DRIVER.read_text() + \
        "</script></body>"
    return lambda text: text.replace("</body>", script, 1)


def _driver_result(dom: str) -> dict:
    m = re.search(r'<pre id="driver-result">(.*?)</pre>', dom, re.S)
    assert m, "the driver wrote no result: " + dom[-500:]
    return json.loads(m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&"))


def test_search_filters_and_links_in_the_browser(page, tmp_path):
    report, html = page
    v = view.page(report)
    items = [it for sec in v["sections"] for it in sec["items"]]
    obs = v["obligations"]
    shared = next(o for o in obs if len(o["checks"]) > 1)
    theorem = [it["id"] for it in items if it["kind"] == "theorem"]
    assumed = [it["id"] for it in items if it["status"] == "assumed"]
    a_id = "A-EXP-ISO"
    rests = [it["id"] for it in items if a_id in it["assumptions"] or it["id"] == a_id]
    cases = [{"name": "obligation-id", "q": shared["id"].lower()},
             {"name": "no-match", "q": "zzqx-no-such-text"},
             {"name": "kind-theorem", "kind": "theorem"},
             {"name": "status-assumed", "status": "assumed"},
             {"name": "assumption", "assumption": a_id},
             {"name": "kind-and-text", "kind": "theorem", "q": "Linear retained MEMORY"}]
    res = _chromium(tmp_path, "--dump-dom", _variant(html, tmp_path, "driven", _with_driver(cases)).as_uri())
    assert res.returncode == 0 and _console_errors(res.stderr) == [], res.stderr[-2000:]
    got = _driver_result(res.stdout)
    c = got["cases"]
    # a search for an obligation id shows it and every item it checks (their link tables name it)
    assert shared["id"] in c["obligation-id"]["obligations"]
    assert set(shared["checks"]) <= set(c["obligation-id"]["items"])
    assert c["no-match"]["items"] == c["no-match"]["obligations"] == c["no-match"]["claims"] == []
    assert c["no-match"]["count"].startswith("0/")
    assert c["kind-theorem"]["items"] == theorem and c["kind-theorem"]["claims"] == []
    assert set(c["kind-theorem"]["obligations"]) == {o["id"] for o in obs if set(o["checks"]) & set(theorem)}
    assert c["status-assumed"]["items"] == assumed
    assert c["assumption"]["items"] == rests and len(rests) > 3
    assert set(c["assumption"]["obligations"]) == {o["id"] for o in obs if set(o["checks"]) & set(rests)}
    assert c["kind-and-text"]["items"] == ["THM-MEMORY"]  # case-insensitive, and both filters apply
    assert len(got["reset"]["items"]) == len(items) and len(got["reset"]["obligations"]) == len(obs)
    assert len(got["reset"]["claims"]) == len(report["ledger"])
    # following an item's obligation link opens the (collapsed) obligation and its group
    assert got["link"]["hash"] == got["link"]["href"] and got["link"]["target_open"] and got["link"]["group_open"], got["link"]


def test_screenshot_artefact(page, tmp_path):
    _, html = page
    shot = tmp_path / "report.png"
    res = _chromium(tmp_path, f"--screenshot={shot}", html.as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTEFACTS / "report.png")
    (ARTEFACTS / "README.txt").write_text(f"screenshot of {html} taken by tests/audit/test_audit_browser.py\n")


def _first_item(report) -> str:
    return next(it for s in report["sections"] for it in s["items"])["id"]


def _control_break_chip(report):
    first = _first_item(report)

    def edit(text):
        start = text.index(f'id="item-{first}"')
        at = text.index('data-status="', start)
        return text[:at] + 'data-x="' + text[at + len('data-status="'):]
    return edit, "missing-status:", f"item-{first}"


def _control_duplicate_id(report):
    first = _first_item(report)
    return (lambda text: text.replace("</main>", f'<p id="item-{first}">copy</p></main>', 1)), "duplicate-ids:", \
        f"item-{first}"


def _control_broken_link(report):
    return (lambda text: text.replace("</main>", '<a href="#ob-NO-SUCH-OBLIGATION">x</a></main>', 1)), \
        "broken-links:", "ob-NO-SUCH-OBLIGATION"


def _control_bad_formula(report):
    def edit(text):
        at = text.index('data-tex="') + len('data-tex="')
        return text[:at] + r"\frac{" + text[at:]
    return edit, "katex:", "ParseError"


def _control_throw(report, static: Path):
    """audit.js inlined with a throwing statement in front: the script never gets to say ok."""
    js = (static / "audit.js").read_text(encoding="utf-8")
    return lambda text: text.replace('<script src="static/audit.js"></script>',
                                     "<script>undefinedFunctionCall();\n" + js + "</script>", 1)


@pytest.mark.parametrize("control", [_control_break_chip, _control_duplicate_id, _control_broken_link,
                                     _control_bad_formula],
                         ids=["missing-chip", "repeated-id", "broken-link", "bad-formula"])
def test_the_page_check_catches_a_planted_defect(control, page, tmp_path):
    """Negative controls: each planted defect turns data-audit-ready from "ok" into its named problem."""
    report, html = page
    edit, prefix, detail = control(report)
    res = _chromium(tmp_path, "--dump-dom", _variant(html, tmp_path, "broken", edit).as_uri())
    ready = _body(res.stdout).get("data-audit-ready", "")
    assert ready != "ok" and prefix in ready and detail in ready, ready


def test_a_script_error_is_detected(page, tmp_path):
    """Negative control: the page's script with a throwing statement never says ok, and the error is logged."""
    report, html = page
    edit = _control_throw(report, html.parent / "static")
    res = _chromium(tmp_path, "--dump-dom", _variant(html, tmp_path, "throws", edit).as_uri())
    assert res.returncode == 0
    assert _body(res.stdout).get("data-audit-ready") != "ok"
    assert any("undefinedFunctionCall" in ln for ln in _console_errors(res.stderr))
