"""Benchmarks: `python -m torch_tpu.bench NAME` (run inside the project environment).

Each benchmark is a module here with a `main(argv)`; it measures ours and PyTorch's on the
same machine in the same run and prints both and their ratio, and returns its headline figures
as a list of `_report.Row` (`all` collects them into one table and chart)."""

import time

# Between sides: OpenBLAS's pthread workers (PyTorch CPU's sgemm) busy-wait for ~2^28 cycles
# (OPENBLAS_THREAD_TIMEOUT, read when the library loads) after each call, so the side timed
# right after a CPU side shares its cores with a spinning thread for ~0.1-0.3 s: the tpu
# compiled step measured 33-35 ms right after CPU eager, 28 ms after a pause; a decode-shaped
# product right after a torch.mm ran at 124 GFLOP/s, 306 after a pause (2 cores).
SETTLE_S = 0.5


def settle():
    """Waits out PyTorch CPU's spinning BLAS threads before timing the next side."""
    time.sleep(SETTLE_S)
