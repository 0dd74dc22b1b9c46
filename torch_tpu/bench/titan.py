"""python -m torch_tpu.bench titan [--steps 8] [--seq 256] [--batch 4]

TorchTitan 0.3.0's llama3 debugmodel (6 layers, width 256, FlexAttention with the causal
document mask, selective activation checkpointing, AdamW: TorchTitan's defaults, except FSDP2 parameters in
float32 on both sides, since gloo, the CPU run's backend, has no bfloat16 all-gather) trained through TorchTitan's own entry point (`python -m torch_tpu.titan`) on tpu,
eager and with `--compile.enable`, vs the same trainer on PyTorch CPU with gloo at its best
thread count (1 and 2 threads measured; on some 2-vCPU machines PyTorch's OpenMP kernels are
5-7x slower with 2 threads than with 1); 1 and 2 ranks, in one run. Tokens/s per rank is
TorchTitan's own `tps`, the median of the steps after the first two (warm-up, compiles).
TorchTitan's MFU is not printed: it divides by an A100's peak (it knows no peak for a CPU or
for the host runtime), so it says nothing here; its achieved TFLOPS is in the table.
Needs `make titan`.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from torch_tpu import titan
from torch_tpu.bench._report import Row

_STEP = re.compile(r"step:\s*(\d+)\s+loss:\s*([0-9.]+).*?tps:\s*([0-9,]+)\s+tflops:\s*([0-9.]+)")


def _run(work, name, device, ranks, args, threads=None, extra=()):
    base = [*args, "--dump_folder", os.path.join(work, name), "--device", device, *extra]
    if ranks == 1:
        cmd = [sys.executable, "-m", "torch_tpu.titan", *base]
    else:
        cmd = [sys.executable, "-m", "torch_tpu.distributed.run", "--nproc-per-node", str(ranks), "--master-addr",
               "127.0.0.1", "--master-port", str(titan.free_port()), "-m", "torch_tpu.titan", *base]
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
        env["OPENBLAS_NUM_THREADS"] = str(threads)
    r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    text = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)
    if r.returncode != 0:
        raise RuntimeError(f"[bench titan] {name} failed:\n{text[-4000:]}")
    steps = {}
    for line in text.splitlines():
        m = _STEP.search(line)
        if m and not line.startswith("[rank1]"):
            steps.setdefault(int(m.group(1)), (float(m.group(3).replace(",", "")), float(m.group(4))))
    warm = [v for k, v in sorted(steps.items()) if k > 2] or list(steps.values())
    return statistics.median(v[0] for v in warm), statistics.median(v[1] for v in warm)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.bench titan")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--ranks", default="1,2")
    a = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench_titan_")
    titan.make_assets(work)
    rows = []
    print(f"TorchTitan llama3 debugmodel, seq {a.seq}, local batch {a.batch} (per rank), {a.steps} steps; "
          "tokens/s per rank (median after 2 warm-up steps), TFLOPS as TorchTitan counts them")
    print(f"{'ranks':>5} {'run':<28} {'tok/s':>9} {'TFLOPS':>8} {'vs CPU best':>12}")
    for ranks in [int(r) for r in a.ranks.split(",")]:
        args = ["--module", "llama3", "--config", "llama3_debugmodel", "--hf_assets_path",
                os.path.join(work, "tokenizer"), "--dataloader.dataset_path", os.path.join(work, "c4_mini"),
                "--training.seq_len", str(a.seq), "--training.local_batch_size", str(a.batch),
                "--training.steps", str(a.steps), "--validator.no-enable", "--checkpoint.no-enable",
                "--training.mixed_precision_param", "float32"]
        cpu = {t: _run(work, f"cpu{ranks}_{t}", "cpu", ranks, args, threads=t) for t in (1, 2)}
        best_t = max(cpu, key=lambda t: cpu[t][0])
        best = cpu[best_t][0]
        results = [(f"CPU, {t} thread{'s' if t > 1 else ''}", cpu[t]) for t in (1, 2)]
        results.append(("tpu eager (strict)", _run(work, f"tpu{ranks}", "tpu", ranks, args)))
        results.append(("tpu --compile.enable", _run(work, f"tpuc{ranks}", "tpu", ranks, args,
                                                      extra=["--compile.enable"])))
        for name, (tps, tfl) in results:
            print(f"{ranks:>5} {name:<28} {tps:>9.0f} {tfl:>8.3f} {tps / best:>11.2f}x")
        for name, (tps, _) in results[2:]:
            rows.append(Row("titan", f"{ranks} rank{'s' if ranks > 1 else ''}: {name}", tps, best, unit="tok/s",
                            higher_is_better=True, note=f"CPU best at {best_t} thread(s)"))
    return rows


if __name__ == "__main__":
    main()
