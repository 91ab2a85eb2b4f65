"""``flashproof bench-cpu`` (``bench/cpu.py``) at a tiny shape: a table per thread count, titled with the
load and, for ``--busy``, the spinning processes beside it (stopped afterwards); arguments checked."""
from __future__ import annotations

import argparse
import os

import pytest

from flashproof.bench import cpu


def _args(*argv):
    p = argparse.ArgumentParser()
    cpu.add_arguments(p)
    return p.parse_args(list(argv))


def test_tables_name_the_busy_processes_and_stop_them(capsys, monkeypatch):
    started = []
    real = cpu.subprocess.Popen
    monkeypatch.setattr(cpu.subprocess, "Popen", lambda *a, **kw: started.append(real(*a, **kw)) or started[-1])
    assert cpu.run(_args("--seqlen", "64", "--heads", "2", "--head-dim", "16", "--reps", "1", "--threads", "1",
                         "--busy", "1", "--busy-nice", "5")) == 0
    out = capsys.readouterr().out
    assert "1 threads of" in out and "beside 1 spinning processes at nice 5" in out
    assert out.count("| no | forward |") == 1 and out.count("| yes | backward |") == 1 and "| median ratio |" in out
    assert len(started) == 1 and started[0].poll() is not None, "the spinning process outlived the bench"
    with pytest.raises(ProcessLookupError):
        os.kill(started[0].pid, 0)


@pytest.mark.parametrize("argv", [("--busy", "-1"), ("--busy-nice", "20"), ("--threads", "0"), ("--reps", "0")])
def test_bad_arguments_exit_2_with_a_message(argv, capsys):
    assert cpu.run(_args(*argv)) == 2
    assert "bench-cpu: --" in capsys.readouterr().out
