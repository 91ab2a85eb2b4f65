"""docs/fuzz.md, section "Fuzz your kernel": every ```python block runs (in order, one namespace)
and every `$ flashproof …   # exit N` line exits N — the page's examples are tests."""
import pathlib
import re
import shlex

import pytest
import torch

from flashproof.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "fuzz.md").read_text()
SECTION = DOC.split("## Fuzz your kernel", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, re.S)
COMMANDS = re.findall(r"^\$ (flashproof .*?)\s+# exit (\d)$", SECTION, re.M)


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    torch.set_num_threads(1)


def test_the_section_has_examples():
    assert len(BLOCKS) >= 3 and len(COMMANDS) >= 3


def test_python_examples_run():
    scope: dict = {"__name__": "docs_fuzz"}
    for i, block in enumerate(BLOCKS):
        exec(compile(block, f"docs/fuzz.md python block {i + 1}", "exec"), scope)


@pytest.mark.parametrize("command, code", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_command_examples_exit_as_documented(command, code, tmp_path, capsys):
    argv = shlex.split(command)[1:]
    extra = ["--quiet", "--repro-dir", str(tmp_path)] if "--budget 0" not in command else []
    assert main(argv + extra) == int(code), capsys.readouterr()
