"""Conformance against PyTorch's OpInfo database: `python -m torch_tpu.opinfo --help`.

Python API (used by tests/python/test_opinfo_fast.py):
    report = torch_tpu.opinfo.run_ops(fast=True)          # op_db entries -> report dict
    report = torch_tpu.opinfo.run_modules(fast=True)      # module_db entries
    problems = torch_tpu.opinfo.check_expected(report)    # [] when it matches the list
"""
import torch_tpu  # noqa: F401  (before torch.testing._internal.common_device_type)
from torch_tpu.opinfo import expected, modules, ops
from torch_tpu.opinfo.expected import check as check_expected
from torch_tpu.opinfo.modules import run as run_modules
from torch_tpu.opinfo.ops import JUDGED_DTYPES, run as run_ops

__all__ = ["run_ops", "run_modules", "check_expected", "JUDGED_DTYPES", "expected", "modules", "ops"]
