"""torchao 0.18.0 (its pure-Python wheel, `make torchao`) on tpu: `quantize_` of Linear layers
with int8 weight-only and int8 dynamic-activation + int8 weight, eager (strict, fused) and under
torch.compile(backend="tpu"), with the outputs of the same quantized model on CPU; a QAT
(fake-quantized) training step with CPU's losses. float8 weights: the tpu has no float8 dtype
yet, and says so naming the op. Matmuls at HIGHEST. Skipped without the site."""
import copy
import warnings

import pytest
import torch

import torch_tpu
from torch_tpu._internal import sites

try:
    sites.add("torchao", "torchao")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torchao  # noqa: F401
        from torchao.quantization import (
            Float8WeightOnlyConfig,
            Int8DynamicActivationInt8WeightConfig,
            Int8DynamicActivationIntxWeightConfig,
            Int8WeightOnlyConfig,
            quantize_,
        )
        from torchao.quantization.qat import QATConfig
except ImportError as e:  # noqa: F841
    pytest.skip(f"torchao not installed: {e}", allow_module_level=True)

CONFIGS = {"int8_weight_only": Int8WeightOnlyConfig, "int8_dynamic": Int8DynamicActivationInt8WeightConfig}


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))


@pytest.mark.parametrize("mode", ["strict", "fused", "compile"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_quantized_linear_matches_cpu(name, mode):
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(1))
    ref = copy.deepcopy(_model())
    quantize_(ref, CONFIGS[name]())
    with torch.no_grad():
        want = ref(x)
    m = _model().to("tpu")
    quantize_(m, CONFIGS[name]())
    assert "Int8" in type(m[0].weight).__name__  # quantized on tpu, not left float
    eager = torch_tpu.EagerMode.DEFER_AND_FUSE if mode == "fused" else torch_tpu.EagerMode.DEFER_NEVER
    fn = torch.compile(m, backend="tpu") if mode == "compile" else m
    with torch.no_grad(), torch_tpu.eager_mode(eager), torch_tpu.precision("highest"):
        got = fn(x.to("tpu")).cpu()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_qat_fake_quant_training_matches_cpu():
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(2))
    losses = {}
    for dev in ("cpu", "tpu"):
        m = _model().to(dev)
        quantize_(m, QATConfig(Int8DynamicActivationIntxWeightConfig(), step="prepare"))
        assert type(m[0]).__name__ == "FakeQuantizedLinear"
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        out = []
        with torch_tpu.precision("highest"):
            for _ in range(3):
                loss = m(x.to(dev)).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                out.append(loss.item())
        losses[dev] = out
    torch.testing.assert_close(losses["tpu"], losses["cpu"], rtol=1e-5, atol=1e-6)


def test_float8_weights_say_what_tpu_lacks():
    m = _model().to("tpu")
    with pytest.raises(NotImplementedError, match=r"\[aten::.*\].*Float8_e4m3fn"):
        quantize_(m, Float8WeightOnlyConfig())
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]
