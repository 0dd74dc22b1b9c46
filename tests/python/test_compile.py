"""torch.compile(backend="tpu"): graphs captured into one IR graph each and replayed.
Compiled results equal eager (forward, backward, GPT loss and every gradient), the same
shapes never recapture, graph breaks and sync points fall back to eager for their part,
input mutation is written back, and a plain torch.compile on tpu tensors uses our backend."""
import copy
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu._internal import compile as tc

import example_loader

HIGHEST = torch_tpu.Precision.HIGHEST

gpt = example_loader.load("gpt")


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    # An empty on-disk cache per test: counts of compiled graphs stay those of a cold start.
    monkeypatch.setenv("TORCH_TPU_CACHE_DIR", str(tmp_path / "tpu_cache"))
    torch._dynamo.reset()
    tc.reset_stats()
    yield
    torch._dynamo.reset()


def _grads(m):
    return {n: p.grad.detach().cpu() for n, p in m.named_parameters() if p.grad is not None}


def _close_grads(a, b, rel=3e-6):
    assert a.keys() == b.keys()
    for n in a:
        scale = b[n].abs().max().item()
        torch.testing.assert_close(a[n], b[n], atol=rel * scale + 1e-9, rtol=1e-5, msg=lambda m, n=n: f"grad of {n}: {m}")


def test_mlp_forward_backward_equals_eager_and_cpu():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    x = torch.randn(8, 16)
    ref = copy.deepcopy(model)
    ref(x).square().mean().backward()
    m = copy.deepcopy(model).to("tpu")
    cm = torch.compile(m, backend="tpu")
    with torch_tpu.precision(HIGHEST):
        for _ in range(3):
            m.zero_grad(set_to_none=True)
            y = cm(x.to("tpu"))
            y.square().mean().backward()
    torch.testing.assert_close(y.cpu(), ref(x), atol=1e-6, rtol=1e-5)
    _close_grads(_grads(m), _grads(ref))
    s = tc.stats()
    assert s["graphs"] == 2 and s["captures"] == 2 and s["replays"] == 4 and s["eager_calls"] == 0, s


def _gpt_setup(ctx=32, batch=4):
    torch.manual_seed(0)
    chars, data = gpt.load_data()
    cfg = gpt.Config(vocab=len(chars.chars), ctx=ctx, layers=2, heads=4, width=64)
    model = gpt.GPT(cfg)
    gen = torch.Generator().manual_seed(1)
    return model, [gpt.get_batch(data, batch, ctx, gen) for _ in range(3)]


def test_gpt_train_step_equals_eager():
    model, batches = _gpt_setup()
    runs = {}
    for name in ("eager", "compiled"):
        m = copy.deepcopy(model).to("tpu")
        fwd = torch.compile(m, backend="tpu") if name == "compiled" else m
        losses = []
        with torch_tpu.precision(HIGHEST):
            for x, y in batches:
                m.zero_grad(set_to_none=True)
                _, loss = fwd(x.to("tpu"), y.to("tpu"))
                loss.backward()
                losses.append(loss.item())
        runs[name] = (losses, _grads(m))
    assert runs["compiled"][0] == pytest.approx(runs["eager"][0], rel=1e-6, abs=1e-6)
    _close_grads(runs["compiled"][1], runs["eager"][1])
    s = tc.stats()
    # One forward and one backward graph, captured once, replayed for the other two steps.
    assert s["graphs"] == 2 and s["captures"] == 2 and s["replays"] == 4 and s["eager_calls"] == 0, s


def test_same_shapes_do_not_recompile():
    torch.manual_seed(0)
    m = nn.Linear(8, 8).to("tpu")
    cm = torch.compile(m, backend="tpu", dynamic=False)
    for _ in range(4):
        cm(torch.randn(4, 8, device="tpu"))
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert tc.stats()["captures"] == 1  # the forward (no backward was run)
    for _ in range(3):
        cm(torch.randn(4, 8, device="tpu")).sum().backward()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == frames
    assert tc.stats()["captures"] == 2 and tc.stats()["replays"] == 3 + 3 + 2


def test_dynamic_shapes_recapture_per_shape():
    torch.manual_seed(0)
    lin = nn.Linear(8, 8)
    m = copy.deepcopy(lin).to("tpu")
    cm = torch.compile(m, backend="tpu", dynamic=True)
    with torch.no_grad(), torch_tpu.precision(HIGHEST):
        for n in (3, 5, 7, 5):
            x = torch.randn(n, 8)
            torch.testing.assert_close(cm(x.to("tpu")).cpu(), lin(x), atol=1e-6, rtol=1e-5)
    assert tc.stats()["captures"] == 3


def test_recompiles_warn_once_naming_the_changing_dim(monkeypatch):
    monkeypatch.setenv("TORCH_TPU_RECOMPILE_WARN", "3")
    m = nn.Linear(8, 8).to("tpu")
    cm = torch.compile(m, backend="tpu", dynamic=True)
    with pytest.warns(UserWarning, match=r"captured 4 times.*changing: input \d+: 4 values 3, 4, 5, 6") as rec:
        with torch.no_grad():
            for n in (3, 4, 5, 6, 7, 8):
                cm(torch.randn(n, 8, device="tpu"))
    assert sum("captured" in str(w.message) for w in rec) == 1  # once per graph
    graphs = [g for g in torch_tpu.metrics()["compile"]["graphs"] if g["captures"] == 6]
    assert len(graphs) == 1 and graphs[0]["kind"] == "inference"
    assert any(v.startswith("6 values 3, 4, 5") for v in graphs[0]["changing"].values())


def test_graph_break_and_sync_fall_back():
    def f(x):
        y = x.sin() * 2
        if y.sum().item() > 0:  # data-dependent: a graph break
            y = y + 1
        z = torch.nonzero(y > 1.5)  # sync inside a graph (data-dependent shape)
        return y.cos(), z

    x = torch.randn(16)
    cf = torch.compile(f, backend="tpu")
    for _ in range(2):
        yt, zt = cf(x.to("tpu"))
    yc, zc = f(x)
    torch.testing.assert_close(yt.cpu(), yc)
    assert torch.equal(zt.cpu(), zc)


def test_inference_mutation_and_batchnorm_running_stats():
    torch.manual_seed(0)
    bn = nn.BatchNorm1d(6)
    ref = copy.deepcopy(bn)
    m = copy.deepcopy(bn).to("tpu")
    cm = torch.compile(m, backend="tpu")
    for _ in range(3):
        x = torch.randn(10, 6)
        y = cm(x.to("tpu"))
        yr = ref(x)
    torch.testing.assert_close(y.cpu(), yr, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(m.running_mean.cpu(), ref.running_mean, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(m.running_var.cpu(), ref.running_var, atol=1e-6, rtol=1e-5)
    assert m.num_batches_tracked.item() == 3

    def add_(buf, x):
        buf.add_(x)
        return buf * 2

    buf = torch.zeros(5, device="tpu")
    cadd = torch.compile(add_, backend="tpu")
    for _ in range(3):
        out = cadd(buf, torch.ones(5, device="tpu"))
    assert buf.cpu().tolist() == [3.0] * 5 and out.cpu().tolist() == [6.0] * 5


def test_dropout_in_compiled_graph_follows_the_seed():
    m = nn.Sequential(nn.Linear(32, 32), nn.Dropout(0.5)).to("tpu")
    cm = torch.compile(m, backend="tpu")
    x = torch.randn(16, 32, device="tpu")
    outs = []
    for _ in range(2):
        torch.manual_seed(7)
        a = cm(x)
        b = cm(x)
        outs.append((a.cpu(), b.cpu()))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])
    assert not torch.equal(outs[0][0], outs[0][1])  # the generator advances between calls
    assert 0.3 < (outs[0][0] == 0).float().mean().item() < 0.7


def test_index_range_check_raises_from_compiled_graph():
    emb = nn.Embedding(10, 4).to("tpu")
    ce = torch.compile(emb, backend="tpu")
    ce(torch.tensor([1, 2], device="tpu"))
    ce(torch.tensor([1, 2], device="tpu"))  # replayed
    with pytest.raises(Exception, match="out of range|index"):
        ce(torch.tensor([1, 12], device="tpu")).cpu()
    torch.tpu.synchronize()


def test_plain_torch_compile_on_tpu_uses_the_tpu_backend():
    def f(x):
        return F.gelu(x) * 3

    x = torch.randn(6)
    out = torch.compile(f)(x.to("tpu"))  # Inductor would reach its Pallas (jax) code generator
    torch.testing.assert_close(out.cpu(), f(x), atol=1e-6, rtol=1e-6)
    assert tc.stats()["captures"] == 1


def test_options():
    f = torch.compile(lambda x: x + 1, backend="tpu", options={"async_compile": True, "serializable": False})
    assert f(torch.ones(2, device="tpu")).cpu().tolist() == [2.0, 2.0]
    g = torch.compile(lambda x: x + 1, backend="tpu", options={"bogus": 1})
    with pytest.raises(Exception, match="unknown tpu backend option"):
        g(torch.ones(2, device="tpu"))


def test_cnn_forward_backward_equals_eager():
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 5))
    x = torch.randn(4, 3, 16, 16)
    runs = {}
    for name in ("eager", "compiled"):
        m = copy.deepcopy(net).to("tpu")
        f = torch.compile(m, backend="tpu") if name == "compiled" else m
        with torch_tpu.precision(HIGHEST):
            for _ in range(3):
                m.zero_grad(set_to_none=True)
                y = f(x.to("tpu"))
                y.square().mean().backward()
        runs[name] = (y.detach().cpu(), _grads(m), m[1].running_mean.cpu(), m[5].running_var.cpu())
    torch.testing.assert_close(runs["compiled"][0], runs["eager"][0], atol=1e-5, rtol=1e-5)
    _close_grads(runs["compiled"][1], runs["eager"][1], rel=1e-5)
    torch.testing.assert_close(runs["compiled"][2], runs["eager"][2], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(runs["compiled"][3], runs["eager"][3], atol=1e-6, rtol=1e-5)
    s = tc.stats()
    assert s["graphs"] == 2 and s["captures"] == 2 and s["replays"] == 4 and s["eager_calls"] == 0, s


_DISK_CHILD = r"""
import json, torch, torch.nn as nn, torch_tpu
from torch._dynamo.utils import counters
from torch_tpu._internal import compile as tc
torch.manual_seed(0)
class M(nn.Module):  # positions from arange, as in a GPT: a constant the forward graph saves
    def __init__(self):
        super().__init__()
        self.pos = nn.Embedding(5, 8)
        self.net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x + self.pos(torch.arange(x.shape[0], device=x.device)))

m = M().to("tpu")
x = torch.randn(5, 8).to("tpu")
cm = torch.compile(m, backend="tpu")
for _ in range(2):
    m.zero_grad()
    loss = cm(x).square().mean()
    loss.backward()
print(json.dumps({"loss": loss.item(), "grads": [p.grad.cpu().flatten().tolist() for p in m.parameters()],
                  "aot": dict(counters["aot_autograd"]), "stats": tc.stats(), "dir": tc.cache_dir()}))
"""


def _disk_child(cache):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", _DISK_CHILD], env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_disk_cache_second_process_skips_aot_autograd(tmp_path):
    first = _disk_child(tmp_path / "c")
    assert first["aot"].get("autograd_cache_miss") == 1 and first["aot"].get("autograd_cache_saved") == 1
    assert first["stats"]["graphs"] == 2 and first["stats"]["disk_loads"] == 0
    assert first["dir"].startswith(str(tmp_path / "c")) and os.listdir(first["dir"])
    second = _disk_child(tmp_path / "c")
    assert second["aot"].get("autograd_cache_hit") == 1
    assert second["stats"]["graphs"] == 0 and second["stats"]["disk_loads"] == 2  # forward + backward
    assert second["stats"]["captures"] == 2
    # the second call replays both graphs; none runs its FX code eagerly (a loaded forward graph
    # returns a lifted arange constant it does not compute: it used to fall back to eager)
    for run in (first, second):
        assert run["stats"]["eager_calls"] == 0 and run["stats"]["replays"] == 2, run["stats"]
    assert second["loss"] == first["loss"] and second["grads"] == first["grads"]
    off = _disk_child("off")
    assert off["dir"] is None and not off["aot"].get("autograd_cache_saved")
    assert off["loss"] == first["loss"]


def test_strided_inputs_and_outputs_are_read_and_written_in_place():
    # q, k, v as views of one projection and a transposed weight: the captured program binds
    # the storage runs they span (flat parameters, the views derived in the graph) instead of
    # gathering copies before each run; an output in a permuted dense layout is written in
    # storage order. Values and strides equal CPU's.
    def f(q, k, v, wt):
        return (q * k + v).transpose(1, 2) @ wt, (q + 1).transpose(1, 2)

    fc = torch.compile(f, backend="tpu")
    torch.manual_seed(0)
    w = torch.randn(48, 16)

    def views(buf):
        return [buf[:, :, i * 64:(i + 1) * 64].view(2, 16, 4, 16).transpose(1, 2) for i in range(3)]

    for scale in (1, 2):
        qkv = torch.randn(2, 16, 3 * 64) * scale
        with torch_tpu.precision(HIGHEST):
            got = fc(*views(qkv.to("tpu")), w.to("tpu").t())
        want = f(*views(qkv), w.t())
        for g, e in zip(got, want):
            assert g.shape == e.shape and g.stride() == e.stride()
            torch.testing.assert_close(g.cpu(), e, rtol=1e-5, atol=1e-5)
    assert tc.stats()["captures"] == 1 and tc.stats()["replays"] == 1
    hlo = max(tc._GRAPHS.items())[1].stablehlo()  # this test's graph: the newest
    sig = hlo.split("->")[0]
    assert "tensor<6144xf32>" in sig and "tensor<768xf32>" in sig, sig  # the projection's run, W flat
    assert "tensor<2x4x16x16xf32>" not in sig, sig


def test_strided_input_in_a_short_storage_is_a_capture_of_its_own():
    # The program reads whole rows of a strided input's storage (3072 elements each): the same
    # view in a storage that ends at the view's last element gets a capture of its own.
    def g(q):
        return q * 2

    gc = torch.compile(g, backend="tpu")
    full = torch.randn(6144)

    def view(b):
        return b.as_strided((2, 4, 16, 16), (3072, 16, 192, 1), 0)

    for n in (6144, 6016, 6144, 6016):
        b = full[:n].clone()
        torch.testing.assert_close(gc(view(b.to("tpu"))).cpu(), g(view(b)))
    assert tc.stats()["captures"] == 2 and tc.stats()["replays"] == 2


def test_graph_without_computation_replays():
    """A captured graph whose outputs are all views of its inputs is an empty program; its
    second call matches it against the inputs (it used to read past the program's input
    table: a segfault in the backward of a model whose gradient is a view)."""
    f = torch.compile(lambda x: x.t()[1:], backend="tpu")
    x = torch.randn(4, 3)
    xt = x.to("tpu")
    for _ in range(3):
        assert torch.equal(f(xt).cpu(), x.t()[1:])
    g = torch.compile(lambda x: (x * 2).view(-1), backend="tpu")
    leaf = x.to("tpu").requires_grad_()
    for _ in range(3):
        g(leaf).sum().backward()
    assert torch.equal(leaf.grad.cpu(), torch.full((4, 3), 6.0))


def test_plain_compile_made_before_tensors_uses_tpu_backend_and_names_ignored_options():
    """A torch.compile object made before any tpu tensor exists, with Inductor options (as
    TorchTitan makes its FlexAttention at class definition) compiles tpu graphs with our
    backend; the options are named once as ignored; Inductor's own "tpu" code generator (torch
    registers Pallas) is ours and refuses."""
    import warnings

    from torch._inductor.codegen import common
    from torch_tpu._internal import compile as tpu_compile

    torch._dynamo.reset()
    f = torch.compile(lambda x: (x * 2).sin() + 1, options={"coordinate_descent_tuning": True})
    x = torch.randn(5)
    before = tpu_compile.stats()["captures"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = f(x.to("tpu")).cpu()
    torch.testing.assert_close(got, (x * 2).sin() + 1)
    assert tpu_compile.stats()["captures"] > before
    assert any("coordinate_descent_tuning" in str(w.message) and "ignored" in str(w.message) for w in caught)
    with pytest.raises(NotImplementedError, match="no code generator for device tpu"):
        common.get_scheduling_for_device("tpu")(None)
