"""The host thread pool (docs/decisions/host-thread-pool.md): with it turned off
(TORCH_TPU_POOL=0, OpenMP teams) and on, large fused loops and split GEMMs give PyTorch CPU's
numbers; run in fresh processes because the setting is read once."""
import os
import subprocess
import sys

import pytest

_CHILD = r"""
import torch, torch_tpu
torch.manual_seed(0)
torch_tpu.set_matmul_precision("highest")
a, b = torch.randn(4, 256, 512), torch.randn(4, 512, 256)
x = torch.randn(1024, 512)
got_mm = (a.to("tpu") @ b.to("tpu")).cpu()
got_ew = torch.nn.functional.gelu(x.to("tpu") * 2 + 1).softmax(-1).cpu()
torch.testing.assert_close(got_mm, a @ b, rtol=1e-4, atol=1e-3)
torch.testing.assert_close(got_ew, torch.nn.functional.gelu(x * 2 + 1).softmax(-1), rtol=1e-5, atol=1e-6)
w = torch.randn(512, 512, requires_grad=True)
wt = w.detach().to("tpu").requires_grad_()
(x.to("tpu") @ wt).tanh().sum().backward()
(x @ w).tanh().sum().backward()
torch.testing.assert_close(wt.grad.cpu(), w.grad, rtol=1e-4, atol=1e-3)
print("ok")
"""


@pytest.mark.parametrize("pool", ["0", "1"])
def test_large_loops_and_gemms_match_cpu_with_and_without_the_pool(pool):
    env = dict(os.environ, TORCH_TPU_POOL=pool)
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")
