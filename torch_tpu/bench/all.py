"""python -m torch_tpu.bench all [--quick] [--out DIR] [--only NAME,...] [--skip NAME,...]

Runs the benchmarks that compare with PyTorch CPU, each in its own process (its usual output
streams through), collects their headline rows (each main returns them) and prints one table:
benchmark, ours, PyTorch CPU, unit, ratio (how many times faster ours is), goal. Writes
DIR/all.md (the table) and DIR/all.png (a bar chart of the ratios; matplotlib); DIR defaults
to build/bench. --quick runs smaller sizes and fewer rounds (a few minutes instead of about
ten on 2 cores); ratios are measured in one run, so they hold on a shared machine where
absolute times do not. A benchmark that fails is reported and the others still run; the exit
status is then 1.
"""
import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

from torch_tpu.bench._report import Row, format_table, write

# name: (full-run arguments, --quick arguments or None to skip it in --quick)
PLAN = {
    "decomps": ([], ["--batch", "2", "--image", "32"]),
    "dispatch": ([], ["--iters", "1000", "--rounds", "3"]),
    "matmul": (["--out", ""], ["--quick", "--rounds", "2", "--out", ""]),
    "fused": ([], ["--iters", "3"]),
    "gpt": ([], ["--steps", "2", "--warmup", "1", "--rounds", "2"]),
    "resnet": ([], ["--batch", "4", "--steps", "1", "--rounds", "2"]),
    "compile": ([], ["--steps", "2", "--warmup", "1", "--rounds", "1", "--no-cold"]),
    "generate": ([], ["--tokens", "8"]),
    "dist": (["--max-mib", "16", "--rounds", "2"], None),
}


def _child(name, argv, out):
    from importlib import import_module

    rows = import_module(f"torch_tpu.bench.{name}").main(argv)
    with open(out, "w") as f:
        json.dump([dataclasses.asdict(r) for r in rows or []], f)


def _run(name, argv):
    """Runs one benchmark in a fresh process; returns (rows, error or None, seconds)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_all_") as d:
        out = os.path.join(d, "rows.json")
        cmd = [sys.executable, "-m", "torch_tpu.bench", "all", "--child", name, "--rows", out, "--", *argv]
        rc = subprocess.run(cmd, check=False).returncode
        if rc != 0 or not os.path.exists(out):
            return [], f"exit status {rc}", time.perf_counter() - t0
        with open(out) as f:
            rows = [Row(**r) for r in json.load(f)]
    return rows, None, time.perf_counter() - t0


def _select(args):
    names = [n for n in (args.only.split(",") if args.only else PLAN) if n]
    unknown = [n for n in names + (args.skip.split(",") if args.skip else []) if n and n not in PLAN]
    if unknown:
        raise SystemExit(f"[bench all] unknown benchmarks {unknown}; expected some of {list(PLAN)}")
    skip = set(args.skip.split(",")) if args.skip else set()
    return [n for n in names if n not in skip and (not args.quick or PLAN[n][1] is not None)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench all")
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds; skips dist")
    ap.add_argument("--out", default=os.path.join("build", "bench"), help="folder for all.md and all.png")
    ap.add_argument("--only", help="comma-separated subset of " + ", ".join(PLAN))
    ap.add_argument("--skip", help="comma-separated benchmarks to leave out")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--rows", help=argparse.SUPPRESS)
    ap.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.rest, args.rows)
        return 0

    rows, failed, t_start = [], [], time.perf_counter()
    for name in _select(args):
        bench_args = PLAN[name][1] if args.quick else PLAN[name][0]
        print(f"\n=== bench {name} {' '.join(bench_args)}", flush=True)
        got, err, secs = _run(name, bench_args)
        if err:
            failed.append(name)
            print(f"[bench all] {name} failed ({err}); continuing", file=sys.stderr, flush=True)
        rows += got
        print(f"=== {name}: {secs:.0f} s", flush=True)
    meta = (f"`python -m torch_tpu.bench all{' --quick' if args.quick else ''}`, {time.strftime('%Y-%m-%d %H:%M')}: "
            f"torch {torch.__version__}, {os.cpu_count()} cpus, {time.perf_counter() - t_start:.0f} s")
    print(f"\n=== {meta}")
    print(format_table(rows))
    md, png = write(args.out, rows, meta=meta)
    print(f"wrote {md}, {png}")
    if failed:
        print(f"[bench all] failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return rows
