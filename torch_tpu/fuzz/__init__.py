"""Differential fuzzing of tpu against PyTorch CPU (`python -m torch_tpu.fuzz`).

Calls are drawn from PyTorch's OpInfo samples (op_db, minus random ops and the entries the
OpInfo runner already lists as failing) and from our op tables (the OpSpec rows of
tests/python/test_ops_*.py, from a checkout), then mutated (torch_tpu/fuzz/mutate.py): 0- and
1-size dims, non-contiguous / offset / expanded / overlapping views, mixed dtypes, Python
scalars, NaN/Inf/extremes, out-of-range indices and invalid arguments. Each call runs on CPU
and on tpu (strict mode, a fifth in fused mode); results must agree within the OpInfo
runner's tolerances (torch_tpu/opinfo/common.py, NaNs at the same places), or both must
raise. Inputs are compared after the call too (no stray writes).

Verdicts: ok, both-raise (the report counts tpu errors that do not name the op),
not-implemented (a missing lowering: the OpInfo runner's business), skipped, and the
failures: crash (the worker died: abort/segfault), hang (past --timeout), wrong-values,
wrong-shape, wrong-dtype, cpu-raises (CPU rejects the input and tpu returns something:
silent garbage in), tpu-raises. Calls run in worker subprocesses of --batch calls each; a
crash or hang ends that worker and the run continues at the next call.

Call i of seed s depends only on (s, i): every failure in the --json report carries a
one-line reproducer (op, dtype, variant, mode, mutation tags, each argument's dtype, shape,
strides and offset) and `python -m torch_tpu.fuzz --seed s --call i` to replay it.
Known failures: known_failures.txt (op + category + tags, with the cause); the list only
shrinks. CI: tests/python/test_fuzz.py (seed 0, 1,000 calls); long run: `make fuzz`.
"""
