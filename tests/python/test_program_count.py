"""How many programs common loops compile (compile-cache misses: each one an XLA compile on a
TPU), with results equal to PyTorch CPU: foreach ops (optimizers) run as one deferred graph
per run of consecutive calls instead of one program per op and tensor shape; host->device
copies of new shapes compile nothing; the cache names what compiled each program."""
import copy

import pytest
import torch

import torch_tpu

STRICT = torch_tpu.EagerMode.DEFER_NEVER
HIGHEST = torch_tpu.Precision.HIGHEST


def _misses():
    s = torch.tpu._get_cache_stats()
    return s["num_cache_reqs"] - s["num_cache_hits"]


def _new_programs(before):
    return [e for e in torch.tpu._get_cache_stats()["per_entry_stats"] if e["key"] not in before]


def _keys():
    return {e["key"] for e in torch.tpu._get_cache_stats()["per_entry_stats"]}


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.LayerNorm(7), torch.nn.Linear(7, 3),
                               torch.nn.Linear(3, 3, bias=False))


@pytest.mark.parametrize("opt_name", ["AdamW", "Adam", "SGD"])
def test_foreach_optimizer_one_program_per_step(opt_name):
    """Each step of a foreach optimizer (PyTorch's default on tpu) equals CPU; its first step
    compiles one graph for all its foreach calls besides the state's initial values (one
    zero-fill or clone per parameter shape; 5 shapes x 8 foreach ops were 40 programs), and
    later steps replay it."""
    ref = _model()
    m = copy.deepcopy(ref).to("tpu")
    kw = {"lr": 0.05, "weight_decay": 0.1} if opt_name != "SGD" else {"lr": 0.05, "momentum": 0.9}
    opt_r = getattr(torch.optim, opt_name)(ref.parameters(), **kw)
    opt_m = getattr(torch.optim, opt_name)(m.parameters(), **kw)
    gen = torch.Generator().manual_seed(1)
    with torch_tpu.eager_mode(STRICT), torch_tpu.precision(HIGHEST):
        for step in range(4):
            x = torch.randn(6, 5, generator=gen)
            ref(x).square().mean().backward()
            m(x.to("tpu")).square().mean().backward()
            if step == 0:
                torch.tpu.synchronize()
                k0 = _keys()
            if step == 2:
                m0 = _misses()
            opt_r.step()
            opt_m.step()
            if step == 0:
                torch.tpu.synchronize()
                new = [e["name"] for e in _new_programs(k0)]
                steps = [n for n in new if n not in ("aten::zero_", "aten::copy_", "aten::fill_.Scalar")]
                assert steps == ["fused_window"], new
            if step == 2:
                torch.tpu.synchronize()
                assert _misses() - m0 <= 1, "a warm optimizer step compiles at most its one graph"
                m1 = _misses()
            if step == 3:
                torch.tpu.synchronize()
                assert _misses() == m1, "the same step replays the same program"
            opt_r.zero_grad()
            opt_m.zero_grad()
            for (n, pr), pm in zip(ref.named_parameters(), m.parameters()):
                torch.testing.assert_close(pm.cpu(), pr.detach(), atol=1e-6, rtol=1e-5, msg=n)


def test_foreach_results_read_by_strict_ops_and_sync_points():
    """A foreach call leaves its graph deferred; whatever reads the results next (a strict op,
    .cpu(), another foreach call, a compiled graph) sees the updated values."""
    cpu = [torch.randn(3, 4), torch.randn(5), torch.randn(2, 2, 2)]
    tpu = [t.to("tpu") for t in cpu]
    with torch_tpu.eager_mode(STRICT):
        torch._foreach_add_(cpu, 1.5)
        torch._foreach_add_(tpu, 1.5)
        s = tpu[0].sum()  # strict op: flushes the deferred graph first
        torch.testing.assert_close(s.cpu(), cpu[0].sum())
        torch._foreach_mul_(cpu, [2.0, 3.0, 4.0])
        torch._foreach_mul_(tpu, [2.0, 3.0, 4.0])
        sq_c = torch._foreach_sqrt(torch._foreach_abs(cpu))
        sq_t = torch._foreach_sqrt(torch._foreach_abs(tpu))
        norms = torch._foreach_norm(tpu)
        for a, b in zip(sq_t, sq_c):
            torch.testing.assert_close(a.cpu(), b)
        for a, b in zip(tpu, cpu):
            torch.testing.assert_close(a.cpu(), b)
        torch.testing.assert_close(torch.stack(norms).cpu(), torch.stack(torch._foreach_norm(cpu)))
        torch._foreach_zero_(tpu)
        f = torch.compile(lambda t: t * 2 + 1, backend="tpu")
        torch.testing.assert_close(f(tpu[1]).cpu(), torch.ones(5))


def test_foreach_bad_input_is_a_python_error():
    a = [torch.randn(3).to("tpu"), torch.randn(4).to("tpu")]
    with pytest.raises(RuntimeError):
        torch._foreach_add_(a, [torch.randn(3).to("tpu")])  # lists of different lengths
    with pytest.raises(RuntimeError):
        torch._foreach_add_(a, [torch.randn(2).to("tpu"), torch.randn(4).to("tpu")])  # shapes
    torch._foreach_add_(a, 1.0)  # still usable
    assert a[0].cpu().shape == (3,)


def test_host_to_device_copies_of_new_shapes_compile_nothing():
    torch.tpu.synchronize()
    m0 = _misses()
    vals = [torch.arange(n * 3, dtype=torch.float32).reshape(n, 3) for n in (11, 12, 13)]
    outs = [v.to("tpu") for v in vals] + [torch.arange(n, dtype=torch.int64).to("tpu") for n in (21, 22)]
    for o, v in zip(outs, vals):
        torch.testing.assert_close(o.cpu(), v)
    assert _misses() == m0
    # Into part of a storage (or with a conversion): still exact.
    d = torch.zeros(4, 6).to("tpu")
    d[:, 1:3] = torch.ones(4, 2)
    d[0].copy_(torch.arange(6, dtype=torch.int32))
    e = torch.zeros(4, 6)
    e[:, 1:3] = 1
    e[0] = torch.arange(6)
    torch.testing.assert_close(d.cpu(), e)


def test_cache_names_what_compiled_each_program():
    x = torch.randn(3, 17).to("tpu")
    (x * 3).tanh_()
    entries = torch.tpu._get_cache_stats()["per_entry_stats"]
    tanh = [e for e in entries if e["name"] == "aten::tanh_" and "f32[3, 17]" in e["signature"]]
    assert tanh and all(e["miss_index"] > 0 for e in tanh), entries[-3:]
