"""Reductions (sum, mean, prod, amax/amin, max/min with indices, argmax/argmin, all/any,
var/std) against PyTorch CPU: full and per-dim, keepdim, dtype=, forward and backward.
Integer inputs use a small value range, so ties (first-index rule) are exercised."""
import pytest
import torch

from op_harness import ALL, BF16, F32, FLOATS, INTS, NUMERIC, Input, OpSpec, cases, check, check_case, make

RED_VARIANTS = ("contig", "noncontig", "empty")
ALL_VARIANTS = ("contig", "noncontig", "0dim", "empty")
S3 = ((2, 3, 4),)


def red(name, fn, dtypes=ALL, variants=RED_VARIANTS, **kw):
    kw.setdefault("shapes", S3)
    return OpSpec(name, fn, dtypes=dtypes, variants=variants, **kw)


OPS = [
    red("sum", torch.sum, variants=ALL_VARIANTS, tol_scale=4),
    red("sum_dim", lambda x: x.sum(1), tol_scale=4),
    red("sum_dims_keepdim", lambda x: x.sum((0, -1), keepdim=True), tol_scale=4),
    red("sum_dtype_f32", lambda x: x.sum(-1, dtype=torch.float32), tol_scale=4),
    red("sum_empty_dims", lambda x: torch.sum(x, dim=[]), tol_scale=4),
    red("mean", torch.mean, variants=ALL_VARIANTS, tol_scale=4),
    red("mean_dim", lambda x: x.mean(-1), tol_scale=4),
    red("mean_dims_keepdim", lambda x: x.mean((0, 2), keepdim=True), tol_scale=4),
    red("mean_dtype", lambda x: x.mean(1, dtype=torch.float32), NUMERIC, tol_scale=4),
    red("prod", torch.prod, domain=(0.5, 1.5), variants=ALL_VARIANTS, tol_scale=4),
    red("prod_dim", lambda x: x.prod(1), domain=(0.5, 1.5), tol_scale=4),
    red("prod_dim_keepdim", lambda x: x.prod(-1, keepdim=True), domain=(-2, 3), tol_scale=4),
    red("amax", lambda x: x.amax(), variants=ALL_VARIANTS),
    red("amax_dims", lambda x: x.amax((0, 2))),
    red("amin_keepdim", lambda x: x.amin(1, keepdim=True)),
    red("max", torch.max, variants=ALL_VARIANTS),
    red("min", torch.min, variants=ALL_VARIANTS),
    red("max_dim", lambda x: torch.max(x, 1), variants=ALL_VARIANTS[:2]),
    red("max_dim_keepdim", lambda x: torch.max(x, -1, keepdim=True)),
    red("min_dim", lambda x: torch.min(x, 0)),
    red("max_dim_0d", lambda x: torch.max(x, 0), variants=("0dim",)),
    red("argmax", torch.argmax, grad=False, variants=ALL_VARIANTS),
    red("argmax_dim", lambda x: torch.argmax(x, 1), grad=False),
    red("argmin_keepdim", lambda x: torch.argmin(x, -1, keepdim=True), grad=False),
    red("argmax_none_keepdim", lambda x: torch.argmax(x, keepdim=True), grad=False),
    red("all", torch.all, grad=False, variants=ALL_VARIANTS, domain=(-1, 3)),
    red("all_dim", lambda x: torch.all(x, 1), grad=False, domain=(-1, 3)),
    red("all_dims", lambda x: torch.all(x, dim=(0, 2), keepdim=True), grad=False, domain=(-1, 3)),
    red("any", torch.any, grad=False, variants=ALL_VARIANTS, domain=(-1, 1)),
    red("any_dim", lambda x: torch.any(x, -1), grad=False, domain=(-1, 1)),
    red("var", torch.var, FLOATS, variants=ALL_VARIANTS, tol_scale=4),
    red("var_dim", lambda x: torch.var(x, 1), FLOATS, tol_scale=4),
    red("var_unbiased0_keepdim", lambda x: torch.var(x, (0, 2), correction=0, keepdim=True), FLOATS, tol_scale=4),
    red("std", torch.std, FLOATS, variants=ALL_VARIANTS, tol_scale=4),
    red("std_dim", lambda x: torch.std(x, -1, correction=2), FLOATS, tol_scale=4),
    red("var_mean", lambda x: torch.var_mean(x, 1), FLOATS, tol_scale=4),
    red("norm_via_sum", lambda x: (x * x).sum(-1).sqrt(), FLOATS, tol_scale=4),
    red("logsumexp", lambda x: torch.logsumexp(x, 1), FLOATS, tol_scale=4),
]


@pytest.mark.parametrize("spec,dtype,variant,mode", cases(OPS))
def test_op(spec, dtype, variant, mode):
    check_case(spec, dtype, variant, mode)


def _out(a, dtype=None):
    return torch.empty(0, dtype=dtype or a.dtype, device=a.device)


OUT = [
    ("sum_out", lambda a: torch.sum(a, 1, out=_out(a)), FLOATS + (torch.int64,)),
    ("mean_out", lambda a: torch.mean(a, (0, 1), out=_out(a)), FLOATS),
    ("amax_out", lambda a: torch.amax(a, 2, out=_out(a)), NUMERIC),
    ("argmax_out", lambda a: torch.argmax(a, 1, out=_out(a, torch.int64)), NUMERIC),
    ("max_dim_out", lambda a: torch.max(a, 1, out=(_out(a), _out(a, torch.int64))), NUMERIC),
    ("prod_out", lambda a: torch.prod(a, 1, out=_out(a)), FLOATS),
    ("any_out", lambda a: torch.any(a, 1, out=_out(a, torch.bool)), ALL),
    ("std_out", lambda a: torch.std(a, 1, out=_out(a)), FLOATS),
]


@pytest.mark.parametrize("name,fn,dtype", [pytest.param(n, f, d, id=f"{n}-{str(d)[6:]}")
                                           for n, f, ds in OUT for d in ds])
def test_out(name, fn, dtype):
    gen = torch.Generator().manual_seed(3)
    check(fn, [Input(make((2, 3, 4), dtype, gen))], grad=False, scale=4)


def test_reduce_errors_match_cpu():
    x = torch.empty(0, 3, device="tpu")
    with pytest.raises(RuntimeError):
        torch.amax(x, 0)
    with pytest.raises(RuntimeError):
        torch.max(x)
    with pytest.raises(RuntimeError):
        torch.argmax(x)
    with pytest.raises(RuntimeError):
        torch.mean(torch.ones(3, dtype=torch.int64, device="tpu"))
    with pytest.raises(IndexError):
        torch.ones(2, 3, device="tpu").sum(5)


def test_large_sum_accuracy():
    x = torch.rand(4096, generator=torch.Generator().manual_seed(0))
    check(torch.sum, [Input(x)], grad=True, scale=20)
    check(torch.sum, [Input(x.to(torch.bfloat16))], grad=True, scale=4)


def test_var_std_of_an_empty_reduction_is_nan_for_any_correction():
    """var/std/var_mean over zero elements are NaN as on CPU, also with correction <= 0
    (found by the fuzzer: correction=-1 gave 0 / 1 = 0)."""
    x = torch.zeros(0, 3)
    for kw in ({}, {"correction": -1}, {"correction": 0}, {"dim": 0, "correction": -1}):
        for f in (torch.var, torch.std, torch.var_mean):
            torch.testing.assert_close(_cpu(f(x.to("tpu"), **kw)), f(x, **kw), equal_nan=True)


def _cpu(r):
    return tuple(v.cpu() for v in r) if isinstance(r, tuple) else r.cpu()
