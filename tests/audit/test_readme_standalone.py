"""The README stands alone: it restates the theorem page with the spec ids that hold each claim, and
names no file a clone does not have (the design notes, the source documents, issue numbers)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from flashproof.spec.registry import collect as collect_items

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GENERATED = ("out/", ".prove-cache/", "results/")  # written by the commands the README describes


def _tracked() -> list[str]:
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    if r.returncode != 0:  # not a git checkout (an sdist): every file on disk
        return [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    return r.stdout.split()


def test_no_reference_to_what_the_repository_does_not_contain():
    for pattern in (r"DESIGN\.md", r"\bissue[- ]#?\d+", r"shared/seeds", r"\.\./shared"):
        assert not re.search(pattern, README, re.I), pattern


def test_every_path_it_names_exists():
    tracked = _tracked()
    dirs = {"/".join(p.split("/")[:k]) + "/" for p in tracked for k in range(1, p.count("/") + 1)}
    names = set(re.findall(r"`([\w.-]+(?:/[\w.*{},-]*)+)`", README)) | set(re.findall(r"\]\(([^)#\s]+)\)", README))
    missing = []
    for n in sorted(names):
        if n.startswith(GENERATED) or "*" in n or "{" in n:
            continue
        if not any(p == n or p.endswith("/" + n) for p in tracked) and not any(d == n or d.endswith("/" + n) for d in dirs):
            missing.append(n)
    assert missing == []


def test_theorem_page_section_names_each_page_item_and_its_checks():
    items = collect_items()
    sec = README[README.index("## The theorem page, restated"):README.index("## What `make prove` checks")]
    page = [i for i, it in items.items() if it.source == "004_b37f59f788102f1f.txt" and it.kind != "assumption"
            and not i.startswith("CL-")]
    assert page
    for iid in page:
        assert f"`{iid}`" in sec, iid
        for ob in items[iid].checked_by:
            family = re.sub(r"-(fp16|bf16|fp32)$", "", ob)
            assert ob in sec or family in sec, (iid, ob)
    for aid in re.findall(r"`(A-[A-Z-]+)`", sec):
        assert items[aid].kind == "assumption", aid
    assert "$$" in sec  # the page's formulas, as display math
