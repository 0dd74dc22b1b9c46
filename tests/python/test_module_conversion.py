"""nn.Module conversion to and from tpu keeps Parameter identity and weight tying exactly as
CUDA does (`.to`, `.tpu()`, `.cpu()`, `to_empty`, `load_state_dict`), so tied embeddings
train as one tensor and an optimizer built before `.to("tpu")` still owns the parameters.
Also the module-level ops users hit through Hugging Face models: weight norm's backward,
histc on integer expert ids."""
import copy

import pytest
import torch

import torch_tpu

HIGHEST = torch_tpu.Precision.HIGHEST


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 6)
        self.mid = torch.nn.Linear(6, 6)
        self.head = torch.nn.Linear(6, 11, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, ids):
        return self.head(torch.tanh(self.mid(self.emb(ids))) * self.scale)


def _params(m):
    return {n: p for n, p in m.named_parameters(remove_duplicate=False)}


@pytest.mark.parametrize("how", ["to", "tpu", "to_kw"])
def test_to_tpu_keeps_parameter_identity_and_tying(how):
    torch.manual_seed(0)
    m = Tied()
    before = _params(m)
    moved = {"to": lambda: m.to("tpu"), "tpu": lambda: m.tpu(), "to_kw": lambda: m.to(device="tpu")}[how]()
    assert moved is m
    after = _params(m)
    for n in before:
        assert after[n] is before[n], n
        assert after[n].device.type == "tpu"
        assert isinstance(after[n], torch.nn.Parameter)
    assert m.head.weight is m.emb.weight
    assert len(list(m.parameters())) == 3  # emb (= head), mid.weight, mid.bias
    assert m.scale.device.type == "tpu"
    m.cpu()
    assert _params(m)["emb.weight"] is before["emb.weight"] and m.emb.weight.device.type == "cpu"
    assert m.head.weight is m.emb.weight


def test_grad_moves_with_parameter():
    m = torch.nn.Linear(3, 2)
    m(torch.randn(4, 3)).sum().backward()
    g = m.weight.grad.clone()
    p = m.weight
    m.to("tpu")
    assert m.weight is p and m.weight.grad.device.type == "tpu"
    torch.testing.assert_close(m.weight.grad.cpu(), g)


def test_tied_model_trains_like_cpu_with_optimizer_built_before_to():
    torch.manual_seed(0)
    ref = Tied()
    dev = copy.deepcopy(ref)
    ids = torch.randint(0, 11, (4, 5))
    tgt = torch.randint(0, 11, (4, 5))
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=0.05)
    opt_dev = torch.optim.AdamW(dev.parameters(), lr=0.05)  # built while dev is still on CPU
    dev.to("tpu")
    ids_d, tgt_d = ids.to("tpu"), tgt.to("tpu")
    with torch_tpu.precision(HIGHEST):
        for _ in range(3):
            for m, opt, i, t in ((ref, opt_ref, ids, tgt), (dev, opt_dev, ids_d, tgt_d)):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(m(i).flatten(0, 1), t.flatten()).backward()
                opt.step()
    assert dev.head.weight is dev.emb.weight
    for n, p in ref.named_parameters():
        torch.testing.assert_close(dict(dev.named_parameters())[n].cpu(), p, rtol=1e-4, atol=1e-5)


def test_to_empty_keeps_identity_and_tying():
    # From CPU, as CUDA does (from meta, CUDA and tpu both make new Parameters: c10 has no
    # shallow copy between meta and a device, which is why transformers re-ties after loading).
    m = Tied()
    p = m.emb.weight
    m.to_empty(device="tpu")
    assert m.emb.weight is p and m.head.weight is m.emb.weight and p.device.type == "tpu"


def test_load_state_dict_into_tpu_module():
    torch.manual_seed(0)
    src = Tied()
    m = Tied().to("tpu")
    p = m.emb.weight
    m.load_state_dict(src.state_dict())
    assert m.emb.weight is p and m.head.weight is m.emb.weight and p.device.type == "tpu"
    torch.testing.assert_close(m.emb.weight.cpu(), src.emb.weight)
    # assign=True takes the state dict's tensors (as on CPU and CUDA): tpu ones stay on tpu
    sd = {k: v.to("tpu") for k, v in src.state_dict().items()}
    m2 = Tied()
    m2.load_state_dict(sd, assign=True)
    assert m2.emb.weight.device.type == "tpu" and isinstance(m2.emb.weight, torch.nn.Parameter)
    torch.testing.assert_close(m2.mid.weight.cpu(), src.mid.weight)


def test_set_data_between_cpu_and_tpu():
    p = torch.nn.Parameter(torch.randn(3))
    p.data = torch.ones(3, device="tpu")
    assert p.device.type == "tpu" and p.requires_grad
    p.data = torch.zeros(3)
    assert p.device.type == "cpu"
    assert torch._has_compatible_shallow_copy_type(torch.ones(1, device="tpu"), torch.ones(1))
    assert torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device="tpu"))


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_backward_matches_cpu(dim):
    torch.manual_seed(0)
    ref = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(3, 4, 3), dim=dim)
    dev = copy.deepcopy(ref).to("tpu")
    x = torch.randn(2, 3, 7)
    with torch_tpu.precision(HIGHEST):
        ref(x).square().sum().backward()
        dev(x.to("tpu")).square().sum().backward()
    for (n, p), (_, q) in zip(ref.named_parameters(), dev.named_parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-5, atol=1e-5, msg=n)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_histc_integer_input_like_cuda(dtype):
    # CPU has no integer histc; CUDA's rule: integer bins (x - min) * bins / (max - min), the top
    # value in the last bin, out-of-range values dropped, counts in the input dtype.
    x = torch.tensor([0, 1, 1, 3, 5, 2, 7, 7, 4], dtype=dtype)
    out = torch.histc(x.to("tpu"), bins=4, min=0, max=3)
    assert out.dtype == dtype
    assert out.cpu().tolist() == [1, 2, 1, 1]
    out = torch.histc(x.to("tpu"), bins=3)  # min == max: the data's range 0..7
    assert out.cpu().tolist() == [4, 2, 3]  # bins: x*3//7 -> 0,0,0,1,2,0,3->2,3->2,1
    out = torch.histc(x.to("tpu"), bins=5, min=1.7, max=4.2)  # min/max truncate to 1 and 4
    assert out.cpu().tolist() == [2, 1, 0, 1, 1]
    # expert ids as the MoE routers count them
    ids = torch.randint(0, 8, (64,))
    ref = torch.histc(ids.float(), bins=8, min=0, max=7).long()
    assert torch.equal(torch.histc(ids.to("tpu"), bins=8, min=0, max=7).cpu(), ref)


def test_histc_bool_input_raises():
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'"):
        torch.histc(torch.tensor([True, False]).to("tpu"), bins=2)
