"""Checkpoints (issue 18): torch.save / torch.load of tpu tensors, modules and optimizer state
round-trip bit-exact (compared as raw bits, so NaN payloads and -0.0 count), views stay views
of one storage as on CPU/CUDA, and map_location moves checkpoints between cpu and tpu."""
import io

import pytest
import torch

import torch_tpu  # noqa: F401
from op_harness import in_mode, modes

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int8, torch.uint8,
          torch.int32, torch.int64, torch.bool]


def _round_trip(obj, map_location=None, weights_only=True, **save_kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **save_kw)
    buf.seek(0)
    return torch.load(buf, map_location=map_location, weights_only=weights_only)


def _bits(t):
    """The tensor's bytes on CPU, so that equality is bit equality (NaN == NaN, -0.0 != 0.0)."""
    t = t.detach().cpu().contiguous().reshape(-1)
    return t.view(torch.uint8) if t.dtype != torch.bool else t


def _assert_same(got, want, device="tpu"):
    assert got.device.type == device and got.dtype == want.dtype and got.shape == want.shape
    assert got.stride() == want.stride() and got.storage_offset() == want.storage_offset()
    assert torch.equal(_bits(got), _bits(want))


def _sample(dtype, shape=(5, 7)):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*shape, generator=g) * 50
    if dtype.is_floating_point:
        x = x.flatten()
        x[:4] = torch.tensor([float("nan"), float("inf"), -0.0, 1e-40])  # specials keep their bits
        return x.view(shape).to(dtype)
    return (x > 0) if dtype == torch.bool else x.to(dtype)


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_tensor_round_trip(dtype, legacy, mode):
    """In every mode: the legacy format reads and writes storages through at::from_blob views
    of their memory, which fused mode's window cannot see alias (torch.load returned garbage)."""
    with in_mode(mode):
        x = _sample(dtype).to("tpu")
        _assert_same(_round_trip(x, _use_new_zipfile_serialization=not legacy), x)


def test_shapes_and_non_contiguous():
    x = torch.randn(4, 6).to("tpu")
    cases = {"0-dim": torch.tensor(3.5, device="tpu"), "0-size": torch.empty(0, 3, device="tpu"),
             "transpose": x.t(), "step": x[:, ::2], "as_strided": x.as_strided((3, 2), (5, 2), 3),
             "expand": torch.randn(3, 1).to("tpu").expand(3, 4)}
    got = _round_trip(cases)
    for name, want in cases.items():
        _assert_same(got[name], want)


def test_views_share_one_storage():
    base = torch.arange(24.0).to("tpu")
    a, b = base[2:10], base.view(4, 6)[:, 1]
    la, lb = _round_trip([a, b])
    _assert_same(la, a)
    _assert_same(lb, b)
    assert la.untyped_storage().data_ptr() == lb.untyped_storage().data_ptr()
    la.add_(100)  # a write through one view is seen through the other, as on CPU
    cpu_base = torch.arange(24.0)
    cpu_base[2:10] += 100
    assert torch.equal(lb.cpu(), cpu_base.view(4, 6)[:, 1])


@pytest.mark.parametrize("src,dst", [("tpu", "cpu"), ("cpu", "tpu"), ("tpu", "tpu"), ("tpu", "dict")])
def test_map_location(src, dst):
    base = torch.randn(10)
    want = {"x": base, "v1": base[1:4], "v2": base[2:]}
    dev_base = base.to(src)
    obj = {"x": dev_base, "v1": dev_base[1:4], "v2": dev_base[2:]}
    loc = {"tpu:0": "cpu"} if dst == "dict" else dst
    got = _round_trip(obj, map_location=loc)
    want_dev = "cpu" if dst == "dict" else dst
    for k in obj:
        _assert_same(got[k], want[k], device=want_dev)
    assert got["v1"].untyped_storage().data_ptr() == got["v2"].untyped_storage().data_ptr()
    back = _round_trip(got, map_location="cpu" if want_dev == "tpu" else "tpu")  # and back again
    for k in obj:
        assert torch.equal(_bits(back[k]), _bits(want[k]))


def test_file_and_mmap(tmp_path):
    x = torch.randn(8, 3).to("tpu")
    path = tmp_path / "ckpt.pt"
    torch.save({"x": x, "v": x[2:]}, path)
    for kw in ({}, {"mmap": True}, {"mmap": True, "map_location": "tpu"}):
        got = torch.load(path, **kw)
        _assert_same(got["x"], x)
        _assert_same(got["v"], x[2:])


def _model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                            torch.nn.Linear(16, 3))
    m.register_buffer("steps", torch.zeros((), dtype=torch.int64))
    return m


def test_module_state_dict_and_whole_module():
    m = _model().to("tpu")
    sd = m.state_dict()
    got = _round_trip(sd)
    assert list(got) == list(sd)
    for k in sd:
        _assert_same(got[k], sd[k])
    fresh = _model()
    with torch.no_grad():
        for p in fresh.parameters():
            p.add_(1)
    fresh = fresh.to("tpu")
    fresh.load_state_dict(got)
    x = torch.randn(4, 6).to("tpu")
    assert torch.equal(fresh(x).cpu(), m(x).cpu())
    whole = _round_trip(m, weights_only=False)
    assert isinstance(whole, torch.nn.Sequential) and next(whole.parameters()).device.type == "tpu"
    assert torch.equal(whole(x).cpu(), m(x).cpu())


def test_tied_weights_stay_tied():
    m = torch.nn.Module()
    m.a, m.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    m.b.weight = m.a.weight
    m = m.to("tpu")
    whole = _round_trip(m, weights_only=False)
    assert whole.a.weight is whole.b.weight
    sd = _round_trip(m.state_dict())
    assert sd["a.weight"].untyped_storage().data_ptr() == sd["b.weight"].untyped_storage().data_ptr()


def _train(m, opt, steps, seed):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x, y = torch.randn(8, 6, generator=g).to("tpu"), torch.randn(8, 3, generator=g).to("tpu")
        opt.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
        opt.step()


@pytest.mark.parametrize("opt_cls", [torch.optim.AdamW, torch.optim.SGD], ids=lambda c: c.__name__)
def test_optimizer_state_resumes_bit_exact(opt_cls):
    kw = {"lr": 1e-2, "weight_decay": 0.1} if opt_cls is torch.optim.AdamW else {"lr": 1e-2, "momentum": 0.9}
    m = _model().to("tpu")
    opt = opt_cls(m.parameters(), **kw)
    _train(m, opt, 3, seed=1)
    ckpt = _round_trip({"model": m.state_dict(), "opt": opt.state_dict()})
    for k, v in opt.state_dict()["state"][0].items():
        if torch.is_tensor(v):
            _assert_same(ckpt["opt"]["state"][0][k], v, device=v.device.type)
    # A fresh model and optimizer resumed from the checkpoint continue exactly as the original.
    m2 = _model().to("tpu")
    opt2 = opt_cls(m2.parameters(), **kw)
    m2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["opt"])
    _train(m, opt, 2, seed=2)
    _train(m2, opt2, 2, seed=2)
    for p, p2 in zip(m.parameters(), m2.parameters()):
        assert torch.equal(_bits(p), _bits(p2))


def test_cpu_checkpoint_trains_on_tpu_like_cpu():
    """A checkpoint written on CPU, loaded onto tpu (map_location) and saved back: the values
    are the CPU ones, and a tpu state dict loads into a CPU model bit-exact."""
    cpu = _model()
    got = _round_trip(cpu.state_dict(), map_location="tpu")
    assert all(v.device.type == "tpu" for v in got.values())
    back = _round_trip(got, map_location="cpu")
    for k, v in cpu.state_dict().items():
        _assert_same(back[k], v, device="cpu")
    m = _model()
    m.load_state_dict(got)  # tpu tensors copied into a CPU module
    for p, q in zip(m.parameters(), cpu.parameters()):
        assert torch.equal(_bits(p), _bits(q))


def test_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    d = {"w": _sample(torch.bfloat16).to("tpu"), "i": torch.arange(5).to("tpu"), "b": _sample(torch.bool).to("tpu")}
    loaded = st.load(st.save(d))
    for k in d:
        assert torch.equal(_bits(loaded[k]), _bits(d[k]))
    st.save_file(d, tmp_path / "m.safetensors")
    # safetensors' loader knows a fixed list of device names: load on CPU, then move.
    loaded = {k: v.to("tpu") for k, v in st.load_file(tmp_path / "m.safetensors").items()}
    for k in d:
        _assert_same(loaded[k], d[k])
