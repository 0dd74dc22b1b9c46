"""Bad input (issue 18): each case raises on PyTorch CPU, and on tpu raises the same exception
type as a Python exception naming the op (never an abort, never a value), in the strict and
fused modes; the device keeps computing correct values after. Complements test_errors.py
(shapes, mixed devices) and test_error_types.py (index and division errors)."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu import EagerMode


def _idx(*v):
    return torch.tensor(v)


# name, fn(d) where d moves a CPU tensor to the device under test, a regex the tpu error matches
CASES = [
    # dtype mismatches in matmuls (CPU: "expected ... same dtype")
    ("mm_f32_f64", lambda d: torch.mm(d(torch.ones(2, 3)), d(torch.ones(3, 2, dtype=torch.float64))),
     r"\[aten::mm\].*same dtype; got Float and Double"),
    ("mm_f32_i64", lambda d: torch.mm(d(torch.ones(2, 3)), d(torch.ones(3, 2, dtype=torch.long))),
     r"\[aten::mm\].*same dtype"),
    ("matmul_f32_bf16", lambda d: d(torch.ones(2, 3)) @ d(torch.ones(3, 2, dtype=torch.bfloat16)),
     r"\[aten::mm\].*same dtype"),
    ("bmm_f32_f16", lambda d: torch.bmm(d(torch.ones(2, 2, 3)), d(torch.ones(2, 3, 2, dtype=torch.float16))),
     r"\[aten::bmm\].*same dtype"),
    ("linear_f32_bf16", lambda d: F.linear(d(torch.ones(2, 3)), d(torch.ones(4, 3, dtype=torch.bfloat16))),
     r"same dtype"),
    ("addmm_f32_f64", lambda d: torch.addmm(d(torch.ones(2)), d(torch.ones(2, 3)), d(torch.ones(3, 2, dtype=torch.double))),
     r"\[aten::addmm\].*same dtype"),
    # shape mismatches in binary ops
    ("mul_shape", lambda d: d(torch.ones(2, 3)) * d(torch.ones(3, 2)), r"\[aten::mul.Tensor\].*broadcast; got \[2, 3\] and \[3, 2\]"),
    ("sub_shape", lambda d: d(torch.ones(4)) - d(torch.ones(5)), r"\[aten::sub.Tensor\].*broadcast"),
    ("div_shape", lambda d: d(torch.ones(2, 3)) / d(torch.ones(2, 4)), r"\[aten::div.Tensor\].*broadcast"),
    ("maximum_shape", lambda d: torch.maximum(d(torch.ones(3)), d(torch.ones(2))), r"broadcast|size"),
    ("pow_shape", lambda d: d(torch.ones(3)) ** d(torch.ones(2)), r"broadcast|size"),
    ("cat_shape", lambda d: torch.cat([d(torch.ones(2, 3)), d(torch.ones(2, 4))]), r"\[aten::cat\].*Sizes"),
    ("add_int_out", lambda d: d(torch.ones(3, dtype=torch.long)).add_(d(torch.ones(3))), r"can't be cast"),
    # index dtype / condition dtype
    ("gather_float_index", lambda d: d(torch.ones(3)).gather(0, d(torch.ones(2))), r"\[aten::gather\].*int64"),
    ("where_float_cond", lambda d: torch.where(d(torch.ones(3)), d(torch.ones(3)), d(torch.ones(3))), r"bool"),
    ("conv_channels", lambda d: F.conv2d(d(torch.ones(1, 3, 5, 5)), d(torch.ones(4, 2, 3, 3))), r"channels"),
    # index out of range, device-side checked (raised at the sync point)
    ("embedding_neg", lambda d: F.embedding(d(_idx(-1)), d(torch.ones(3, 2))), r"\[aten::index_select\] index out of range"),
    ("embedding_big", lambda d: F.embedding(d(_idx(0, 3)), d(torch.ones(3, 2))), r"\[aten::index_select\] index out of range"),
    ("scatter_add_oob", lambda d: d(torch.ones(3)).scatter_add_(0, d(_idx(3)), d(torch.ones(1))),
     r"\[aten::scatter_add_\] index out of bounds"),
    ("scatter_neg", lambda d: d(torch.ones(3)).scatter_(0, d(_idx(-1)), 2.0), r"\[aten::scatter_?.*out of bounds"),
    ("index_add_oob", lambda d: d(torch.ones(3)).index_add_(0, d(_idx(3)), d(torch.ones(1))),
     r"\[aten::index_add_\] index out of bounds"),
    ("index_copy_oob", lambda d: d(torch.ones(3)).index_copy_(0, d(_idx(3)), d(torch.ones(1))), r"out of bounds"),
    ("index_fill_oob", lambda d: d(torch.ones(3)).index_fill_(0, d(_idx(5)), 1.0), r"out of bounds|out of range"),
    ("gather_2d_oob", lambda d: d(torch.ones(2, 3)).gather(1, d(_idx([0, 3]).view(1, 2))), r"\[aten::gather\].*out of bounds"),
    ("index_select_2d", lambda d: d(torch.ones(2, 3)).index_select(1, d(_idx(0, 3))), r"\[aten::index_select\] index out of range"),
    ("cross_entropy_oob", lambda d: F.cross_entropy(d(torch.ones(2, 3)), d(_idx(0, 3))), r"out of bounds"),
]


# CPU raises RuntimeError for index_select along dim 1 of a 2-D tensor, IndexError along dim 0
# (two kernels); tpu raises IndexError for both.
CPU_INCONSISTENT = {"index_select_2d"}


def _healthy():
    x = torch.arange(6.0)
    assert torch.equal((x.to("tpu") * 2 + 1).cpu(), x * 2 + 1)
    torch.tpu.synchronize()


@pytest.mark.parametrize("mode", [EagerMode.DEFER_NEVER, EagerMode.DEFER_AND_FUSE], ids=["strict", "fused"])
@pytest.mark.parametrize("name,fn,match", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_like_cpu(name, fn, match, mode):
    with pytest.raises(Exception) as cpu:
        fn(lambda t: t)
    with torch_tpu.eager_mode(mode):
        with pytest.raises(Exception, match=match) as dev:
            fn(lambda t: t.to("tpu")).cpu()
            torch.tpu.synchronize()
        want = (type(cpu.value), IndexError) if name in CPU_INCONSISTENT else type(cpu.value)
        assert isinstance(dev.value, want), (type(dev.value), type(cpu.value), str(dev.value))
        _healthy()


@pytest.mark.parametrize("make", [
    lambda: torch.empty(2, device="tpu:1"),
    lambda: torch.ones(2).to("tpu:1"),
    lambda: torch.randn(2, device="tpu:3"),
    lambda: torch.nn.Linear(2, 2).to("tpu:1"),
    lambda: torch.tpu.set_device(1),
    lambda: torch.tpu.memory_allocated(1),
], ids=["empty", "to", "randn", "module", "set_device", "memory_allocated"])
def test_device_index_past_the_count(make):
    n = torch.tpu.device_count()
    if n != 1:
        pytest.skip("needs TORCH_TPU_NUM_DEVICES=1")
    with pytest.raises(RuntimeError, match=r"invalid device index; got tpu:\d, expected tpu:0 \(1 tpu device;"):
        make()
    assert torch.tpu.current_device() == 0
    _healthy()


def test_device_index_with_two_devices():
    code = ("import torch, torch_tpu\n"
            "assert torch.ones(2, device='tpu:1').sum().item() == 2\n"
            "try:\n"
            "    torch.ones(2, device='tpu:2')\n"
            "except RuntimeError as e:\n"
            "    print(str(e).splitlines()[0])\n")
    env = dict(os.environ, TORCH_TPU_NUM_DEVICES="2")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "got tpu:2, expected tpu:0..tpu:1 (2 tpu devices;" in r.stdout, r.stdout
