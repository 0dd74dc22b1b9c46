"""Bad input raises what PyTorch CPU raises, with the same exception type, in every eager mode:
asynchronous index errors surface as IndexError at the sync point (gather/scatter keep CPU's
RuntimeError), integer division by zero, probabilities outside [0, 1], binary cross entropy
of inputs outside [0, 1]. The op name appears once in the message."""
import pytest
import torch

import torch_tpu

MODES = {
    "strict": torch_tpu.EagerMode.DEFER_NEVER,
    "fused": torch_tpu.EagerMode.DEFER_AND_FUSE,
    "debug": torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING,
}


def _t(x):
    return x.to("tpu")


CASES = [
    # name, fn(to_device) -> a tensor, CPU's exception type, a message fragment
    ("index_tensor", lambda d: d(torch.ones(3))[d(torch.tensor([5]))], IndexError, "out of bounds"),
    ("index_select", lambda d: d(torch.ones(3)).index_select(0, d(torch.tensor([5]))), IndexError, "out of range"),
    ("embedding", lambda d: torch.nn.functional.embedding(d(torch.tensor([7])), d(torch.ones(3, 2))), IndexError,
     "out of range"),
    ("take", lambda d: d(torch.ones(3)).take(d(torch.tensor([5]))), IndexError, "out of"),
    ("index_put", lambda d: d(torch.ones(3)).index_put_((d(torch.tensor([5])),), d(torch.ones(1))), IndexError,
     "out of bounds"),
    ("nll_loss", lambda d: torch.nn.functional.nll_loss(d(torch.randn(2, 3)), d(torch.tensor([0, 5]))), IndexError,
     "out of bounds"),
    ("gather", lambda d: torch.gather(d(torch.ones(3)), 0, d(torch.tensor([5]))), RuntimeError, "out of bounds"),
    ("scatter", lambda d: d(torch.ones(3)).scatter_(0, d(torch.tensor([5])), 1.0), RuntimeError, "out of bounds"),
    ("floordiv_scalar0", lambda d: d(torch.tensor([3, 4])) // 0, RuntimeError, "ZeroDivisionError"),
    ("floordiv_tensor0", lambda d: d(torch.tensor([3, 4])) // d(torch.tensor([0, 1])), RuntimeError,
     "ZeroDivisionError"),
    ("remainder0", lambda d: d(torch.tensor([3, 4])) % 0, RuntimeError, "ZeroDivisionError"),
    ("fmod0", lambda d: torch.fmod(d(torch.tensor([3, 4])), d(torch.tensor([1, 0]))), RuntimeError,
     "ZeroDivisionError"),
    ("trunc_div0", lambda d: torch.div(d(torch.tensor([3, 4])), 0, rounding_mode="trunc"), RuntimeError,
     "ZeroDivisionError"),
    ("bernoulli_p2", lambda d: torch.bernoulli(d(torch.full((2,), 2.0))), RuntimeError, "p_in"),
    ("bernoulli_tensor_p", lambda d: d(torch.zeros(2)).bernoulli_(d(torch.tensor([0.5, -1.0]))), RuntimeError,
     "p_in"),
    ("bce_input", lambda d: torch.nn.functional.binary_cross_entropy(d(torch.full((2,), 1.5)), d(torch.ones(2))),
     RuntimeError, "between 0 and 1"),
    ("bce_target", lambda d: torch.nn.functional.binary_cross_entropy(d(torch.full((2,), 0.5)), d(torch.full((2,), 2.0))),
     RuntimeError, "target should be between 0 and 1"),
    ("assert_async", lambda d: (torch._assert_async(d(torch.tensor(0.0))), d(torch.ones(1)))[1], RuntimeError,
     "single nonzero value"),
    ("assert_async_msg", lambda d: (torch._assert_async(d(torch.tensor(False)), "tokens out of range"),
                                    d(torch.ones(1)))[1], RuntimeError, "tokens out of range"),
]


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name,fn,exc,frag", CASES, ids=[c[0] for c in CASES])
def test_error_type_matches_cpu(name, fn, exc, frag, mode):
    with pytest.raises(exc) as cpu:
        fn(lambda t: t)
    assert frag in str(cpu.value)
    with torch_tpu.eager_mode(MODES[mode]):
        with pytest.raises(exc) as dev:
            fn(_t).cpu()
            torch.tpu.synchronize()
    msg = str(dev.value)
    assert frag in msg, msg
    assert type(dev.value) is type(cpu.value) or issubclass(type(dev.value), exc)
    first = msg.split("]")[0] + "]"
    assert msg.count(first) == 1, f"op name repeated: {msg}"
    # the device is usable afterwards
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]


def test_division_by_nonzero_still_matches():
    x, y = torch.tensor([7, -7, 9]), torch.tensor([2, 3, -4])
    assert torch.equal((x.to("tpu") // y.to("tpu")).cpu(), x // y)
    assert torch.equal((x.to("tpu") % 3).cpu(), x % 3)
    assert torch.equal(torch.fmod(x.to("tpu"), y.to("tpu")).cpu(), torch.fmod(x, y))
    f = torch.tensor([1.0, -1.0])
    assert torch.equal((f.to("tpu") / 0).cpu(), f / 0)  # float division by zero is inf, no error


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_matches_cpu(reduction):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 5, generator=g).clamp(1e-3, 1 - 1e-3)
    x[0, 0], x[0, 1] = 0.0, 1.0  # the log clamps at -100
    t = torch.rand(4, 5, generator=g)
    w = torch.rand(5, generator=g)
    xd = x.to("tpu").requires_grad_()
    xc = x.clone().requires_grad_()
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        got = torch.nn.functional.binary_cross_entropy(xd, t.to("tpu"), w.to("tpu"), reduction=reduction)
        want = torch.nn.functional.binary_cross_entropy(xc, t, w, reduction=reduction)
        torch.testing.assert_close(got.cpu(), want)
        got.sum().backward()
        want.sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


@pytest.mark.parametrize("mode", list(MODES))
def test_assert_async_passes_on_nonzero(mode):
    with torch_tpu.eager_mode(MODES[mode]):
        for v in (torch.tensor(1.5), torch.tensor([True]), torch.tensor(-3)):
            torch._assert_async(v.to("tpu"))
            torch._assert_async(v.to("tpu"), "never raised")
        torch.tpu.synchronize()
    with pytest.raises(RuntimeError, match="ambiguous"):
        torch._assert_async(torch.ones(2, device="tpu"))
