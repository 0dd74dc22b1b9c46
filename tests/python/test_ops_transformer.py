"""The transformer op set against PyTorch CPU, forward and backward: shape ops (cat, stack,
split, chunk, flip, triu/tril, views), masking (masked_fill, where, isneginf), indexing
(index_select, gather, scatter, index_add, index / index_put, embedding), order ops (sort,
argsort, topk, cumsum, multinomial), rms_norm, vector norms, sdpa (causal and masked),
cross_entropy with ignore_index and label_smoothing, clip_grad_norm_ and foreach AdamW; plus
error cases (out-of-range indices raise at the next sync point, shape mismatches at once)."""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from op_harness import BF16, F32, FLOATS, INTS, Input, OpSpec, cases, check, check_case, make

DEV = "tpu"


def idx(values):
    """An index tensor argument (never differentiated)."""
    return Input(torch.as_tensor(values, dtype=torch.long))


def inputs(*shapes_or_inputs, low=-3.0, high=3.0):
    """make_inputs for rows mixing float tensors (given by shape) with fixed Inputs."""
    def mk(variant, dtype, gen):
        out = []
        for s in shapes_or_inputs:
            if isinstance(s, tuple):
                out.append(Input(make(s, dtype, gen, low, high)))
            else:
                out.append(s)
        return out
    return mk


def row(name, fn, *args, dtypes=FLOATS, grad=True, **kw):
    return OpSpec(name, fn, dtypes=dtypes, grad=grad, variants=("contig",), make_inputs=inputs(*args), **kw)


SHAPE_OPS = [
    OpSpec("cat_dim0", lambda a, b: torch.cat([a, b]), shapes=((2, 3), (4, 3)), variants=("contig", "noncontig")),
    OpSpec("cat_dim1", lambda a, b: torch.cat([a, b], 1), shapes=((2, 3), (2, 5)), variants=("contig", "noncontig")),
    OpSpec("cat_neg_dim3d", lambda a, b: torch.cat([a, b, a], -1), shapes=((2, 3, 1), (2, 3, 2))),
    row("cat_promote", lambda a: torch.cat([a, torch.ones(1, 3, dtype=torch.int64, device=a.device)]), (2, 3)),
    row("cat_legacy_empty", lambda a: torch.cat([a, torch.empty(0, device=a.device, dtype=a.dtype)]), (2, 3)),
    OpSpec("stack", lambda a, b: torch.stack([a, b], 1), shapes=((2, 3), (2, 3)), variants=("contig", "noncontig", "0dim")),
    OpSpec("split", lambda a: [t * (i + 1) for i, t in enumerate(a.split(2, 1))], shapes=((3, 5),)),
    OpSpec("split_sizes", lambda a: [t.exp() for t in a.split([1, 4], 1)], shapes=((3, 5),)),
    OpSpec("chunk_cat", lambda a: torch.cat(a.chunk(3, 0)[::-1], 1), shapes=((6, 2),)),
    OpSpec("unbind_stack", lambda a: torch.stack(a.unbind(1)[::-1]), shapes=((3, 4),)),
    OpSpec("flip", lambda a: a.flip(0, -1), shapes=((3, 4),), variants=("contig", "noncontig")),
    OpSpec("transpose_contig", lambda a: a.view(2, 3, 2).transpose(0, 2).contiguous() * 2, shapes=((3, 4),)),
    OpSpec("permute_reshape", lambda a: a.view(2, 3, 2).permute(1, 2, 0).reshape(6, 2) + 1, shapes=((3, 4),)),
    OpSpec("expand_contig", lambda a: a[:, None, :].expand(3, 2, 4).contiguous().sin(), shapes=((3, 4),)),
    OpSpec("tril", lambda a: a.tril(), shapes=((4, 5),), dtypes=FLOATS + INTS, variants=("contig", "noncontig")),
    OpSpec("tril_diag", lambda a: a.tril(-1), shapes=((2, 4, 3),), dtypes=FLOATS + (torch.bool,)),
    OpSpec("triu", lambda a: a.triu(), shapes=((5, 4),), dtypes=FLOATS + INTS, variants=("contig", "noncontig")),
    OpSpec("triu_diag2", lambda a: a.triu(2), shapes=((3, 6),)),
    OpSpec("tril_inplace", lambda a: (a * 1).tril_(1), shapes=((4, 4),)),
]

MASK_OPS = [
    row("masked_fill_scalar", lambda a, m: a.masked_fill(m, -1.5), (3, 4), Input(torch.rand(3, 4) > 0.5)),
    row("masked_fill_bcast_mask", lambda a, m: a.masked_fill(m, float("-inf")).softmax(-1), (3, 4),
        Input(torch.tensor([[True, False, False, True]]))),
    row("masked_fill_tensor_value", lambda a, m: a.masked_fill(m, torch.tensor(2.0)), (3, 4), Input(torch.rand(3, 4) > 0.5)),
    row("masked_fill_tpu_value", lambda a, m, v: a.masked_fill(m, v.sum()), (3, 4), Input(torch.rand(3, 4) > 0.5), (2,)),
    row("masked_fill_inplace", lambda a, m: (a * 1).masked_fill_(m, 0.0), (3, 4), Input(torch.rand(4) > 0.5)),
    row("masked_fill_int", lambda a, m: a.masked_fill(m, 7), (3, 4), Input(torch.rand(3, 4) > 0.5), dtypes=INTS, grad=False),
    row("where_scalar", lambda a: torch.where(a > 0, a, 0.0), (3, 4)),
    row("isneginf", lambda a: torch.isneginf(a.masked_fill(a > 1, float("-inf"))), (3, 4), grad=False),
    row("isposinf", lambda a: torch.isposinf(a.masked_fill(a > 1, float("inf"))), (3, 4), grad=False),
    row("logical_not", lambda a: torch.logical_not(a > 0), (3, 4), grad=False),
    row("bitwise_not_bool", lambda a: ~(a > 0), (3, 4), grad=False),
    row("bitwise_not_int", lambda a: ~a, (3, 4), dtypes=(torch.int64, torch.int32, torch.uint8), grad=False),
    row("pow_rsqrt_exp_log", lambda a: (a.abs() + 0.5).rsqrt().pow(3) + a.exp().log(), (3, 4)),
    row("abs_backward_sgn", lambda a: a.abs(), (3, 4)),
]

INDEX_OPS = [
    row("index_select0", lambda a, i: a.index_select(0, i), (4, 3), idx([3, 0, 0, 2, 1])),
    row("index_select1", lambda a, i: a.index_select(1, i), (2, 4, 3), idx([2, 2, 0])),
    row("index_select_0d_index", lambda a, i: a.index_select(0, i), (4, 3), idx(2)),
    row("index_select_int32", lambda a: a.index_select(0, torch.tensor([1, 0], dtype=torch.int32, device=a.device)), (4, 3)),
    row("index_add", lambda a, i, s: a.index_add(0, i, s, alpha=2.0), (4, 3), idx([3, 0, 3]), (3, 3)),
    row("index_add_inplace", lambda a, i, s: (a * 1).index_add_(1, i, s), (2, 4), idx([1, 1, 0]), (2, 3)),
    row("gather", lambda a, i: a.gather(1, i), (3, 4), idx([[0, 3], [1, 1], [3, 2]])),
    row("gather_dim0_small", lambda a, i: a.gather(0, i), (3, 4), idx([[2, 0, 1]])),
    row("scatter_src", lambda a, i, s: a.scatter(1, i, s), (3, 4), idx([[0, 3], [1, 2], [3, 2]]), (3, 2)),
    row("scatter_src_bigger", lambda a, i, s: a.scatter(0, i, s), (3, 4), idx([[2, 0, 1]]), (2, 4), grad=False),
    row("scatter_value", lambda a, i: a.scatter(1, i, 5.0), (3, 4), idx([[0], [2], [3]])),
    row("scatter_add", lambda a, i, s: a.scatter_add(1, i, s), (3, 4), idx([[0, 0], [1, 2], [3, 3]]), (3, 2)),
    row("scatter_add_inplace", lambda a, i, s: (a * 1).scatter_add_(0, i, s), (3, 2), idx([[0, 0], [2, 0]]), (2, 2)),
    row("index_one", lambda a, i: a[i], (5, 3), idx([4, -1, 0, 0])),
    row("index_2d_index", lambda a, i: a[i], (5, 3), idx([[4, 1], [0, 0]])),
    row("index_second_dim", lambda a, i: a[:, i], (2, 5, 3), idx([1, -2])),
    row("index_last_col", lambda a: a[:, [-1]], (3, 5)),
    row("index_two_adjacent", lambda a, i, j: a[:, i, j], (2, 4, 3, 2), idx([1, 3]), idx([[2], [0]])),
    row("index_two_separated", lambda a, i, j: a[i, :, j], (4, 3, 2), idx([1, 3, 0]), idx([1, 0, 1])),
    row("index_bool_mask", lambda a: a[a > 0], (3, 4)),
    row("index_bool_rows", lambda a, m: a[m], (3, 4), Input(torch.tensor([True, False, True]))),
    row("index_put", lambda a, i, v: a.index_put((i,), v), (5, 3), idx([4, 0]), (2, 3)),
    row("index_put_accumulate_dups", lambda a, i, v: a.index_put((i,), v, accumulate=True), (5, 3), idx([4, 0, 4, -1]), (4, 3)),
    row("index_put_bcast_value", lambda a, i: a.index_put((i,), torch.tensor(3.0, device=a.device, dtype=a.dtype)), (5, 3), idx([1, 2])),
    row("index_put_two", lambda a, i, j, v: a.index_put((i, j), v, accumulate=True), (4, 3), idx([0, 3, 0]), idx([2, 1, 2]), (3,)),
    row("index_put_middle", lambda a, i, v: a.index_put((slice(None), i), v), (2, 4, 3), idx([3, 1]), (2, 2, 3),
        grad=False),
    row("setitem_bool_mask", lambda a: (lambda b: (b.__setitem__(b < 0, 0.0), b)[1])(a * 1), (3, 4)),
    row("setitem_slice_index", lambda a, v: (lambda b: (b.__setitem__((slice(None), [0, 2]), v), b)[1])(a * 1), (3, 4), (3, 2)),
    row("index_select_strided_self", lambda a, i: a.t().index_select(0, i), (4, 3), idx([2, 0])),
    row("gather_strided_self", lambda a, i: a.t()[:, ::2].gather(1, i), (4, 3), idx([[0, 1], [1, 1], [0, 0]])),
    row("index_put_into_view", lambda a, i, v: (lambda b: (b.t().index_put_((i,), v, accumulate=True), b)[1])(a * 1),
        (4, 3), idx([2, 0, 2]), (3, 4)),
    row("scatter_into_slice", lambda a, i, s: (lambda b: (b[1:].scatter_(1, i, s), b)[1])(a * 1), (4, 3),
        idx([[0], [2], [1]]), (3, 1)),
    row("masked_fill_into_view", lambda a, m: (lambda b: (b.t().masked_fill_(m, 0.5), b)[1])(a * 1), (4, 3),
        Input(torch.rand(3, 4) > 0.5)),
    row("embedding", lambda w, i: F.embedding(i, w), (6, 4), idx([[0, 5, 2], [2, 2, 1]])),
    row("embedding_padding", lambda w, i: F.embedding(i, w, padding_idx=2), (6, 4), idx([[0, 5, 2], [2, 2, 1]])),
    row("embedding_freq", lambda w, i: F.embedding(i, w, scale_grad_by_freq=True), (6, 4), idx([0, 5, 2, 2, 2, 1])),
]

ORDER_OPS = [
    row("sort", lambda a: a.sort(1), (3, 6)),
    row("sort_desc_stable", lambda a: torch.sort(a, 0, descending=True, stable=True), (5, 3)),
    row("sort_ties_int", lambda a: torch.sort(a, -1, stable=True), (3, 8), dtypes=(torch.int64, torch.int32), grad=False),
    row("argsort", lambda a: a.argsort(-1), (3, 6), grad=False),
    row("argsort_desc", lambda a: a.argsort(0, descending=True), (5, 3), grad=False),
    row("topk", lambda a: a.topk(3, 1), (3, 6)),
    row("topk_smallest", lambda a: a.topk(2, 0, largest=False), (5, 3)),
    row("topk_values_only_mask", lambda a: a.masked_fill(a < a.topk(2)[0][:, [-1]], float("-inf")), (3, 6)),
    row("cumsum", lambda a: a.cumsum(1), (3, 6), tol_scale=4),
    row("cumsum_dim0", lambda a: a.cumsum(0), (4, 2, 3), tol_scale=4),
    row("cumsum_int", lambda a: a.cumsum(0), (4, 3), dtypes=INTS, grad=False),
    row("cumsum_dtype", lambda a: a.cumsum(-1, dtype=torch.float32), (3, 4), dtypes=INTS, grad=False),
    row("cumprod", lambda a: a.cumprod(1), (3, 4), grad=False, tol_scale=4),
]

NORM_OPS = [
    row("rms_norm", lambda x, w: F.rms_norm(x, (4,), w, 1e-5), (3, 4), (4,), tol_scale=4),
    row("rms_norm_noweight", lambda x: F.rms_norm(x, (2, 4)), (3, 2, 4), tol_scale=4),
    row("rms_norm_module", lambda x: torch.nn.RMSNorm(4, device=x.device, dtype=x.dtype)(x), (3, 4), tol_scale=4),
    row("vector_norm", lambda x: torch.linalg.vector_norm(x), (3, 4), tol_scale=4),
    row("vector_norm_dim_keepdim", lambda x: torch.linalg.vector_norm(x, dim=1, keepdim=True), (3, 4), tol_scale=4),
    row("vector_norm_ord1", lambda x: torch.linalg.vector_norm(x, 1, dim=(0, 1)), (3, 4), tol_scale=4),
    row("vector_norm_inf", lambda x: torch.linalg.vector_norm(x, float("inf"), dim=0), (3, 4)),
    row("vector_norm_neginf", lambda x: torch.linalg.vector_norm(x, float("-inf")), (3, 4)),
    row("vector_norm_ord0", lambda x: torch.linalg.vector_norm(x.masked_fill(x > 1, 0), 0), (3, 4), grad=False),
    row("vector_norm_ord3", lambda x: torch.linalg.vector_norm(x, 3, dim=-1), (3, 4), tol_scale=8),
    row("vector_norm_dtype", lambda x: torch.linalg.vector_norm(x, dtype=torch.float32), (3, 4), dtypes=(BF16,), tol_scale=4),
    row("foreach_norm", lambda x, y: torch._foreach_norm([x, y]), (3, 4), (5,), tol_scale=4),
    row("cross_entropy_ignore", lambda x, t: F.cross_entropy(x, t, ignore_index=1), (4, 5), idx([0, 1, 4, 1]), tol_scale=4),
    row("cross_entropy_smooth", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), (4, 5), idx([0, 1, 4, 3]), tol_scale=4),
    row("cross_entropy_smooth_ignore", lambda x, t: F.cross_entropy(x, t, ignore_index=-1, label_smoothing=0.2), (4, 5),
        idx([0, -1, 4, 3]), tol_scale=4),
    row("cross_entropy_smooth_sum_3d", lambda x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.1), (2, 5, 3),
        idx([[0, 1, 4], [3, 3, 2]]), tol_scale=4),
]


def _sdpa(**kw):
    def fn(q, k, v, *extra):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=extra[0] if extra else None, **kw)
    return fn


Q = (2, 2, 5, 4)
SDPA_OPS = [
    row("sdpa", _sdpa(), Q, Q, Q, tol_scale=4),
    row("sdpa_causal", _sdpa(is_causal=True), Q, Q, Q, tol_scale=4),
    row("sdpa_causal_scale", _sdpa(is_causal=True, scale=0.3), Q, Q, Q, tol_scale=4),
    row("sdpa_bool_mask", _sdpa(), Q, Q, Q, Input(torch.rand(5, 5) > 0.3), tol_scale=4),
    row("sdpa_bool_mask_fully_masked_row", _sdpa(), Q, Q, Q,
        Input(torch.tensor([[False] * 5] + [[True, False, True, True, False]] * 4)), tol_scale=4),
    row("sdpa_float_mask", _sdpa(), Q, Q, Q, (1, 2, 5, 5), tol_scale=4),
    row("sdpa_kv_longer", _sdpa(), Q, (2, 2, 7, 4), (2, 2, 7, 4), tol_scale=4),
    row("sdpa_gqa", _sdpa(enable_gqa=True), (1, 4, 5, 4), (1, 2, 5, 4), (1, 2, 5, 4), tol_scale=4),
]


def _masked_scores():
    # rows: all -inf (zeros out), some -inf, finite; plus a NaN row (NaN out, not zeroed)
    x = torch.randn(2, 4, 6)
    x[0, 0] = float("-inf")
    x[0, 1, ::2] = float("-inf")
    x[1, 2] = float("-inf")
    x[1, 3, 1] = float("nan")
    return x


def _safe_softmax(x, *extra, dim=-1, dtype=None):
    return torch.ops.aten._safe_softmax(x + sum(e.sum() * 0 for e in extra), dim, dtype)


# aten._safe_softmax (sdpa's math path) is lowered directly: the row max decides fully
# masked rows; these rows compare with CPU's eq(-inf)/all()/where decomposition.
SDPA_OPS += [
    row("_safe_softmax", _safe_softmax, Input(_masked_scores()), (2, 4, 6), tol_scale=2),
    row("_safe_softmax_dim1", lambda x, y: _safe_softmax(x, y, dim=1), Input(_masked_scores()), (2, 4, 6), tol_scale=2),
    row("_safe_softmax_to_f32", lambda x, y: _safe_softmax(x, y, dtype=torch.float32), Input(_masked_scores()),
        (2, 4, 6), tol_scale=2),
]

ALL_OPS = SHAPE_OPS + MASK_OPS + INDEX_OPS + ORDER_OPS + NORM_OPS + SDPA_OPS


@pytest.mark.parametrize("spec,dtype,variant,mode", cases(ALL_OPS))
def test_op(spec, dtype, variant, mode):
    torch_tpu._C._reset_fallback_counts()
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):  # sdpa's matmuls, forward and backward
        check_case(spec, dtype, variant, mode)  # where CPU raises, tpu must raise too
    assert torch_tpu.metrics()["fallbacks"] == {}


# --- whole optimizer / utility steps ------------------------------------------------------
def _params(device):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=g).to(device).requires_grad_() for s in ((4, 3), (3,), (2, 2, 2))]


def _grads(ps):
    g = torch.Generator().manual_seed(1)
    for p in ps:
        p.grad = torch.randn(p.shape, generator=g).to(p.device) * 3


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (0.5, float("inf")), (100.0, 2.0)])
def test_clip_grad_norm_foreach(max_norm, norm_type):
    cpu, tpu = _params("cpu"), _params(DEV)
    _grads(cpu), _grads(tpu)
    n_cpu = torch.nn.utils.clip_grad_norm_(cpu, max_norm, norm_type, foreach=True)
    n_tpu = torch.nn.utils.clip_grad_norm_(tpu, max_norm, norm_type, foreach=True)
    torch.testing.assert_close(n_tpu.cpu(), n_cpu)
    for a, b in zip(tpu, cpu):
        torch.testing.assert_close(a.grad.cpu(), b.grad)


@pytest.mark.parametrize("foreach", [True, False])
def test_adamw_steps_match_cpu(foreach):
    cpu, tpu = _params("cpu"), _params(DEV)
    opts = [torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95), foreach=foreach) for ps in (cpu, tpu)]
    torch_tpu._C._reset_fallback_counts()
    for _ in range(3):
        for ps, opt in zip((cpu, tpu), opts):
            _grads(ps)
            opt.step()
    for a, b in zip(tpu, cpu):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), atol=1e-6, rtol=1e-5)
    assert torch_tpu.metrics()["fallbacks"] == {}


def test_multinomial_deterministic_and_valid():
    p = torch.tensor([[0.0, 1.0, 3.0, 0.0, 6.0], [5.0, 0.0, 0.0, 1.0, 0.0]], device=DEV)
    torch.manual_seed(3)
    a = torch.multinomial(p, 200, replacement=True)
    torch.manual_seed(3)
    b = torch.multinomial(p, 200, replacement=True)
    assert torch.equal(a.cpu(), b.cpu())
    a = a.cpu()
    assert a.shape == (2, 200) and a.dtype == torch.long
    assert set(a[0].tolist()) <= {1, 2, 4} and set(a[1].tolist()) <= {0, 3}
    freq = (a[0] == 4).float().mean().item()
    assert 0.45 < freq < 0.75  # expected 0.6
    g = torch.Generator(device=DEV).manual_seed(7)
    c = torch.multinomial(p, 2, generator=g)
    g.manual_seed(7)
    assert torch.equal(c.cpu(), torch.multinomial(p, 2, generator=g).cpu())
    c = c.cpu()
    for r in range(2):
        assert len(set(c[r].tolist())) == 2 and all(p[r, j].item() > 0 for j in c[r].tolist())
    one = torch.multinomial(p[0], 1).cpu()
    assert one.shape == (1,) and one.item() in (1, 2, 4)


def test_sdpa_dropout_runs_and_is_seeded():
    q = torch.randn(1, 2, 6, 4, device=DEV)
    torch.manual_seed(0)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5, is_causal=True)
    torch.manual_seed(0)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5, is_causal=True)
    assert torch.equal(a.cpu(), b.cpu())


# --- errors --------------------------------------------------------------------------------
def _raises_at_sync(fn, match):
    with pytest.raises((RuntimeError, IndexError), match=match):
        fn()
        torch.tpu.synchronize()
    torch.tpu.synchronize()  # the stream is usable again
    assert torch.ones(2, device=DEV).sum().item() == 2


X = lambda: torch.randn(4, 3, device=DEV)  # noqa: E731
I = lambda v: torch.tensor(v, device=DEV)  # noqa: E731

OOR = {
    "index_select": lambda: X().index_select(0, I([0, 4])),
    "index_select_negative": lambda: X().index_select(0, I([-1])),
    "embedding": lambda: F.embedding(I([[1, 9]]), X()),
    "gather": lambda: X().gather(1, I([[0], [3], [1], [2]])),
    "gather_negative": lambda: X().gather(1, I([[0], [-1], [1], [2]])),
    "scatter": lambda: X().scatter(0, I([[4, 0, 0]]), 1.0),
    "scatter_add": lambda: X().scatter_add(1, I([[3]]), torch.ones(1, 1, device=DEV)),
    "index_add": lambda: X().index_add(0, I([5]), torch.ones(1, 3, device=DEV)),
    "index": lambda: X()[I([1, 4])],
    "index_negative": lambda: X()[I([-5])],
    "index_second_dim": lambda: X()[:, I([3])],
    "index_put": lambda: X().index_put_((I([4]),), torch.ones(3, device=DEV)),
    "index_put_accumulate": lambda: X().index_put_((I([0]), I([3])), torch.ones(1, device=DEV), accumulate=True),
    "embedding_backward": lambda: torch.ops.aten.embedding_dense_backward(torch.ones(2, 3, device=DEV), I([0, 6]), 4, -1, False),
}


@pytest.mark.parametrize("name", sorted(OOR))
def test_out_of_range_index_raises(name):
    _raises_at_sync(OOR[name], "out of (range|bounds)")


def test_out_of_range_raises_immediately_in_debug_mode():
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        with pytest.raises(RuntimeError, match="out of bounds"):
            X().gather(1, I([[0], [3], [1], [2]]))


def test_multinomial_invalid_probabilities_raise():
    _raises_at_sync(lambda: torch.multinomial(torch.tensor([0.5, -1.0], device=DEV), 1), "element < 0")
    _raises_at_sync(lambda: torch.multinomial(torch.zeros(3, device=DEV), 1), "sum of probabilities")
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(torch.ones(3, device=DEV), 4)


SHAPE_ERRORS = {
    "cat_sizes": (lambda: torch.cat([X(), torch.ones(2, 2, device=DEV)]), "Sizes of tensors must match"),
    "cat_rank": (lambda: torch.cat([X(), torch.ones(3, device=DEV)]), "same number of dimensions"),
    "cat_empty_list": (lambda: torch.cat([]), "non-empty list"),
    "stack_shapes": (lambda: torch.stack([X(), torch.ones(4, 2, device=DEV)]), "stack expects each tensor to be equal size"),
    "masked_fill_float_mask": (lambda: X().masked_fill(torch.ones(4, 3, device=DEV), 0.0), "boolean"),
    "masked_fill_value_dims": (lambda: X().masked_fill(torch.ones(4, 3, device=DEV) > 0, torch.ones(2, device=DEV)),
                               "0-dimensional"),
    "masked_fill_inplace_bcast": (lambda: X().masked_fill_(torch.ones(2, 4, 3, device=DEV) > 0, 0.0), "doesn.t match the result shape"),
    "tril_1d": (lambda: torch.ones(3, device=DEV).tril(), "at least 2 dimensions"),
    "gather_rank": (lambda: X().gather(1, I([0, 1])), "same number of dimensions"),
    "gather_size": (lambda: X().gather(1, torch.zeros(5, 1, dtype=torch.long, device=DEV)), "Size does not match"),
    "gather_float_index": (lambda: X().gather(1, torch.zeros(4, 1, device=DEV)), "int64"),
    "index_put_dtype": (lambda: X().index_put_((I([0]),), torch.ones(3, device=DEV, dtype=torch.float64)), "dtypes match"),
    "index_put_values": (lambda: X().index_put_((I([0, 1]),), torch.ones(3, 3, device=DEV)), "shape mismatch"),
    "index_too_many": (lambda: X()[I([0]), I([0]), I([0])], "too many indices"),
    "index_float": (lambda: X()[torch.zeros(1, device=DEV)], "tensors used as indices"),
    "index_bool_mask_shape": (lambda: X()[torch.ones(3, dtype=torch.bool, device=DEV)], "shape of the mask"),
    "topk_k": (lambda: X().topk(5, 1), "k out of range|selected index"),
    "sdpa_shapes": (lambda: F.scaled_dot_product_attention(X()[None], torch.randn(1, 4, 5, device=DEV), X()[None]), "cannot be multiplied"),
    "vector_norm_int": (lambda: torch.linalg.vector_norm(I([1, 2])), "floating point"),
    "cross_entropy_target_shape": (lambda: F.cross_entropy(X(), I([0, 1])), "batch_size|match"),
}


@pytest.mark.parametrize("name", sorted(SHAPE_ERRORS))
def test_shape_errors(name):
    fn, match = SHAPE_ERRORS[name]
    with pytest.raises((RuntimeError, IndexError, ValueError, TypeError), match=match):
        fn()
        torch.tpu.synchronize()
    torch.tpu.synchronize()


def test_out_of_range_raises_in_fused_mode():
    with torch_tpu.eager_mode(torch_tpu.EagerMode.DEFER_AND_FUSE):
        with pytest.raises(IndexError, match="out of range"):
            w = torch.randn(4, 3, device=DEV)
            F.embedding(I([[1, 9]]), w * 2).sum().item()
    torch.tpu.synchronize()
    assert torch.ones(2, device=DEV).sum().item() == 2


def test_in_range_index_ops_do_not_sync():
    """Range checks are device-side: no index data is read back to the host."""
    torch.tpu.synchronize()
    w = torch.randn(6, 4, device=DEV)
    i = torch.tensor([0, 5, 2], device=DEV)
    before = torch_tpu.metrics()
    y = F.embedding(i, w).index_select(0, i.clamp(max=2)).gather(1, torch.zeros(3, 1, dtype=torch.long, device=DEV))
    after = torch_tpu.metrics()
    assert after["transfers"]["device_to_host_bytes"] == before["transfers"]["device_to_host_bytes"]
    assert y.cpu().shape == (3, 1)
