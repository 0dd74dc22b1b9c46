"""`python -m torch_tpu.bench all` (issue 17): the table / markdown / PNG writer on fake rows,
and the runner on one quick benchmark in a subprocess. No timing assertions: the figures of a
shared 2-core machine are noise; only the plumbing is checked."""
import os
import subprocess
import sys

from torch_tpu.bench._report import Row, format_table, markdown, write

ROWS = [
    Row("gpt", "GPT train step, strict eager", 120.0, 150.0, goal=1.0),
    Row("matmul", "sq1024 f32 GFLOP/s", 40.0, 60.0, unit="GFLOP/s", higher_is_better=True),
    Row("decomps", "ResNet-18 train step, strict: decomposition calls", 0, unit="calls", goal=0),
    Row("decomps", "GPT train step, fused: decomposition calls", 2, unit="calls", goal=0, note="foo x2"),
    Row("compile", "failed measurement", float("nan"), 2.0, unit="s"),
]


def test_rows_ratio_and_goal():
    gpt, mm, zero, two, bad = ROWS
    assert gpt.ratio == 150.0 / 120.0 and gpt.met is True  # time: PyTorch / ours
    assert mm.ratio == 40.0 / 60.0 and mm.met is None      # rate: ours / PyTorch
    assert zero.ratio is None and zero.met is True and two.met is False
    assert bad.ratio is None


def test_table_markdown_and_png(tmp_path):
    text = format_table(ROWS)
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["benchmark", "ours"] and len(lines) == len(ROWS) + 3
    assert "1.25x" in text and "0.67x" in text and "NO" in text
    md = markdown(ROWS, meta="meta line")
    assert md.count("\n| ") == len(ROWS) + 1 and "meta line" in md and "foo x2" in md
    md_path, png_path = write(str(tmp_path / "out"), ROWS)
    assert open(md_path).read().startswith("# torch_tpu vs PyTorch CPU")
    with open(png_path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(png_path) > 5000


def test_bench_all_quick_runs_and_writes(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, "-m", "torch_tpu.bench", "all", "--quick", "--only", "dispatch", "--out", str(out),
                        "--no-progress"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "geomean ratio tpu/cpu" in r.stdout  # the benchmark's own output streams through
    assert "dispatch: geomean of the cases, strict eager" in r.stdout
    md = (out / "all.md").read_text()
    assert md.count("| dispatch: ") == 6
    assert (out / "all.png").read_bytes()[:4] == b"\x89PNG"
