"""Benchmarks: `python -m torch_tpu.bench NAME` (run inside the project environment).

Each benchmark is a module here with a `main(argv)`; it measures ours and PyTorch's on the
same machine in the same run and prints both and their ratio, and returns its headline figures
as a list of `_report.Row` (`all` collects them into one table and chart)."""
