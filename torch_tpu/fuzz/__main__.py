"""python -m torch_tpu.fuzz [--calls N] [--seed S] [--json FILE] | --call I

Random op calls on tpu against PyTorch CPU (see torch_tpu/fuzz/__init__.py). Prints the
figures; exits nonzero on a failure not in known_failures.txt (or, with --check-stale, on a
known line that no failure matched)."""
import argparse
import json
import os
import sys


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.fuzz", description=__doc__.split("\n\n")[1])
    p.add_argument("--calls", type=int, default=1000, help="number of calls (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first call index (default 0)")
    p.add_argument("--json", help="write the report (every failure with its reproducer) here")
    p.add_argument("--call", type=int, help="replay one call in this process and print it")
    p.add_argument("--batch", type=int, default=400, help="calls per worker process (default 400)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a call may run before it counts as a hang")
    p.add_argument("--draw-timeout", type=float, default=300.0, help="seconds to draw a call (CPU sample generation)")
    p.add_argument("--fused-fraction", type=float, default=0.2, help="share of calls run in fused mode (default 0.2)")
    p.add_argument("--sources", default="opdb,table", help="opdb, table or both (default)")
    p.add_argument("--known", default=None, help="known-failures file (default: the one next to this module; 'none')")
    p.add_argument("--check-stale", action="store_true", help="also fail when a known line matched nothing")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--stop", type=int, help=argparse.SUPPRESS)
    p.add_argument("--tmpdir", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    sources = tuple(s.strip() for s in a.sources.split(","))
    if a.worker:
        from torch_tpu.fuzz.driver import worker_main
        worker_main(a.seed, a.start, a.stop, a.fused_fraction, sources)
        return 0
    if a.call is not None:
        return replay(a.seed, a.call, a.fused_fraction, sources)
    from torch_tpu.fuzz import driver, known
    a.known = None if a.known == "none" else (a.known or known.PATH)
    report = driver.run(a, progress=not a.quiet)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    print(summary(report))
    for f in report["failures"]:
        if "known" not in f:
            print(f"  {f['category']}: {f['repro']} -> {f['detail'][:200]}  ({f['rerun']})")
    bad = report["unknown_failures"] > 0 or (a.check_stale and report["stale_known"])
    for s in report["stale_known"]:  # a fixed failure, or one this seed does not reach
        print(f"  {'STALE' if a.check_stale else 'note:'} known line matched no failure in this run: {s}")
    return 1 if bad else 0


def summary(r):
    cats = " ".join(f"{k}={v}" for k, v in r["by_category"].items())
    return (f"fuzz seed {r['seed']}: {r['calls']} calls in {r['wall_s']} s; mismatches {r['mismatches']} "
            f"({r['unknown_failures']} not known): {cats}; verdicts {r['verdicts']}; "
            f"errors not naming the op {r['both_raise_not_naming_op']}")


def replay(seed, i, fused_fraction, sources):
    from torch_tpu.fuzz.worker import Fuzzer
    fz = Fuzzer(fused_fraction, sources)
    call = fz.draw(seed, i)
    print(f"call {i}: {call.repro}")
    res = fz.run(call)
    print(json.dumps(res, indent=1))
    return 0 if res["verdict"] in ("ok", "both-raise", "skipped") else 1


if __name__ == "__main__":
    sys.exit(main())
