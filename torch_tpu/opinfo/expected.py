"""The expected-failures list (expected_failures.txt next to this file): one line per failing
(entry, phase) with its reason. The runner fails when a listed entry now passes (the list only
shrinks) or when an unlisted entry fails (a regression). `--update-expected` rewrites the lines
of the entries that were run and keeps the rest."""
import os

PATH = os.path.join(os.path.dirname(__file__), "expected_failures.txt")
HEADER = """\
# Expected failures of `python -m torch_tpu.opinfo` (op_db) and `--modules` (module_db).
# One line per failing (entry, phase):  <entry>  <forward|backward>  <status>  <detail>
# Module entries are prefixed "module:". Status is the reason class: not-implemented (detail
# names the missing aten op), mismatch, error, timeout. Regenerate the lines of the entries
# you ran with `python -m torch_tpu.opinfo [--modules] --update-expected`.
"""
FAILURES = ("mismatch", "error", "timeout", "not-implemented")


def key(report, entry):
    return ("module:" + entry) if report.get("kind") == "module_db" else entry


def load(path=PATH):
    """{(entry, phase): (status, detail)}."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 3)
            if len(parts) < 3 or parts[1] not in ("forward", "backward"):
                raise ValueError(f"[opinfo] {path}:{n}: expected '<entry> <forward|backward> <status> <detail>'; got {line!r}")
            out[(parts[0], parts[1])] = (parts[2], parts[3] if len(parts) > 3 else "")
    return out


def check(report, expected=None, phases=("forward", "backward")):
    """Problems (strings) of `report` against the list: stale entries and regressions."""
    expected = load() if expected is None else expected
    problems = []
    for entry, res in report["entries"].items():
        k = key(report, entry)
        for phase in phases:
            if phase not in res:
                continue
            st = res[phase]["status"]
            listed = (k, phase) in expected
            if st in FAILURES and not listed:
                problems.append(f"REGRESSION {k} {phase}: {st}: {res[phase].get('reason', '')}")
            elif st not in FAILURES and listed:
                problems.append(f"NOW {st.upper()} {k} {phase}: listed in expected_failures.txt; remove the line")
    return problems


def _detail(res):
    r = res.get("reason", "")
    m = res.get("missing")
    if res["status"] == "not-implemented" and m:
        return " ".join(m)
    return " ".join(r.split())[:160]


def update(report, path=PATH, phases=("forward", "backward")):
    """Rewrites the lines of the entries in `report`; other lines are kept. Returns the count."""
    expected = load(path)
    ran = {key(report, e) for e in report["entries"]}
    kept = {k: v for k, v in expected.items() if not (k[0] in ran and k[1] in phases)}
    for entry, res in report["entries"].items():
        for phase in phases:
            if phase in res and res[phase]["status"] in FAILURES:
                kept[(key(report, entry), phase)] = (res[phase]["status"], _detail(res[phase]))
    with open(path, "w") as f:
        f.write(HEADER)
        for (entry, phase), (st, detail) in sorted(kept.items()):
            f.write(f"{entry}  {phase}  {st}  {detail}".rstrip() + "\n")
    return len(kept)


def counts_by_reason(expected=None):
    expected = load() if expected is None else expected
    out = {}
    for (_, phase), (st, _) in expected.items():
        out[f"{phase} {st}"] = out.get(f"{phase} {st}", 0) + 1
    return dict(sorted(out.items()))
