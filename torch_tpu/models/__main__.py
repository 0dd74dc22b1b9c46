"""python -m torch_tpu.models [--families NAME,...] [--modes strict,fused,compile] [--fast] [--json FILE]

Runs Hugging Face model families (tiny configs) on tpu against CPU: forward, backward (every
parameter gradient) and greedy generate; prints the summary table and exits nonzero when the
results disagree with expected_failures.txt (a regression, or a listed failure that now passes)."""
import argparse
import json
import sys

from torch_tpu.models import expected, registry
from torch_tpu.models.run import run, summary_lines
from torch_tpu.models.runner import MODES


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.models", description=__doc__.split("\n\n")[1])
    p.add_argument("--families", help="comma-separated families (transformers model_type; default: all)")
    p.add_argument("--kinds", help="comma-separated task kinds (causal-lm, moe-lm, masked-lm, seq2seq, image, audio-ctc, speech-seq2seq, clip)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated modes (default: strict,fused,compile)")
    p.add_argument("--fast", action="store_true", help=f"the CI subset ({', '.join(registry.FAST)})")
    p.add_argument("--list", action="store_true", help="list the families and exit")
    p.add_argument("--json", help="write the report to this file")
    p.add_argument("--time-limit", type=float, default=300.0, help="seconds per family and mode (default 300)")
    p.add_argument("--update-expected", action="store_true", help="rewrite expected_failures.txt lines of what was run")
    p.add_argument("--no-check", action="store_true", help="don't compare with expected_failures.txt")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--from-json", help="check/update/summarize a saved --json report instead of running")
    a = p.parse_args(argv)

    if a.list:
        for f in registry.FAMILIES.values():
            print(f"{f.name:<24} {f.kind}")
        return 0
    names = [n for n in (a.families or "").split(",") if n]
    if a.kinds:
        kinds = set(a.kinds.split(","))
        names += [f.name for f in registry.FAMILIES.values() if f.kind in kinds]
    modes = [m for m in a.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad:
        p.error(f"unknown modes {bad}; expected some of {list(MODES)}")
    if a.from_json:
        with open(a.from_json) as f:
            report = json.load(f)
    else:
        report = run(names, a.fast, modes, a.time_limit, not a.quiet, a.json)
    problems = []
    if a.update_expected:
        n = expected.update(report)
        print(f"[models] expected_failures.txt: {n} lines")
    elif not a.no_check:
        problems = expected.check(report)
    for line in problems:
        print(line)
    for line in summary_lines(report):
        print(line)
    if problems:
        print(f"[models] {len(problems)} disagreement(s) with expected_failures.txt", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
