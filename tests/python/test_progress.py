"""Progress bars (issue 18): the OpInfo runner and the long benchmarks draw a tqdm bar on
stderr only when it is a terminal; a pipe, --quiet / --no-progress or TORCH_TPU_PROGRESS=0
keeps logs free of bar redraws."""
import io
import os
import pty
import subprocess
import sys

import pytest

from torch_tpu._internal import progress
from torch_tpu.opinfo.common import Progress

pytest.importorskip("tqdm")


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_PROGRESS", raising=False)
    tty, pipe = _Tty(), io.StringIO()
    assert list(progress.wrap(range(5), "work", file=tty)) == list(range(5))
    assert "work 0/5" in tty.getvalue()
    assert list(progress.wrap(range(5), "work", file=pipe)) == list(range(5))
    assert pipe.getvalue() == ""
    quiet = _Tty()
    assert list(progress.wrap(range(3), "work", flag=False, file=quiet)) == [0, 1, 2]
    assert quiet.getvalue() == ""
    monkeypatch.setenv("TORCH_TPU_PROGRESS", "0")
    off = _Tty()
    assert list(progress.wrap(range(3), "work", file=off)) == [0, 1, 2] and off.getvalue() == ""


def test_opinfo_progress_counts(monkeypatch):
    monkeypatch.delenv("TORCH_TPU_PROGRESS", raising=False)
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    bar = Progress(3, True, "opinfo")
    bar.update(0, "abs")
    bar.update(1, "abs", "pass")
    bar.update(2, "add", "fail")
    bar.done()
    out = tty.getvalue()
    assert "opinfo 0/3" in out, out
    assert bar.done_n == 2 and bar.counts == {"pass": 1, "fail": 1}


def _opinfo(*args):
    """The runner's stderr when it is a pseudo-terminal."""
    cmd = [sys.executable, "-m", "torch_tpu.opinfo", "--ops", "abs,neg", "--no-grad", "--no-check", *args]
    env = {k: v for k, v in os.environ.items() if k != "TORCH_TPU_PROGRESS"}
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert p.wait(timeout=300) == 0
    finally:
        os.close(master)
    return b"".join(chunks).decode(errors="replace")


def test_opinfo_runner_draws_on_a_terminal():
    # One run (op_db's import is slow); the pipe case is test_bar_only_on_a_terminal's.
    assert "opinfo 0/2" in _opinfo()
