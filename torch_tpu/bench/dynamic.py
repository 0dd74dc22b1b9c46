"""python -m torch_tpu.bench dynamic [--lengths 17:117] [--batch B] [--width W] [--layers L]
                                    [--optim adamw|sgd] [--by-op] [--rounds R]

Variable sequence lengths: the demo GPT (examples/gpt.py, a small config) trains one step per
length over `--lengths` (default the 100 lengths 17..116) with a plain optimizer (AdamW by
default: PyTorch picks its foreach implementation, run eagerly outside the graph), compiled
(`torch.compile(backend="tpu", dynamic=True)`) and in fused eager (DEFER_AND_FUSE), and a
second pass over the same lengths times the steps once everything is compiled. Printed per
mode: compile-cache misses (`torch.tpu._get_cache_stats()`: every miss is a new program, one
XLA compile on a TPU), torch.compile captures, the first pass's time and the warm step time,
next to the same loop at one fixed length (the cost a bucketed program would approach). The
warm time is the best of `--rounds` passes (default 3).

`--by-op` lists the programs each varied pass compiled, grouped by what compiled them (the op,
"fused_window", "torch.compile") with the parameter shapes of each. The last line is the warm
step time of bucketed over per-size compile (both varied, both after every program exists).

Issue 19 (bounded dynamism) is the goal this measures: at most 8 buckets, <= 24 misses over
the 100 lengths. Mode "bucketed" is "compile" with TORCH_TPU_BUCKETS=pow2 (the sequence dim
padded to a power of two, masked); "fused-bucketed" is "fused" with each CPU batch marked by
`torch_tpu.mark_dynamic(x, 1)` before its upload (eager padding and masking); "compile" and
"fused" are per-size.
"""
import argparse
import copy
import os
import time

import torch

import torch_tpu
from torch_tpu._internal import compile as tpu_compile
from torch_tpu.bench.gpt import _load_example


def _misses():
    s = torch.tpu._get_cache_stats()
    return s["num_cache_reqs"] - s["num_cache_hits"]


def _new_programs(before: set) -> list[dict]:
    return sorted((e for e in torch.tpu._get_cache_stats()["per_entry_stats"] if e["key"] not in before),
                  key=lambda e: e["miss_index"])


def _by_op(programs: list[dict], first: int) -> str:
    """One line per compiling op: count (in the first step), then its distinct parameter lists."""
    groups: dict[str, list[dict]] = {}
    for e in programs:
        groups.setdefault(e["name"] or "?", []).append(e)
    lines = []
    for name, es in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        n_first = sum(1 for e in es if e["miss_index"] <= first)
        sigs = ", ".join(f"({e['signature']})" for e in es[:4]) + (" ..." if len(es) > 4 else "")
        lines.append(f"    {len(es):4d} ({n_first} in step 1) {name}: {sigs}")
    return "\n".join(lines)


def _run(gpt, model, lengths, data, batch, mode, optim="adamw", by_op=False, rounds=3):
    """(misses, captures, first-pass seconds, warm seconds per step) of one step per length."""
    m = copy.deepcopy(model).to("tpu")
    if optim == "adamw":
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(1)
    if mode == "fused-bucketed":  # the CPU batch marked, padded on the host, uploaded
        batches = {t: [torch_tpu.mark_dynamic(x, 1).to("tpu") for x in gpt.get_batch(data, batch, t, gen)]
                   for t in lengths}
    else:
        batches = {t: [x.to("tpu") for x in gpt.get_batch(data, batch, t, gen)] for t in lengths}
    if mode in ("compile", "bucketed"):
        torch._dynamo.reset()
        fwd = torch.compile(m, backend="tpu", dynamic=True)
        eager = torch_tpu.EagerMode.DEFER_NEVER
    else:
        fwd = m
        eager = torch_tpu.EagerMode.DEFER_AND_FUSE

    def step(t):
        x, y = batches[t]
        _, loss = fwd(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    with torch_tpu.eager_mode(eager):
        torch.tpu.synchronize()
        m0, c0 = _misses(), tpu_compile.stats()["captures"]
        keys0 = {e["key"] for e in torch.tpu._get_cache_stats()["per_entry_stats"]}
        t0 = time.perf_counter()
        first_step_misses = None
        for t in lengths:
            step(t)
            if first_step_misses is None:
                first_step_misses = _misses()
        torch.tpu.synchronize()
        first = time.perf_counter() - t0
        misses, captures = _misses() - m0, tpu_compile.stats()["captures"] - c0
        if by_op:
            print(f"  {mode} {len(set(lengths))} lengths: programs compiled by the first pass "
                  f"({first_step_misses - m0} in its first step)")
            print(_by_op(_new_programs(keys0), first_step_misses))
        warm = float("inf")
        for _ in range(rounds):  # the best pass counts: discounts other processes on the machine
            t0 = time.perf_counter()
            for t in lengths:
                loss = step(t)
            loss.item()
            warm = min(warm, (time.perf_counter() - t0) / len(lengths))
    return misses, captures, first, warm


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench dynamic")
    ap.add_argument("--lengths", default="17:117", help="start:stop (Python range) of sequence lengths")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--modes", default="bucketed,compile,fused-bucketed,fused")
    ap.add_argument("--optim", default="adamw", choices=("adamw", "sgd"))
    ap.add_argument("--by-op", action="store_true", help="list the programs compiled, by op")
    ap.add_argument("--rounds", type=int, default=3, help="warm passes (the best counts)")
    a = ap.parse_args(argv)
    lo, hi = (int(v) for v in a.lengths.split(":"))
    lengths = list(range(lo, hi))
    gpt = _load_example()
    chars, data = gpt.load_data()
    torch.manual_seed(0)
    cfg = gpt.Config(vocab=len(chars.chars), ctx=max(128, hi), width=a.width, layers=a.layers)
    model = gpt.GPT(cfg)
    fixed = [lengths[len(lengths) // 2]] * len(lengths)
    print(f"GPT width {a.width}, {a.layers} layers, batch {a.batch}: one {a.optim} step per length, "
          f"{len(lengths)} lengths {lo}..{hi - 1}; fixed = {len(fixed)} steps at length {fixed[0]}")
    print(f"{'mode':<14} {'lengths':<8} {'misses':>7} {'captures':>9} {'first pass s':>13} {'warm ms/step':>13}")
    warm_ms = {}
    for mode in a.modes.split(","):
        for label, ls in (("varied", lengths), ("fixed", fixed)):
            saved = os.environ.get("TORCH_TPU_BUCKETS")
            os.environ["TORCH_TPU_BUCKETS"] = "pow2" if mode.endswith("bucketed") else "off"
            try:
                misses, captures, first, warm = _run(gpt, model, ls, data, a.batch, mode, a.optim,
                                                     a.by_op and label == "varied", a.rounds)
            finally:
                if mode == "fused-bucketed":  # the length mode off for the other modes' timings
                    from torch_tpu._internal import dynamic_eager

                    dynamic_eager.uninstall()
                if saved is None:
                    os.environ.pop("TORCH_TPU_BUCKETS")
                else:
                    os.environ["TORCH_TPU_BUCKETS"] = saved
            cap = str(captures) if not mode.startswith("fused") else "-"
            print(f"{mode:<14} {label:<8} {misses:7d} {cap:>9} {first:13.2f} {warm * 1e3:13.2f}")
            warm_ms[mode, label] = warm * 1e3
    for b, p in (("bucketed", "compile"), ("fused-bucketed", "fused")):
        if (b, "varied") in warm_ms and (p, "varied") in warm_ms:
            print(f"warm step, {b} / per-size {p} (varied lengths): "
                  f"{warm_ms[b, 'varied'] / warm_ms[p, 'varied']:.2f}x")
    print("goal (issue 19): <= 24 misses over 100 lengths in compile (bucketed) and fused eager (fused-bucketed)")
    return 0
