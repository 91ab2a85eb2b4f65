"""`flashproof prove` end to end on a small selection: exit status, progress lines, trail files, and
every argument check (table-driven: each bad argument exits 2 with a message on stderr before any
obligation runs)."""
from __future__ import annotations

import io
import json

import pytest

from flashproof.cli import main
from flashproof.proofs.engine import cli as prove_cli
from flashproof.proofs.engine.progress import Progress, clock_text, eta


def test_prove_only_writes_trail_and_exits_zero(tmp_path, capsys):
    rc = main(["prove", "--only", "ATT-MERGE-COMM", "--jobs", "2", "--out", str(tmp_path / "out"),
               "--cache-dir", str(tmp_path / "cache")])
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert doc["schema"] == "flashproof.audit/1" and doc["partial"] is True
    by_id = {r["obligation"]: r for r in doc["obligations"]}
    assert set(by_id) == {"ATT-MERGE-COMM", "ATT-MERGE-COMM/max-from-second"}
    assert by_id["ATT-MERGE-COMM"]["status"] == "proved"
    assert by_id["ATT-MERGE-COMM/max-from-second"]["counterexample"]
    assert not doc["name_errors"] and not doc["import_errors"] and rc == 0  # the name says it: exits 0
    assert "ATT-MERGE-COMM" in out and "total" in out
    assert (tmp_path / "out" / "audit.md").read_text().startswith("# flashproof audit")
    item = next(i for i in doc["items"] if i["id"] == "EXT-MERGE-COMM")
    # its own obligation ran and holds; its dependency DEF-SUMMARY was not run: checked, not fully
    assert item["status"] == "checked" and "A-EXP-ISO" in item["assumptions"]
    dep = next(i for i in doc["items"] if i["id"] == "DEF-SUMMARY")
    assert dep["status"] == "unchecked"


def test_partial_run_without_out_never_overwrites_the_full_trail(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    full = tmp_path / "out" / "audit.json"
    full.write_text('{"schema": "flashproof.audit/1", "the": "full trail"}')
    assert main(["prove", "--only", "ATT-PARTITION", "--jobs", "1", "--cache-dir", str(tmp_path / "c")]) == 0
    assert json.loads(full.read_text())["the"] == "full trail"
    part = json.loads((tmp_path / "out" / "audit-partial.json").read_text())
    assert part["partial"] is True and (tmp_path / "out" / "audit-partial.md").is_file()
    assert {r["obligation"] for r in part["obligations"]} == {"ATT-PARTITION", "ATT-PARTITION/block-off-by-one", "ATT-PARTITION/step-b-plus-one"}
    assert "out/audit-partial.json" in capsys.readouterr().out


@pytest.mark.parametrize("out, partial, expected", [
    (None, False, ("out", "audit")),
    (None, True, ("out", "audit-partial")),
    ("elsewhere", True, ("elsewhere", "audit")),
    ("elsewhere", False, ("elsewhere", "audit")),
], ids=["full-default", "partial-default", "partial-explicit-out", "full-explicit-out"])
def test_trail_target(out, partial, expected):
    folder, stem = prove_cli.trail_target(out, partial)
    assert (str(folder), stem) == expected


def test_list_prints_ids_kind_and_items_and_runs_nothing(tmp_path, capsys):
    assert main(["prove", "--list", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {ln.split()[0]: ln.split()[1:] for ln in out}
    assert rows["ATT-MERGE-COMM"][:2] == ["obligation", "checks"] and "EXT-MERGE-COMM" in " ".join(rows["ATT-MERGE-COMM"])
    assert rows["ATT-MERGE-COMM/max-from-second"] == ["control", "of", "ATT-MERGE-COMM"]
    assert len(rows) == len(out) > 100  # one line per obligation and control
    assert not (tmp_path / "o").exists()  # nothing ran, nothing written


def test_list_with_only_lists_the_selection(capsys):
    assert main(["prove", "--list", "--only", "EXT-MERGE-COMM"]) == 0
    ids = [ln.split()[0] for ln in capsys.readouterr().out.splitlines()]
    assert ids == ["ATT-MERGE-COMM", "ATT-MERGE-COMM/max-from-second"]


# Each row: argv after `prove`, text the stderr message must contain. All exit 2 before any work.
BAD_ARGUMENTS = [
    (["--jobs", "0"], "--jobs: expected a positive integer, received 0"),
    (["--jobs", "-3"], "--jobs: expected a positive integer, received -3"),
    (["--jobs", "two"], "--jobs: expected a positive integer, received 'two'"),
    (["--timeout", "-1"], "--timeout: expected a positive number of seconds, received -1"),
    (["--timeout", "0"], "--timeout: expected a positive number of seconds, received 0"),
    (["--timeout", "nan"], "--timeout: expected a positive number of seconds, received nan"),
    (["--timeout", "soon"], "--timeout: expected a positive number of seconds, received 'soon'"),
    (["--only", "NOPE"], "--only 'NOPE': not an obligation, control or item id; valid ids include the items DEF-SUMMARY"),
    (["--only", "A-EXP-ISO"], "--only 'A-EXP-ISO': an assumption (trusted, nothing checks it), so it selects nothing"),
    (["--only", "ATT-MERGE-COM"], "did you mean ATT-MERGE-COMM"),
    (["--only", "ATT-PARTITION", "--only", "thm-exactt"], "--only 'thm-exactt'"),
]


@pytest.mark.parametrize("argv, message", BAD_ARGUMENTS,
                         ids=["jobs-zero", "jobs-negative", "jobs-not-a-number", "timeout-negative", "timeout-zero",
                              "timeout-nan", "timeout-not-a-number", "only-unknown", "only-an-assumption", "only-close-match",
                              "only-one-of-two-unknown"])
def test_bad_argument_exits_2_before_work(argv, message, tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(prove_cli.runner, "execute", lambda *a, **k: ran.append(1) or [])
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(["prove", *argv, "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")]))
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err, err
    assert ran == [] and not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag", ["--out", "--cache-dir"], ids=["out-is-a-file", "cache-dir-is-a-file"])
def test_folder_argument_that_is_a_file_exits_2(flag, tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(SystemExit) as exc:
        main(["prove", "--only", "ATT-PARTITION", flag, str(f)])
    assert exc.value.code == 2 and f"{flag}: expected a folder, received" in capsys.readouterr().err


def test_unknown_id_names_the_list_command(capsys):
    assert main(["prove", "--only", "ZZZZZZZZ"]) == 2
    err = capsys.readouterr().err
    assert "flashproof prove --list" in err and "THM-EXACT" in err


@pytest.mark.parametrize("flag", ["--deep", "--force", "--no-cache"])
def test_prove_flags_parse(flag, tmp_path):
    rc = main(["prove", "--only", "ATT-PARTITION", flag, "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")])
    assert rc == 0  # both records ok and the registry's names resolve (rc 1 would be a failure)
    doc = json.loads((tmp_path / "o" / "audit.json").read_text())
    assert {r["obligation"]: r["ok"] for r in doc["obligations"]} == {"ATT-PARTITION": True,
                                                                       "ATT-PARTITION/block-off-by-one": True,
                                                                       "ATT-PARTITION/step-b-plus-one": True}


@pytest.mark.parametrize("elapsed, ran, remaining, expected", [
    (10.0, 2, 3, 15.0), (10.0, 0, 3, None), (10.0, 5, 0, 0.0)], ids=["rate", "nothing-ran-yet", "finished"])
def test_eta_rule(elapsed, ran, remaining, expected):
    assert eta(elapsed, ran, remaining) == expected


class _FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_progress_on_a_pipe_is_plain_lines_with_eta():
    clock, buf = _FakeClock(), io.StringIO()  # StringIO.isatty() is False, like a CI log
    p = Progress(4, stream=buf, clock=clock)
    p.step("[  1/4] cached", cached=True)
    clock.t = 10.0
    p.step("[  2/4] ran")
    p.close()
    lines = buf.getvalue().splitlines()
    assert lines == ["[  1/4] cached  [elapsed 00:00, eta ?]", "[  2/4] ran  [elapsed 00:10, eta 00:20]"]
    assert "\r" not in buf.getvalue()


def test_progress_on_a_terminal_draws_a_bar_with_eta():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    clock, buf = _FakeClock(), Tty()
    p = Progress(2, stream=buf, clock=clock)
    clock.t = 4.0
    p.step("[  1/2] ran")
    p.close()
    text = buf.getvalue()
    assert "[  1/2] ran" in text and "eta 00:04" in text and "\r" in text


def test_clock_text():
    assert clock_text(None) == "?" and clock_text(75) == "01:15"
