"""Runs fuzz calls in worker subprocesses so that an abort, a segfault or a hang is recorded
as one call's verdict (with its reproducer) and the run goes on from the next call.

Protocol: the worker (`python -m torch_tpu.fuzz --worker`) prints one JSON line when it
starts drawing call i ({"i", "phase": "draw"}), one when it starts running it ({"phase":
"run", "repro", ...}) and one with the verdict. The parent waits `draw_timeout` seconds for a
draw (sample generation on CPU can be slow) and `timeout` seconds for a run."""
import collections
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time

from torch_tpu.fuzz import known as known_mod


def worker_main(seed, start, stop, fused_fraction, sources):
    from torch_tpu.fuzz.worker import Fuzzer

    fz = Fuzzer(fused_fraction, sources)
    out = sys.stdout
    # Test hook: TORCH_TPU_FUZZ_FAULT="abort@3,hang@5" aborts / hangs inside those calls.
    faults = dict(reversed(f.split("@")) for f in os.environ.get("TORCH_TPU_FUZZ_FAULT", "").split(",") if f)
    for i in range(start, stop):
        print(json.dumps({"i": i, "phase": "draw"}), file=out, flush=True)
        call = fz.draw(seed, i)
        head = {"i": i, "phase": "run", "op": f"{call.source}:{call.name}", "dtype": str(call.dtype)[6:],
                "variant": call.variant, "mode": call.mode, "tags": call.tags, "repro": call.repro}
        print(json.dumps(head), file=out, flush=True)
        if faults.get(str(i)) == "abort":
            os.abort()
        if faults.get(str(i)) == "hang":
            time.sleep(3600)
        res = fz.run(call)
        res.update({"i": i, "phase": "done"})
        print(json.dumps(res), file=out, flush=True)


class _Lines:
    """Lines from a worker's stdout with a timeout per line. Reads the fd itself: a buffered
    readline() after select() could hold a second line in its buffer while select() waits."""

    def __init__(self, f):
        self.fd, self.buf, self.eof = f.fileno(), b"", False
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)

    def next(self, timeout):
        """The next line; "" at end of file; None after `timeout` seconds without one."""
        deadline = time.time() + timeout
        while b"\n" not in self.buf and not self.eof:
            left = deadline - time.time()
            if left <= 0 or not self.sel.select(timeout=left):
                return None
            chunk = os.read(self.fd, 1 << 16)
            self.eof = not chunk
            self.buf += chunk
        if b"\n" not in self.buf:
            return ""
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def close(self):
        self.sel.close()


def _spawn(seed, start, stop, args, errf):
    cmd = [sys.executable, "-m", "torch_tpu.fuzz", "--worker", "--seed", str(seed),
           "--start", str(start), "--stop", str(stop), "--fused-fraction", str(args.fused_fraction),
           "--sources", args.sources]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, start_new_session=True)


def _kill(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def _tail(errf, n=600):
    errf.flush()
    errf.seek(0)
    s = errf.read().decode(errors="replace")
    return " ".join(s[-n:].split())


def run(args, progress=True):
    """Runs calls [0, args.calls) of args.seed; returns the report dict."""
    t0 = time.time()
    results = {}
    heads = {}
    i, stop = args.start, args.start + args.calls
    while i < stop:
        bstop = min(stop, i + args.batch)
        with tempfile.TemporaryFile(dir=args.tmpdir) as errf:
            p = _spawn(args.seed, i, bstop, args, errf)
            lines = _Lines(p.stdout)
            phase, cur = "start", i
            while True:
                limit = args.timeout if phase == "run" else args.draw_timeout
                line = lines.next(limit)
                if line is None:  # silent past the limit
                    _kill(p)
                    if phase == "run":
                        results[cur] = {"verdict": "hang", "detail": f"no result after {limit:g} s"}
                    else:  # a draw that never ends is the fuzzer's problem, not tpu's
                        results[cur] = {"verdict": "skipped", "detail": f"draw over {limit:g} s"}
                    i = cur + 1
                    break
                if not line:  # the worker exited
                    rc = p.wait()
                    if rc != 0 and phase == "run":
                        sig = f"signal {-rc}" if rc < 0 else f"exit {rc}"
                        results[cur] = {"verdict": "crash", "detail": f"{sig}: {_tail(errf)}"}
                        i = cur + 1
                    elif rc != 0:
                        raise RuntimeError(f"[fuzz] worker failed outside a call (rc {rc}): {_tail(errf)}")
                    else:
                        i = bstop
                    break
                msg = json.loads(line)
                cur, phase = msg["i"], msg["phase"]
                if phase == "run":
                    heads[cur] = msg
                elif phase == "done":
                    results[cur] = msg
                    if progress:
                        _progress(len(results), args.calls, t0, results)
            lines.close()
    if progress:
        sys.stderr.write("\n")
    return _report(args, results, heads, time.time() - t0)


_last = [0.0]


def _progress(n, total, t0, results):
    if time.time() - _last[0] < 0.5 and n < total:
        return
    _last[0] = time.time()
    c = collections.Counter(r["verdict"] for r in results.values())
    bad = sum(v for k, v in c.items() if k not in ("ok", "both-raise", "not-implemented", "skipped"))
    sys.stderr.write(f"\r[fuzz {n}/{total} {time.time() - t0:5.0f}s] ok={c['ok']} both-raise={c['both-raise']} "
                     f"not-impl={c['not-implemented']} failures={bad}   ")
    sys.stderr.flush()


def _report(args, results, heads, wall):
    from torch_tpu.fuzz.worker import CATEGORIES

    known = known_mod.load(args.known) if args.known else []
    failures, counts, hit = [], collections.Counter(), set()
    for i in sorted(results):
        r, h = results[i], heads.get(i, {})
        counts[r["verdict"]] += 1
        if r["verdict"] in CATEGORIES:
            f = {"call": i, "category": r["verdict"], "op": h.get("op"), "dtype": h.get("dtype"),
                 "variant": h.get("variant"), "mode": h.get("mode"), "tags": h.get("tags", []),
                 "detail": r.get("detail", ""), "repro": h.get("repro", ""),
                 "rerun": f"python -m torch_tpu.fuzz --seed {args.seed} --call {i}"}
            line = known_mod.match(known, f)
            if line is not None:
                f["known"] = line.text
                hit.add(line.n)
            failures.append(f)
    unnamed = collections.Counter(heads.get(i, {}).get("op") for i, r in results.items()
                                  if r["verdict"] == "both-raise" and not r.get("names_op"))
    by_cat = {c: counts.get(c, 0) for c in CATEGORIES}
    return {
        "seed": args.seed, "calls": len(results), "wall_s": round(wall, 1),
        "verdicts": dict(sorted(counts.items())),
        "mismatches": sum(by_cat.values()), "by_category": by_cat,
        "unknown_failures": sum(1 for f in failures if "known" not in f),
        "both_raise_not_naming_op": sum(unnamed.values()),
        "not_naming_op_by_op": dict(unnamed.most_common(20)),
        "stale_known": [k.text for k in known if k.n not in hit],
        "failures": failures,
    }
