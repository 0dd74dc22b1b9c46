"""python -m torch_tpu.bench NAME [args...] [--no-progress]

`python -m torch_tpu.bench all [--quick] [--out DIR]` runs the benchmarks that compare with
PyTorch CPU and writes one table and bar chart (torch_tpu/bench/all.py).

PyTorch CPU runs with OMP_WAIT_POLICY=PASSIVE unless the caller set a policy: this Debian
torch pairs OpenMP (elementwise ops) with OpenBLAS's own pthreads (GEMM), and on a 2-core
machine the OpenMP helper's default spin-wait starves OpenBLAS's threads: the GPT train step
in CPU eager took 275 ms by default, 52 ms passive (session 15). The benchmark re-executes
itself with the variable set (libgomp reads it once, at load) so the baseline is PyTorch at
its best on this machine; our side runs under the same setting.

Long benchmarks draw a tqdm bar on stderr when it is a terminal; --no-progress (or
TORCH_TPU_PROGRESS=0) turns it off."""
import importlib
import os
import pkgutil
import sys

import torch_tpu.bench as _pkg


def _names():
    return sorted(m.name for m in pkgutil.iter_modules(_pkg.__path__) if not m.name.startswith("_"))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "OMP_WAIT_POLICY" not in os.environ and argv and argv[0] not in ("-h", "--help"):
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        os.execve(sys.executable, [sys.executable, "-m", "torch_tpu.bench", *argv], env)
    if "--no-progress" in argv:
        argv.remove("--no-progress")
        os.environ["TORCH_TPU_PROGRESS"] = "0"
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m torch_tpu.bench NAME [args] [--no-progress]\nbenchmarks: " + ", ".join(_names()))
        return 0
    name = argv.pop(0)
    if name not in _names():
        print(f"[bench] unknown benchmark {name!r}; expected one of: {', '.join(_names())}", file=sys.stderr)
        return 2
    rc = importlib.import_module(f"torch_tpu.bench.{name}").main(argv)
    return rc if isinstance(rc, int) else 0  # a benchmark returns its rows (torch_tpu.bench._report.Row)


if __name__ == "__main__":
    sys.exit(main())
