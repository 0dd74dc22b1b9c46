"""The expected-failures list (expected_failures.txt next to this file): one line per failing
(family, mode, phase) with its reason. Like the OpInfo list it only shrinks: the runner fails
when a listed phase now passes (delete the line) or an unlisted one fails (a regression).
`--update-expected` rewrites the lines of the families and modes that were run."""
import os

from torch_tpu.models.runner import FAILURES

PATH = os.path.join(os.path.dirname(__file__), "expected_failures.txt")
HEADER = """\
# Expected failures of `python -m torch_tpu.models` (Hugging Face model families vs CPU).
# One line per failing (family, mode, phase):  <family>  <mode>  <phase>  <status>  <detail>
# Mode is strict, fused or compile on the host runtime, pjrt:<mode> on the pjrt runtime.
# Status: not-implemented (detail names the missing aten op), mismatch (max error), error,
# timeout, cpu-error (the tiny config does not run on CPU; phase "all").
# Regenerate the lines of what you ran with `python -m torch_tpu.models ... --update-expected`.
"""


def mode_key(report, mode):
    rt = report.get("runtime", "host")
    return mode if rt == "host" else f"{rt}:{mode}"


def load(path=PATH):
    """{(family, mode, phase): (status, detail)}."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 4)
            if len(parts) < 4:
                raise ValueError(f"[models] {path}:{n}: expected '<family> <mode> <phase> <status> <detail>'; got {line!r}")
            out[tuple(parts[:3])] = (parts[3], parts[4] if len(parts) > 4 else "")
    return out


def results(report):
    """Yields (family, mode key, phase, status, detail) of every judged phase in `report`."""
    for fam, res in report["families"].items():
        if res.get("status") == "cpu-error":
            yield fam, "cpu", "all", "cpu-error", res["reason"]
            continue
        for mode, phases in res["modes"].items():
            for phase, r in phases.items():
                detail = " ".join(r["missing"]) if r.get("missing") else " ".join(r.get("reason", "").split())[:200]
                yield fam, mode_key(report, mode), phase, r["status"], detail


def _ran(report):
    keys = {(fam, "cpu", "all") for fam in report["families"]}
    keys |= {(fam, mode_key(report, m), ph) for fam in report["families"]
             for m in report["modes"] for ph in ("forward", "backward", "generate")}
    return keys


def check(report, expected=None):
    """Problems (strings) of `report` against the list: regressions and stale lines."""
    expected = load() if expected is None else expected
    problems = []
    for fam, mode, phase, st, detail in results(report):
        listed = (fam, mode, phase) in expected
        failed = st in FAILURES or st == "cpu-error"
        if failed and not listed:
            problems.append(f"REGRESSION {fam} {mode} {phase}: {st}: {detail}")
        elif not failed and listed:
            problems.append(f"NOW {st.upper()} {fam} {mode} {phase}: listed in expected_failures.txt; remove the line")
    return problems


def update(report, path=PATH):
    """Rewrites the lines of the (family, mode) pairs in `report`; keeps the rest. Returns the count."""
    expected = load(path)
    ran = _ran(report)
    kept = {k: v for k, v in expected.items() if k not in ran}
    for fam, mode, phase, st, detail in results(report):
        if st in FAILURES or st == "cpu-error":
            kept[(fam, mode, phase)] = (st, detail)
    with open(path, "w") as f:
        f.write(HEADER)
        for (fam, mode, phase), (st, detail) in sorted(kept.items()):
            f.write(f"{fam}  {mode}  {phase}  {st}  {detail}".rstrip() + "\n")
    return len(kept)
