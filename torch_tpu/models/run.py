"""The run over families: progress line, report dict (JSON-able), summary table and the
ranking of failure causes by families blocked."""
import re
import time

import torch

import torch_tpu
from torch_tpu import _C
from torch_tpu.models import registry
from torch_tpu.models.runner import FAILURES, MODES, run_family
from torch_tpu.opinfo.common import Progress


def run(names=None, fast=False, modes=MODES, limit_s=300.0, progress=True, json_path=None):
    """Runs the families (names, the CI subset, or all) in `modes`; returns the report.
    json_path: the report so far is written there after each family (a long run can be
    read, or checked with --from-json, while it goes on)."""
    fams = registry.select(names, fast)
    report = {"kind": "models", "runtime": torch_tpu.get_runtime(), "modes": list(modes),
              "transformers": _transformers_version(), "families": {}}
    import transformers

    prev_verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # generate's notes on tiny configs
    prev_fb = _C._set_cpu_fallback(False)
    prev_prec = torch_tpu.get_matmul_precision()
    torch_tpu.set_matmul_precision("highest")
    bar = Progress(len(fams), progress, "models")
    t0 = time.time()
    try:
        for i, fam in enumerate(fams):
            bar.update(i, fam.name)
            res = run_family(fam, modes, limit_s)
            report["families"][fam.name] = res
            bar.update(i + 1, fam.name, _verdict(res))
            if json_path:
                _write(report, json_path, time.time() - t0)
    finally:
        bar.done()
        _C._set_cpu_fallback(prev_fb)
        torch_tpu.set_matmul_precision(prev_prec)
        transformers.logging.set_verbosity(prev_verbosity)
    if json_path:
        _write(report, json_path, time.time() - t0)
    report["elapsed_s"] = round(time.time() - t0, 1)
    report["summary"] = summary(report)
    return report


def _write(report, path, elapsed):
    import json

    report["elapsed_s"] = round(elapsed, 1)
    report["summary"] = summary(report)
    with open(path, "w") as f:
        json.dump(report, f, indent=1)


def _transformers_version():
    import transformers

    return transformers.__version__


def _verdict(res):
    if res.get("status") == "cpu-error":
        return "cpu-error"
    sts = [r["status"] for ph in res["modes"].values() for r in ph.values()]
    return "pass" if all(s == "pass" for s in sts) else "fail"


def cause(r):
    """A short cause key for ranking: the missing op, or the reason without numbers."""
    if r.get("missing"):
        return r["missing"][0]
    reason = r.get("reason", "")
    if "tied weights untied" in reason:
        return "tied weights untied by .to('tpu')"
    if r["status"] == "mismatch":
        what = reason.split(":")[0]
        what = re.sub(r"grad of .*", "grad", what)
        return f"mismatch: {what}"
    return f"{r['status']}: " + re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", reason)[:120]


def summary(report):
    fams = report["families"]
    by_mode = {}
    causes = {}
    for name, res in fams.items():
        if res.get("status") == "cpu-error":
            continue
        for mode, phases in res["modes"].items():
            m = by_mode.setdefault(mode, {"families": 0, "families_pass": 0, "phases": {}})
            m["families"] += 1
            m["families_pass"] += int(all(r["status"] == "pass" for r in phases.values()))
            for phase, r in phases.items():
                c = m["phases"].setdefault(phase, {"pass": 0, "fail": 0})
                c["pass" if r["status"] == "pass" else "fail"] += 1
                if r["status"] in FAILURES:
                    e = causes.setdefault(cause(r), {"families": set(), "phases": 0, "example": ""})
                    e["families"].add(name)
                    e["phases"] += 1
                    e["example"] = e["example"] or f"{name} {mode} {phase}: {r.get('reason', '')[:160]}"
    by_kind = {}
    for name, res in fams.items():
        k = by_kind.setdefault(res["kind"], {"families": 0, "cpu_error": 0})
        k["families"] += 1
        if res.get("status") == "cpu-error":
            k["cpu_error"] += 1
            continue
        for mode, phases in res["modes"].items():
            k[mode] = k.get(mode, 0) + int(all(r["status"] == "pass" for r in phases.values()))
    ranked = sorted(causes.items(), key=lambda kv: (-len(kv[1]["families"]), -kv[1]["phases"]))
    return {
        "families": len(fams),
        "cpu_errors": sorted(n for n, r in fams.items() if r.get("status") == "cpu-error"),
        "by_mode": by_mode, "by_kind": by_kind,
        "causes": [{"cause": c, "families": len(v["families"]), "phases": v["phases"],
                    "which": sorted(v["families"]), "example": v["example"]} for c, v in ranked],
    }


def summary_lines(report):
    """The summary table: families passing every phase, per kind and mode; then per mode and
    phase; then the failure causes ranked by families blocked."""
    s, modes = report["summary"], report["modes"]
    lines = [f"{'kind':<16}{'families':>9}" + "".join(f"{m:>10}" for m in modes)]
    for kind, k in sorted(s["by_kind"].items()):
        lines.append(f"{kind:<16}{k['families']:>9}" + "".join(f"{k.get(m, 0):>10}" for m in modes))
    tot = s["families"]
    lines.append(f"{'all':<16}{tot:>9}" + "".join(f"{s['by_mode'].get(m, {}).get('families_pass', 0):>10}" for m in modes))
    for m in modes:
        ph = s["by_mode"].get(m, {}).get("phases", {})
        parts = ", ".join(f"{p} {c['pass']}/{c['pass'] + c['fail']}" for p, c in ph.items())
        lines.append(f"[{report['runtime']}:{m}] {parts}")
    if s["cpu_errors"]:
        lines.append(f"cpu-error (config does not run on CPU): {', '.join(s['cpu_errors'])}")
    for c in s["causes"]:
        lines.append(f"  {c['families']:>3} families, {c['phases']:>3} phases: {c['cause']}  [{', '.join(c['which'][:8])}"
                     f"{', ...' if len(c['which']) > 8 else ''}]")
    lines.append(f"models: {', '.join(f'{m} {s['by_mode'].get(m, {}).get('families_pass', 0)}' for m in modes)} "
                 f"families pass every phase, of {tot} families ({report['runtime']} runtime, {report['elapsed_s']} s)")
    return lines
