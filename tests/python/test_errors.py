"""Errors: wrong shapes, mixed devices, unsupported dtypes and ops without a lowering raise
clear Python exceptions naming the op (no crash, no hang); cpu_fallback_mode runs the
missing op on CPU, warns once and counts it in torch_tpu.metrics()["fallbacks"]."""
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

DEV = "tpu"


def t(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype).to(DEV)


def _healthy():
    """The device still works after an error (nothing left poisoned in the stream)."""
    x = torch.arange(4.0, device=DEV)
    assert torch.equal((x * 2).cpu(), torch.arange(4.0) * 2)
    torch.tpu.synchronize()


SHAPE_ERRORS = [
    ("mm", lambda: torch.mm(t(2, 3), t(4, 5)), r"\[aten::mm\].*cannot be multiplied"),
    ("bmm_batch", lambda: torch.bmm(t(2, 3, 4), t(3, 4, 5)), r"\[aten::bmm\]"),
    ("matmul", lambda: t(2, 3) @ t(2, 3), r"cannot be multiplied|size mismatch|shapes"),
    ("addmm_bias", lambda: torch.addmm(t(7), t(2, 3), t(3, 4)), r"broadcast|size|shape"),
    ("dot_len", lambda: torch.dot(t(3), t(4)), r"\[aten::dot\].*inconsistent"),
    ("mv_rank", lambda: torch.mv(t(2, 3), t(2, 3)), r"\[aten::mv\]|vector"),
    ("broadcast_add", lambda: t(2, 3) + t(4, 3), r"broadcast|must match|size"),
    ("broadcast_where", lambda: torch.where(t(2, 3) > 0, t(2, 3), t(3, 2)), r"broadcast|must match|size"),
    ("layer_norm_shape", lambda: F.layer_norm(t(2, 3, 4), (3,)), r"normalized_shape"),
    ("layer_norm_weight", lambda: F.layer_norm(t(2, 4), (4,), t(5)), r"weight|shape|size"),
    ("nll_batch", lambda: F.nll_loss(t(3, 4), torch.zeros(2, dtype=torch.long, device=DEV)), r"batch_size"),
    ("nll_weight", lambda: F.nll_loss(t(3, 4), torch.zeros(3, dtype=torch.long, device=DEV), t(5)), r"weight"),
    ("view", lambda: t(2, 3).view(4, 2), r"shape|size"),
    ("inplace_broadcast_self", lambda: t(3).add_(t(2, 3)), r"shape|size|broadcast"),
    ("out_wrong_dtype", lambda: torch.add(t(3), t(3), out=torch.empty(3, dtype=torch.int64, device=DEV)),
     r"can't be cast"),
    ("sum_dim_range", lambda: t(2, 3).sum(4), r"[Dd]imension out of range"),
    # Found by the fuzzer (torch_tpu/fuzz): each returned a result where CPU raises.
    ("addmm_self_rank", lambda: torch.addmm(t(2, 5, 3), t(5, 8), t(8, 3)), r"\[aten::addmm\].*expand"),
    ("addmm_self_rank_beta0", lambda: torch.addmm(t(2, 5, 3), t(5, 8), t(8, 3), beta=0), r"\[aten::addmm\].*expand"),
    ("addbmm_self_shape_beta0", lambda: torch.addbmm(t(3, 5), t(1, 3, 2), t(1, 2, 4), beta=0), r"\[aten::addbmm\].*expand"),
    ("min_dim_of_0dim", lambda: torch.min(torch.tensor(1.0, device=DEV), -8, True), r"[Dd]imension out of range"),
    ("max_dim_of_0dim", lambda: torch.max(torch.tensor(1.0, device=DEV), 5), r"[Dd]imension out of range"),
    ("argmax_dim_of_0dim", lambda: torch.argmax(torch.tensor(1.0, device=DEV), 4), r"[Dd]imension out of range"),
    ("conv_transpose_output_padding", lambda: F.conv_transpose3d(t(1, 1, 4, 4, 4), t(1, 1, 1, 1, 1), stride=2,
                                                                  padding=2, output_padding=(1, 100, 1)),
     r"output padding must be smaller"),
    ("conv_transpose_output_too_small", lambda: F.conv_transpose1d(t(1, 1, 1), t(1, 1, 1), stride=2, padding=1,
                                                                    output_padding=1, dilation=2), r"too small"),
    ("conv_bias_dtype", lambda: F.conv1d(t(1, 2, 5), t(3, 2, 2), t(3, dtype=torch.bfloat16)), r"bias"),
    ("conv_transpose_bias_dtype", lambda: F.conv_transpose3d(t(2, 2, 4, 4, 4), t(2, 2, 2, 2, 2), t(4, dtype=torch.bfloat16),
                                                              groups=2), r"bias"),
    ("unique_consecutive_dim_range", lambda: torch.unique_consecutive(t(5, 5), dim=-8), r"[Dd]imension out of range"),
    ("unique_two_zero_dims", lambda: torch.unique(t(0, 0, 0), dim=2), r"zero sized dimensions is more than one"),
    ("unique_zero_dim_not_selected", lambda: torch.unique_consecutive(t(3, 0), dim=0), r"aren't selected"),
    ("lerp_end_dtype", lambda: torch.lerp(t(3), t(3, dtype=torch.bfloat16), 0.5), r"\[aten::lerp.*`end`"),
    ("lerp_weight_dtype", lambda: torch.lerp(t(3), t(3), t(3).bool()), r"\[aten::lerp.*`weight`"),  # a 0-dim weight may differ
    ("index_add_source_dtype", lambda: t(4, 3).index_add(0, torch.tensor([0, 2], device=DEV), t(2, 3, dtype=torch.bfloat16)),
     r"same scalar type"),
    ("batch_norm_running_stat_rank", lambda: torch.native_batch_norm(t(2, 1), None, None, t(1), t(2, 1), True, 0.5, 1e-5),
     r"1-D"),
    ("batch_norm_train_empty", lambda: torch.native_batch_norm(t(0, 3), None, None, None, None, True, 0.1, 1e-5),
     r"at least one element"),
]


@pytest.mark.parametrize("name,fn,match", [pytest.param(*row, id=row[0]) for row in SHAPE_ERRORS])
def test_shape_errors(name, fn, match):
    with pytest.raises((RuntimeError, IndexError, ValueError), match=match):
        fn()
        torch.tpu.synchronize()
    _healthy()


@pytest.mark.parametrize("fn", [
    lambda: t(2, 3) + torch.ones(2, 3),
    lambda: torch.ones(2, 3) * t(2, 3),
    lambda: torch.mm(t(2, 3), torch.ones(3, 2)),
    lambda: torch.where(t(3) > 0, torch.ones(3), t(3)),
    lambda: t(3).add_(torch.ones(3)),
    lambda: F.layer_norm(t(2, 4), (4,), torch.ones(4)),
], ids=["add", "rmul", "mm", "where", "add_", "layer_norm_weight"])
def test_mixed_devices(fn):
    with pytest.raises(RuntimeError, match="tpu"):
        fn()
    _healthy()


def test_cpu_0dim_tensor_is_a_scalar():
    x = t(3)
    assert torch.allclose((x + torch.tensor(2.0)).cpu(), x.cpu() + 2)
    assert torch.allclose((x * torch.tensor(3)).cpu(), x.cpu() * 3)


# Complex tensors support a few ops (tests/python/test_complex.py); the others raise.
@pytest.mark.parametrize("fn", [
    lambda: torch.ones(2, dtype=torch.complex64).to(DEV).exp(),
    lambda: torch.ones(2, 2, dtype=torch.complex64, device=DEV) @ torch.ones(2, 2, dtype=torch.complex64, device=DEV),
    lambda: torch.zeros(2, 2, dtype=torch.complex128, device=DEV).sin(),
    lambda: torch.cumsum(t(2) + torch.ones(2, dtype=torch.complex64).to(DEV), 0),
], ids=["exp", "matmul", "sin", "cumsum"])
def test_unsupported_dtype(fn):
    with pytest.raises((NotImplementedError, RuntimeError), match=r"(?i)complex|unsupported dtype|no tpu lowering"):
        fn()
        torch.tpu.synchronize()
    _healthy()


def test_unsupported_dtype_message_names_op_and_dtype():
    with pytest.raises(NotImplementedError, match=r"\[aten::exp\] complex tensors on tpu support"):
        torch.ones(2, dtype=torch.complex64).to(DEV).exp()


@pytest.mark.parametrize("fn,op", [
    (lambda x: torch.linalg.matrix_exp(x), "linalg_matrix_exp"),
    (lambda x: torch.linalg.eig(x), "linalg_eig"),
], ids=["matrix_exp", "eig"])
def test_missing_lowering_raises_not_implemented(fn, op):
    with pytest.raises(NotImplementedError, match=rf"\[aten::{op}[.\]].*no tpu lowering"):
        fn(t(3, 3))
    _healthy()


def test_cpu_fallback_mode_runs_warns_once_and_counts():
    torch_tpu._C._reset_fallback_counts()
    x = torch.randn(3, 3)
    xt = x.to(DEV)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch_tpu.cpu_fallback_mode(True):
            d1 = torch.linalg.matrix_exp(xt)
            d2 = torch.linalg.matrix_exp(xt * 2)
    assert d1.device.type == DEV
    torch.testing.assert_close(d1.cpu(), torch.linalg.matrix_exp(x))
    torch.testing.assert_close(d2.cpu(), torch.linalg.matrix_exp(x * 2))
    msgs = [str(m.message) for m in w if "no tpu lowering" in str(m.message)]
    assert len(msgs) == 1 and "linalg_matrix_exp" in msgs[0], msgs
    fb = torch_tpu.metrics()["fallbacks"]
    assert fb.get("aten::linalg_matrix_exp") == 2, fb
    # the mode is scoped: off again afterwards
    with pytest.raises(NotImplementedError):
        torch.linalg.matrix_exp(xt)
    _healthy()


def test_cpu_fallback_mode_with_async_inputs():
    """Pending device work feeding a fallback op is finished first."""
    x = torch.randn(32, 32) + 8 * torch.eye(32)
    with torch_tpu.cpu_fallback_mode(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = torch.linalg.inv(x.to(DEV) * 2 + 1) * 3
    torch.testing.assert_close(y.cpu(), torch.linalg.inv(x * 2 + 1) * 3, atol=1e-5, rtol=1e-4)
