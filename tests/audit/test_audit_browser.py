"""The report in a real headless browser (Debian's chromium, installed by ``scripts/ensure_chromium.sh``).

The page loads from a file:// URL with the network disabled, logs no console error, its script runs and
finds a status chip on every item and a verdict on every claim; a screenshot is kept as an artefact
under ``out/audit-browser/``. A copy of the page whose script throws must be caught (the check can fail).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from flashproof.proofs.audit import cli as audit

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it: scripts/ensure_chromium.sh)")
ARTEFACTS = Path(__file__).resolve().parents[2] / "out" / "audit-browser"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--window-size=1280,2000", "--enable-logging=stderr", "--v=0"]


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


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The report of this checkout (using out/audit.json when it exists, else nothing proved)."""
    trail = Path(__file__).resolve().parents[2] / "out" / "audit.json"
    try:
        doc = audit._load_trail(trail)
    except ValueError:
        doc = None
    report = audit.build_report(doc)
    out = tmp_path_factory.mktemp("report")
    return report, audit.write_report(report, out)


def test_report_loads_and_every_item_has_a_status(page, tmp_path):
    report, html = page
    res = _chromium(tmp_path, "--dump-dom", html.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    assert _console_errors(res.stderr) == []
    body = _body(res.stdout)
    assert body.get("data-audit-ready") == "ok", body
    n_items = sum(len(s["items"]) for s in report["sections"])
    assert int(body["data-audit-items"]) == n_items > 0
    assert int(body["data-audit-claims"]) == len(report["ledger"]) > 0
    chips = re.findall(r'<section class="item"[^>]*id="item-([^"]+)".*?data-status="([^"]+)"', res.stdout, re.S)
    assert len(chips) == n_items
    assert {s for _, s in chips} <= {"fully-checked", "checked", "unchecked", "stale", "failed", "assumed"}


def test_screenshot_artefact(page, tmp_path):
    _, html = page
    shot = tmp_path / "report.png"
    res = _chromium(tmp_path, f"--screenshot={shot}", html.as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, ARTEFACTS / "report.png")
    (ARTEFACTS / "README.txt").write_text(f"screenshot of {html} taken by tests/test_audit_browser.py\n")


def test_a_script_error_is_detected(page, tmp_path):
    """Negative control: the same page with a throwing statement before the check never says ok."""
    _, html = page
    broken = tmp_path / "broken.html"
    text = html.read_text(encoding="utf-8")
    broken.write_text(text.replace("<script>", "<script>undefinedFunctionCall();", 1), encoding="utf-8")
    res = _chromium(tmp_path, "--dump-dom", broken.as_uri())
    assert res.returncode == 0
    assert _body(res.stdout).get("data-audit-ready") != "ok"
    assert any("undefinedFunctionCall" in ln for ln in _console_errors(res.stderr))


def test_a_missing_chip_is_detected(page, tmp_path):
    """Negative control: remove one item's chip and the page reports that item."""
    report, _ = page
    first = next(it for s in report["sections"] for it in s["items"])
    rep = json.loads(json.dumps(report, default=str))
    from flashproof.proofs.audit import html as audit_html

    html = audit_html.render(rep)
    start = html.index(f'id="item-{first["id"]}"')
    chip_at = html.index('data-status="', start)
    html = html[:chip_at] + 'data-x="' + html[chip_at + len('data-status="'):]
    f = tmp_path / "nochip.html"
    f.write_text(html, encoding="utf-8")
    res = _chromium(tmp_path, "--dump-dom", f.as_uri())
    assert _body(res.stdout).get("data-audit-ready", "").startswith("missing-status:")
    assert f"item-{first['id']}" in _body(res.stdout)["data-audit-ready"]
