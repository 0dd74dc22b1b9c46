"""Long-tail ops against PyTorch CPU, forward and backward: scatter reductions (scatter_reduce,
scatter(reduce=), index_reduce) with duplicate indices and include_self, put / take, roll,
median / nanmedian / kthvalue, cdist / pdist, addbmm, shrink backward, replication padding backward, int32 gather/scatter indices, the
torch.special orthogonal polynomials and airy_ai, cummax / cummin / logcumsumexp, searchsorted / bucketize / isin,
repeat_interleave, nonzero_static, masked_scatter, histc, bincount, and error parity for bad arguments."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu  # noqa: F401
from op_harness import BF16, F32, FLOATS, INTS, Input, OpSpec, cases, check, check_case, make

DEV = "tpu"
I32 = torch.int32


def idx(values, dtype=torch.long):
    return Input(torch.as_tensor(values, dtype=dtype))


def inputs(*shapes_or_inputs, low=-3.0, high=3.0):
    def mk(variant, dtype, gen):
        return [Input(make(s, dtype, gen, low, high)) if isinstance(s, tuple) else s for s in shapes_or_inputs]
    return mk


def row(name, fn, *args, dtypes=FLOATS, grad=True, low=-3.0, high=3.0, **kw):
    if name.startswith(("cdist", "pdist")):
        dtypes = (F32,)  # CPU implements them for float32/float64 only (parity: bf16 raises)
    return OpSpec(name, fn, dtypes=dtypes, grad=grad, variants=("contig",), make_inputs=inputs(*args, low=low, high=high), **kw)


NUM = (F32,) + INTS
DUP0 = [[0, 1, 2, 0], [2, 2, 0, 1], [0, 1, 2, 2]]  # duplicates along dim 0 of a (3, 4) self

SCATTER_REDUCE = [
    row(f"scatter_reduce_{r}_{'self' if inc else 'noself'}",
        lambda a, i, s, r=r, inc=inc: a.scatter_reduce(0, i, s, r, include_self=inc),
        (3, 4), idx(DUP0), (3, 4), dtypes=NUM if r != "prod" else (F32, torch.int64), grad=True)
    for r in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)
] + [
    row("scatter_reduce_dim1_small_src", lambda a, i, s: a.scatter_reduce(1, i, s, "amax"), (3, 5), idx([[4, 4], [0, 1]]),
        (2, 3), dtypes=NUM, grad=False),  # CPU backward rejects src larger than index
    row("scatter_reduce_inplace_int32_index", lambda a, i, s: (a * 1).scatter_reduce_(0, i.int(), s, "mean", include_self=False),
        (3, 4), idx(DUP0), (3, 4), dtypes=NUM),
    row("scatter_reduce_nan_amax", lambda a, i, s: a.scatter_reduce(0, i, s.masked_fill(s > 2, float("nan")), "amax"), (3, 4),
        idx(DUP0), (3, 4), grad=False),
    row("scatter_add_reduce", lambda a, i, s: a.scatter(0, i, s, reduce="add"), (3, 4), idx(DUP0), (3, 4), dtypes=NUM, grad=False),
    row("scatter_multiply_reduce", lambda a, i, s: a.scatter(0, i, s, reduce="multiply"), (3, 4), idx(DUP0), (3, 4),
        dtypes=NUM, grad=False),
    row("scatter_value_multiply", lambda a, i: a.scatter(1, i, 2.5, reduce="multiply"), (3, 4), idx([[0, 0], [3, 1], [2, 2]]),
        grad=False),
] + [
    row(f"index_reduce_{r}_{'self' if inc else 'noself'}",
        lambda a, i, s, r=r, inc=inc: a.index_reduce(1, i, s, r, include_self=inc),
        (2, 4, 3), idx([3, 0, 3, 3, 1]), (2, 5, 3), dtypes=NUM if r != "prod" else (F32, torch.int64))
    for r in ("prod", "mean", "amax", "amin") for inc in (True, False)
]

MISC = [
    row("gather_empty_uint8_index", lambda a, i: a.gather(0, i), (5,), idx([], torch.uint8), dtypes=NUM),
    row("gather_int32_index", lambda a, i: a.gather(1, i), (3, 4), idx([[0, 3], [1, 1], [3, 2]], I32), dtypes=NUM),
    row("scatter_int32_index", lambda a, i, s: a.scatter(1, i, s), (3, 4), idx([[0, 3], [1, 2], [3, 2]], I32), (3, 2)),
    row("scatter_add_int32_index", lambda a, i, s: a.scatter_add(0, i, s), (3, 4), idx(DUP0, I32), (3, 4)),
    row("put", lambda a, i, s: a.put(i, s), (3, 4), idx([[0, 11], [-1, 5]]), (4,), dtypes=NUM),
    row("put_accumulate", lambda a, i, s: a.put(i, s, accumulate=True), (3, 4), idx([0, 11, 0, -12, 3]), (5,), dtypes=NUM),
    row("put_inplace", lambda a, i, s: (a * 1).put_(i, s), (2, 3), idx([1, 4]), (2,)),
    row("take", lambda a, i: a.take(i), (3, 4), idx([[0, 11, 0], [-1, 5, 5]]), dtypes=NUM),
    row("roll_1d", lambda a: a.roll(3), (7,), dtypes=NUM),
    row("roll_flat_2d", lambda a: a.roll(-5), (3, 4), dtypes=NUM),
    row("roll_multi", lambda a: a.roll((1, -2, 7), (0, 2, 1)), (2, 3, 4), dtypes=NUM + (torch.bool,)),
    row("roll_zero_and_full", lambda a: a.roll((0, 4), (0, 1)), (3, 4)),
    row("addbmm", lambda s, a, b: torch.addbmm(s, a, b), (3, 5), (4, 3, 2), (4, 2, 5)),
    row("addbmm_alpha_beta_bcast", lambda s, a, b: torch.addbmm(s, a, b, beta=0.5, alpha=-2.0), (5,), (2, 3, 4), (2, 4, 5)),
    row("addbmm_beta0", lambda s, a, b: torch.addbmm(s, a, b, beta=0), (3, 5), (1, 3, 2), (1, 2, 5)),
    row("addbmm_inplace", lambda s, a, b: (s * 1).addbmm_(a, b), (3, 5), (2, 3, 2), (2, 2, 5)),
    row("softshrink", lambda a: F.softshrink(a, 0.7), (4, 5)),
    row("hardshrink", lambda a: F.hardshrink(a, 1.1), (4, 5)),
    row("pad_replicate_1d", lambda a: F.pad(a, (2, 3), mode="replicate"), (2, 3, 4)),
    row("pad_replicate_2d", lambda a: F.pad(a, (1, 2, 3, 0), mode="replicate"), (2, 3, 4)),
    row("pad_replicate_3d", lambda a: F.pad(a, (1, 1, 0, 2, 2, 1), mode="replicate"), (1, 2, 3, 2, 3)),
    row("pad_replicate_negative", lambda a: F.pad(a, (-1, 2, 1, -2), mode="replicate"), (2, 4, 5)),
    row("add_bool_alpha_false", lambda a, b: torch.add(a > 0, b > 0, alpha=False), (3, 4), (3, 4), grad=False),
    row("add_bool_alpha_true", lambda a, b: torch.add(a > 0, b > 0, alpha=True), (3, 4), (3, 4), grad=False),
]

POLYS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
         "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
         "legendre_polynomial_p"]
N_VALUES = Input(torch.tensor([[0.0, 1.0, 2.0, 3.0, 5.0, 9.0], [12.0, 20.0, -1.0, 4.5, 7.0, 1.0]]))

SPECIAL = [
    row(f"special_{p}", lambda x, n, p=p: getattr(torch.special, p)(x, n.to(x.dtype)), (2, 6), N_VALUES,
        dtypes=(F32, torch.float64), grad=False, low=-1.2, high=1.2, tol_scale=10)
    for p in POLYS
] + [
    row(f"special_{p}_int_x_scalar_n", lambda x, p=p: getattr(torch.special, p)(x, 3), (2, 6), dtypes=(torch.int64, torch.int8),
        grad=False)
    for p in POLYS
] + [
    row("special_airy_ai", lambda x: torch.special.airy_ai(x), (4, 6), dtypes=(F32, torch.float64), grad=False, low=-12.0,
        high=12.0),
    row("special_airy_ai_int", lambda x: torch.special.airy_ai(x), (4, 6), dtypes=(torch.int32,), grad=False),
]

def with_nans(a):
    return a.masked_fill(a > 2, float("nan"))


ORDER = [
    row("median_all", lambda a: a.median(), (3, 5), dtypes=NUM),
    row("median_all_even", lambda a: a.median(), (4, 4)),
    row("median_dim", lambda a: a.median(1), (3, 6), dtypes=(F32,)),
    row("median_dim_keepdim", lambda a: a.median(0, keepdim=True), (5, 3)),
    row("median_nan", lambda a: with_nans(a).median(1), (4, 7), grad=False),
    row("median_all_nan", lambda a: with_nans(a).median(), (4, 7), grad=False),
    row("nanmedian_dim", lambda a: with_nans(a).nanmedian(1), (4, 7), grad=False),
    row("nanmedian_all", lambda a: with_nans(a).nanmedian(), (4, 7), grad=False),
    row("nanmedian_all_nan_row", lambda a: torch.cat([a, torch.full_like(a[:1], float("nan"))]).nanmedian(1), (2, 3),
        grad=False),
    row("kthvalue", lambda a: a.kthvalue(2, 1), (3, 6)),
    row("kthvalue_keepdim_dim0", lambda a: a.kthvalue(5, 0, keepdim=True), (5, 3)),
    row("median_0dim", lambda a: a.sum().median(0), (3,)),
]

DIST = [
    row(f"cdist_p{p}", lambda a, b, p=p: torch.cdist(a, b, p=p), (2, 4, 3), (2, 5, 3), tol_scale=10)
    for p in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf"))
] + [
    row("cdist_bcast_batch", lambda a, b: torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"), (4, 3), (2, 5, 3),
        tol_scale=10),
    row("cdist_dup_rows", lambda a: torch.cdist(a, a), (4, 3)),
    row("pdist_p2", lambda a: F.pdist(a), (5, 3), tol_scale=10),
    row("pdist_p1", lambda a: F.pdist(a, p=1), (5, 3)),
    row("pdist_pinf", lambda a: F.pdist(a, p=float("inf")), (5, 3)),
    row("pdist_p3", lambda a: F.pdist(a, p=3), (4, 2), tol_scale=10),
]

SORTED_B = Input(torch.tensor([-2.0, -1.0, -1.0, 0.0, 0.5, 1.0, 1.0, 1.0, 2.5]))

SCANS_SEARCH = [
    row("cummax_dim1", lambda a: torch.cummax(a, 1), (4, 9), dtypes=NUM),
    row("cummin_dim0", lambda a: torch.cummin(a, 0), (9, 3), dtypes=NUM),
    row("cummax_ties_int", lambda a: torch.cummax(a, 1), (3, 17), dtypes=INTS, grad=False, low=0, high=3),
    row("cummin_nan", lambda a: torch.cummin(with_nans(a), 1), (4, 9), grad=False),
    row("cummax_bool", lambda a: torch.cummax(a > 0, 1), (4, 6), grad=False, dtypes=(F32,)),
    row("logcumsumexp", lambda a: torch.logcumsumexp(a, 1), (4, 11)),
    row("logcumsumexp_inf", lambda a: torch.logcumsumexp(a.masked_fill(a < -1, float("-inf")), 0), (7, 3), grad=False),
    row("searchsorted_left", lambda b, v: torch.searchsorted(b.to(v.dtype), v), SORTED_B, (3, 5), grad=False),
    row("searchsorted_right_int32", lambda b, v: torch.searchsorted(b.to(v.dtype), v, right=True, out_int32=True), SORTED_B,
        (3, 5), grad=False),
    row("searchsorted_nd_side_sorter", lambda b, v: torch.searchsorted(b, v, side="right", sorter=b.argsort(1)), (3, 6),
        (3, 4), grad=False, dtypes=(F32,)),
    row("bucketize", lambda b, v: torch.bucketize(v, b.to(v.dtype), right=True), SORTED_B, (2, 7), grad=False),
    row("isin", lambda a, b: torch.isin(a, b), (4, 5), (7,), grad=False, dtypes=NUM),
    row("repeat_interleave_tensor", lambda a: a.repeat_interleave(torch.tensor([2, 0, 1, 3])), (4, 3), dtypes=NUM),
    row("repeat_interleave_output_size",
        lambda a: a.repeat_interleave(torch.tensor([1, 3, 2]).to(a.device), dim=1, output_size=6), (2, 3)),
    row("nonzero_static", lambda a: torch.nonzero_static(a > 0, size=7), (3, 4), grad=False, dtypes=NUM),
    row("nonzero_static_short", lambda a: torch.nonzero_static(a, size=2, fill_value=-5), (2, 3, 2), grad=False, dtypes=NUM),
    row("masked_scatter", lambda a, s: a.masked_scatter(a > 0, s), (3, 5), (20,), dtypes=NUM),
    row("masked_scatter_bcast_mask", lambda a, s: a.masked_scatter(a[0] > 0, s), (3, 5), (4, 5)),
    row("masked_select_bwd", lambda a: a.masked_select(a > 0), (4, 5)),
    row("histc", lambda a: torch.histc(a, bins=7, min=-2, max=2), (5, 8), grad=False, dtypes=(F32,)),
    row("histc_data_range", lambda a: torch.histc(a, bins=10), (40,), grad=False, dtypes=(F32,)),
    row("histc_const", lambda a: torch.histc(a * 0 + 1, bins=4), (6,), grad=False, dtypes=(F32,)),
    row("bincount", lambda a: torch.bincount(a.abs()), (20,), grad=False, dtypes=INTS),
    row("bincount_weights_minlength", lambda a, w: torch.bincount(a.abs().long(), w, minlength=9), (12,), (12,), grad=False,
        dtypes=(F32, torch.float64)),
]

ALL_OPS = SCATTER_REDUCE + MISC + SPECIAL + ORDER + DIST + SCANS_SEARCH


@pytest.mark.parametrize("spec,dtype,variant,mode", cases(ALL_OPS))
def test_op(spec, dtype, variant, mode):
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):  # addbmm, cdist: fp32-faithful products
        check_case(spec, dtype, variant, mode)


def test_cdist_bf16_raises_like_cpu():
    a = torch.randn(3, 2).bfloat16()
    with pytest.raises(NotImplementedError):
        torch.cdist(a, a)
    with pytest.raises(NotImplementedError):
        torch.cdist(a.to(DEV), a.to(DEV))


def test_native_dropout_backward_int_grad_promotes_to_float():
    g = torch.arange(12).reshape(3, 4)
    m = torch.rand(3, 4, generator=torch.Generator().manual_seed(0)) > 0.5
    want = torch.ops.aten.native_dropout_backward(g, m, 2.0)
    got = torch.ops.aten.native_dropout_backward(g.to(DEV), m.to(DEV), 2.0)
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), want)


def test_searchsorted_cummax_bad_arguments_raise_like_cpu():
    for fn in (lambda b, v: torch.searchsorted(b, v, side="left", right=True),
               lambda b, v: torch.searchsorted(b.reshape(2, 3), v),
               lambda b, v: torch.bincount(v.long() - 5),
               lambda b, v: torch.repeat_interleave(torch.tensor([1, -1], device=b.device)),
               lambda b, v: torch.histc(b, bins=3, min=2, max=1)):
        b, v = torch.arange(6.0), torch.arange(4.0)
        with pytest.raises(RuntimeError):
            fn(b, v)
        with pytest.raises(RuntimeError):
            fn(b.to(DEV), v.to(DEV))
            torch.tpu.synchronize()


@pytest.mark.parametrize("fn", [
    lambda a, i, s: a.scatter_reduce(0, i, s, "add"),                      # not a scatter_reduce reduction
    lambda a, i, s: a.scatter(0, i, s, reduce="mean"),                      # legacy reduce: add / multiply only
    lambda a, i, s: a.index_reduce(0, i[0], s, "sum"),                      # index_reduce has no sum
    lambda a, i, s: a.scatter_reduce(0, i.float(), s, "amax"),              # float index
    lambda a, i, s: a.scatter_reduce(0, i, s.double(), "amax"),             # src dtype differs
    lambda a, i, s: a.put(i[0], s),                                         # index and source sizes differ
    lambda a, i, s: a.roll((1, 2), (0,)),                                   # shifts and dims differ
    lambda a, i, s: torch.addbmm(a, s[None], s[None]),                      # 3x4 @ 3x4
])
def test_bad_arguments_raise_like_cpu(fn):
    a, s = torch.randn(3, 4), torch.randn(3, 4)
    i = torch.tensor([[0, 1, 2, 0], [2, 2, 0, 1], [0, 1, 2, 2]])
    with pytest.raises(Exception):
        fn(a, i, s)
    with pytest.raises(Exception) as info:
        fn(a.to(DEV), i.to(DEV), s.to(DEV))
        torch.tpu.synchronize()
    assert not isinstance(info.value, (SystemError, MemoryError))


def test_scatter_reduce_out_of_range_index_raises_at_sync():
    a = torch.zeros(3, device=DEV)
    with pytest.raises(RuntimeError, match="out of bounds"):
        a.scatter_reduce(0, torch.tensor([0, 3], device=DEV), torch.ones(2, device=DEV), "amax")
        torch.tpu.synchronize()


def test_put_out_of_range_index_raises_at_sync():
    a = torch.zeros(2, 2, device=DEV)
    with pytest.raises(IndexError, match="out of range"):  # IndexError, as CPU
        a.put_(torch.tensor([4], device=DEV), torch.ones(1, device=DEV))
        torch.tpu.synchronize()


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("consecutive", [False, True])
def test_unique_matches_cpu(dim, consecutive):
    """torch.unique / unique_consecutive (values, inverse, counts) vs CPU, for elements and
    along dims, ints with repeats, floats with NaNs (each NaN its own value), bools."""
    torch.manual_seed(0)
    xs = [torch.randint(0, 3, (4, 5, 2)), torch.tensor([[2.0, float("nan"), 1.0], [2.0, float("nan"), 1.0]]),
          torch.tensor([[True, False], [True, True], [True, False]])]
    for x in xs:
        if consecutive:
            ref = torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)
            got = torch.unique_consecutive(x.to("tpu"), return_inverse=True, return_counts=True, dim=dim)
        else:
            ref = torch.unique(x, sorted=True, return_inverse=True, return_counts=True, dim=dim)
            got = torch.unique(x.to("tpu"), sorted=True, return_inverse=True, return_counts=True, dim=dim)
        for r, g in zip(ref, got):
            torch.testing.assert_close(g.cpu(), r, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("start,end,steps", [(-2.5, 10.3, 50), (0.7, 9.9, 50), (3, 200.6, 17), (5, 9, 1), (1.5, 2, 0), (9, -4, 6)])
def test_linspace_integer_dtype_matches_cpu(start, end, steps):
    """Integer linspace truncates start/end first and steps from both ends in double, as CPU."""
    for dt in (torch.int64, torch.int32):
        ref = torch.linspace(start, end, steps, dtype=dt)
        torch.testing.assert_close(torch.linspace(start, end, steps, dtype=dt, device="tpu").cpu(), ref, rtol=0, atol=0)
        out = torch.empty(0, dtype=dt, device="tpu")
        torch.linspace(start, end, steps, out=out)
        torch.testing.assert_close(out.cpu(), ref, rtol=0, atol=0)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, float("inf")])
def test_cdist_nonfinite_like_cpu(p):
    """NaN/Inf differences as CPU's kernels treat them (found by the fuzzer): p=0 counts a NaN
    difference as NaN, p=inf skips it (std::max from 0)."""
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([[[nan, 1.0, 2.0], [inf, 1.0, 2.0], [0.0, 0.0, 0.0], [-inf, 3.0, -1.0]]])
    b = torch.tensor([[[0.0, 1.0, 2.0], [inf, 1.0, 2.0], [nan, nan, nan]]])
    torch.testing.assert_close(torch.cdist(a.to("tpu"), b.to("tpu"), p=p).cpu(), torch.cdist(a, b, p=p), equal_nan=True)


def test_bincount_of_an_empty_input_is_int64_even_with_weights():
    """CPU and CUDA return int64 zeros for an empty input, whatever the weights' dtype."""
    for w in (None, torch.zeros(0), torch.zeros(0, dtype=torch.float64)):
        for minlength in (0, 3):
            x = torch.zeros(0, dtype=torch.int64)
            e = torch.bincount(x, w, minlength)
            a = torch.bincount(x.to("tpu"), None if w is None else w.to("tpu"), minlength).cpu()
            assert a.dtype == e.dtype and torch.equal(a, e)
