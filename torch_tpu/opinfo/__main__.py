"""python -m torch_tpu.opinfo [--ops NAME,...] [--dtypes ...] [--grad] [--json FILE] [--fast] [--modules]

Runs op_db (and with --modules, module_db) on tpu against CPU, prints the summary lines and
exits nonzero when the results disagree with expected_failures.txt (a regression, or a listed
entry that now passes)."""
import argparse
import json
import sys

import torch

from torch_tpu.opinfo import expected, modules, ops


def parse_dtypes(s):
    if not s:
        return ops.JUDGED_DTYPES
    out = []
    for name in s.split(","):
        dt = getattr(torch, name.strip(), None)
        if not isinstance(dt, torch.dtype):
            raise SystemExit(f"[opinfo] unknown dtype {name!r}")
        out.append(dt)
    return tuple(out)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.opinfo", description=__doc__.split("\n\n")[1])
    p.add_argument("--ops", help="comma-separated op_db entry or op names (default: all)")
    p.add_argument("--dtypes", help="comma-separated dtypes to run and judge (default: float32 and the integer/bool dtypes)")
    p.add_argument("--grad", action="store_true", help="also judge float32 gradients (on by default for full and --fast runs)")
    p.add_argument("--no-grad", action="store_true", help="forward only")
    p.add_argument("--fast", action="store_true", help="the CI subset (~60 ops, a few modules)")
    p.add_argument("--modules", action="store_true", help="also run module_db")
    p.add_argument("--modules-only", action="store_true", help="run only module_db")
    p.add_argument("--json", help="write per-entry, per-dtype results to this file")
    p.add_argument("--time-limit", type=float, default=180.0, help="seconds per entry and phase (default 180: max_pool2d's forward, ~12 s alone, passed 60 s late in a full run)")
    p.add_argument("--update-expected", action="store_true", help="rewrite expected_failures.txt lines of the entries run")
    p.add_argument("--no-check", action="store_true", help="don't compare with expected_failures.txt")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--checkpoint", help="append each op_db entry's result to this JSON-lines file and skip the entries already in it (resumable long runs)")
    p.add_argument("--from-json", help="check/update from a saved --json file instead of running")
    a = p.parse_args(argv)

    names = [n for n in (a.ops or "").split(",") if n]
    dtypes = parse_dtypes(a.dtypes)
    grad = not a.no_grad
    phases = ("forward", "backward") if grad else ("forward",)
    reports = []
    if a.from_json:
        with open(a.from_json) as f:
            reports = list(json.load(f).values())
    elif not a.modules_only:
        r = ops.run(names, a.fast, dtypes, grad, a.time_limit, not a.quiet, a.checkpoint)
        reports.append(r)
    if (a.modules or a.modules_only) and not a.from_json:
        r = modules.run(names if a.modules_only else None, a.fast, grad, a.time_limit, not a.quiet)
        reports.append(r)
    if a.json and not a.from_json:
        with open(a.json, "w") as f:
            json.dump({r["kind"]: r for r in reports}, f, indent=1, default=str)
    problems = []
    judged_default = dtypes == ops.JUDGED_DTYPES
    for r in reports:
        if a.update_expected and judged_default:
            n = expected.update(r, phases=phases)
            print(f"[opinfo] expected_failures.txt: {n} lines")
        elif not a.no_check and judged_default:
            problems += expected.check(r, phases=phases)
    for line in problems:
        print(line)
    for r in reports:
        print(f"[{r['kind']}] {r['elapsed_s']} s; statuses {r['summary']['by_status']}")
    for r in reports:
        print((ops.summary_line if r["kind"] == "op_db" else modules.summary_line)(r))
    if problems:
        print(f"[opinfo] {len(problems)} disagreement(s) with expected_failures.txt", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
