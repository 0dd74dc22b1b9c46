"""Model coverage: Hugging Face transformers families (tiny configs, built on CPU) run on tpu
against CPU, forward, backward and greedy generate, in strict, fused and compile modes:
`python -m torch_tpu.models --help`, README.md next to this file.

Python API (used by tests/python/test_models_fast.py):
    report = torch_tpu.models.run(fast=True)               # -> report dict
    problems = torch_tpu.models.check_expected(report)     # [] when it matches the list
"""
import torch_tpu  # noqa: F401
from torch_tpu.models import expected, registry
from torch_tpu.models.expected import check as check_expected
from torch_tpu.models.registry import ANNOUNCED, FAMILIES, FAST
from torch_tpu.models.run import run, summary_lines

__all__ = ["run", "check_expected", "summary_lines", "FAMILIES", "FAST", "ANNOUNCED", "expected", "registry"]
