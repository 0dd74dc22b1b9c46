"""The fuzzer's CI budget: 1,000 calls of seed 0 (torch_tpu/fuzz) on tpu against CPU, in worker
subprocesses. Fails on any failure (crash, hang, wrong values/shape/dtype, a missing or an extra
error) that torch_tpu/fuzz/known_failures.txt does not list. The long run is `make fuzz`."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_fuzz_seed0_1000_calls(tmp_path):
    out = tmp_path / "fuzz.json"
    cmd = [sys.executable, "-m", "torch_tpu.fuzz", "--calls", "1000", "--seed", "0", "--quiet",
           "--json", str(out), "--timeout", "60"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.exists(), f"fuzz run failed to report (rc {proc.returncode}): {proc.stderr[-2000:]}"
    report = json.loads(out.read_text())
    assert report["calls"] == 1000, report["verdicts"]
    unknown = [f for f in report["failures"] if "known" not in f]
    lines = [f"{f['category']}: {f['repro']} -> {f['detail'][:200]} ({f['rerun']})" for f in unknown]
    assert not unknown, "fuzz failures not in torch_tpu/fuzz/known_failures.txt:\n" + "\n".join(lines)
    # The run must judge calls, not skip them: most calls are compared.
    assert report["verdicts"].get("ok", 0) > 600, report["verdicts"]


def test_fuzz_records_crashes_and_hangs_with_their_reproducers(tmp_path):
    """A worker that aborts or hangs inside a call gives one 'crash' / 'hang' verdict with that
    call's reproducer, and the run goes on with the next call (TORCH_TPU_FUZZ_FAULT: a test hook
    in the worker)."""
    out = tmp_path / "fuzz.json"
    env = dict(os.environ, TORCH_TPU_FUZZ_FAULT="abort@2,hang@4")
    cmd = [sys.executable, "-m", "torch_tpu.fuzz", "--calls", "6", "--seed", "0", "--quiet", "--json", str(out),
           "--known", "none", "--sources", "table", "--timeout", "5"]
    subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    report = json.loads(out.read_text())
    assert report["calls"] == 6
    got = {f["call"]: f for f in report["failures"] if f["category"] in ("crash", "hang")}
    assert sorted((i, f["category"]) for i, f in got.items()) == [(2, "crash"), (4, "hang")], report["failures"]
    assert "signal 6" in got[2]["detail"]
    for i, f in got.items():
        assert f["repro"].startswith("table:") and f"--seed 0 --call {i}" in f["rerun"]
