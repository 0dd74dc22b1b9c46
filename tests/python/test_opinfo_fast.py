"""PyTorch's OpInfo database as the judge, CI subset: ~60 op_db entries and a few module_db
entries run on tpu against CPU (forward and float32 backward) and must agree with
torch_tpu/opinfo/expected_failures.txt. The full run is `make opinfo`."""
import torch_tpu.opinfo as opinfo


def _check(report):
    problems = opinfo.check_expected(report)
    assert not problems, "\n".join(problems)


def test_opinfo_fast_ops():
    report = opinfo.run_ops(fast=True, progress=False)
    assert report["summary"]["entries"] >= 60
    _check(report)


def test_opinfo_fast_modules():
    _check(opinfo.run_modules(fast=True, progress=False))
