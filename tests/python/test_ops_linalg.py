"""Dense linear algebra (LAPACK custom calls + triangular_solve) against PyTorch CPU: forward
and float32/float64 gradients, batched, non-contiguous (transposed views), empty batch,
rectangular shapes, and singular / non-positive-definite inputs (same info, same errors).
CPU links the same LAPACK, so eigen/singular vectors are compared directly (same signs) on
the host runtime. On pjrt they come from XLA's Jacobi eigh, equal to LAPACK's only up to
sign (and a full_matrices complement only up to rotation): there the tests compare the
sign-invariant |vectors| and the orthogonality of a completed basis, as PyTorch's own
OpInfo samples and CUDA tests do (`sign_free`)."""
import os

import pytest
import torch

from op_harness import Input, check, make, modes

precision = torch.tpu.precision
Precision = torch.tpu.Precision
F64 = torch.float64
DTYPES = (torch.float32, F64)
SHAPES = {"single": (4, 4), "batched": (2, 3, 4, 4), "empty": (0, 3, 3)}


PJRT = os.environ.get("TORCH_TPU_RUNTIME") == "pjrt"


def _sign_free_out(out):
    if isinstance(out, torch.return_types.linalg_eigh):
        return out.eigenvalues, out.eigenvectors.abs()
    if isinstance(out, torch.return_types.linalg_svd):
        u, s, vh = out
        k = s.shape[-1]
        res = (u[..., :k].abs(), s, vh[..., :k, :].abs())
        if u.shape[-1] > k or vh.shape[-2] > k:  # the completed basis: orthonormal, any rotation
            res += (u.mT @ u, vh @ vh.mT)
        return res
    return out


def sign_free(fn):
    """fn itself on the host runtime; on pjrt, eigh/svd results made sign-invariant."""
    return (lambda *a: _sign_free_out(fn(*a))) if PJRT else fn


def general(shape, dtype, gen):
    n = shape[-1]
    return make(shape, dtype, gen, -1, 1) + n * torch.eye(n, dtype=dtype) if n == shape[-2] else make(shape, dtype, gen, -1, 1)


def spd(shape, dtype, gen):
    m = make(shape, F64, gen, -1, 1)
    return (m @ m.mT + shape[-1] * torch.eye(shape[-1], dtype=F64)).to(dtype)


def sym(shape, dtype, gen):
    m = make(shape, F64, gen, -1, 1)
    return ((m + m.mT) / 2).to(dtype)


def inp(kind, shape, dtype, seed, noncontig):
    """An Input of `kind` (a maker); noncontig: a transposed view of its transpose."""
    gen = torch.Generator().manual_seed(seed)
    x = kind(shape, dtype, gen)
    if noncontig:
        return Input(x.mT.contiguous(), lambda b: b.mT)
    return Input(x)


def vec_or_mat(shape, k, dtype, seed):
    gen = torch.Generator().manual_seed(seed + 7)
    return Input(make(shape[:-1] + (k,), dtype, gen, -1, 1))


# name -> (fn, kinds of the matrix arguments, extra rhs columns or None, grad)
SQUARE_OPS = {
    "cholesky": (torch.linalg.cholesky, spd),
    "cholesky_upper": (lambda a: torch.linalg.cholesky(a, upper=True), spd),
    "cholesky_ex": (torch.linalg.cholesky_ex, spd),
    "inv": (torch.linalg.inv, general),
    "inv_ex": (torch.linalg.inv_ex, general),
    "det": (torch.linalg.det, general),
    "slogdet": (torch.linalg.slogdet, general),
    "logdet": (lambda a: torch.logdet(a @ a.mT), general),
    "lu_factor": (torch.linalg.lu_factor, general),
    "lu": (torch.linalg.lu, general),
    "eigh": (torch.linalg.eigh, sym),
    "eigh_upper": (lambda a: torch.linalg.eigh(a, UPLO="U"), sym),
    "eigvalsh": (torch.linalg.eigvalsh, sym),
    "svd": (lambda a: torch.linalg.svd(a, full_matrices=False), general),
    "svdvals": (torch.linalg.svdvals, general),
    "matrix_norm_nuc": (lambda a: torch.linalg.matrix_norm(a, "nuc"), general),
    "cond": (torch.linalg.cond, general),
    "pinv": (torch.linalg.pinv, general),
    "matrix_rank": (torch.linalg.matrix_rank, general),
    "qr": (torch.linalg.qr, general),
    "qr_complete": (lambda a: torch.linalg.qr(a, mode="complete"), general),
    "qr_r": (lambda a: torch.linalg.qr(a, mode="r")[1], general),
    "cholesky_inverse": (lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a)), spd),
    "cholesky_inverse_upper": (lambda a: torch.cholesky_inverse(torch.linalg.cholesky(a, upper=True), upper=True), spd),
    "matrix_power_neg": (lambda a: torch.linalg.matrix_power(a, -2), general),
    "ldl_factor": (lambda a: torch.linalg.ldl_factor(a), sym),
}


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contig", "noncontig"])
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("name", list(SQUARE_OPS))
def test_square(name, shape, layout, dtype, mode):
    fn, kind = SQUARE_OPS[name]
    grad = name not in ("matrix_rank", "ldl_factor", "qr_r")  # no derivative (qr_r: CPU raises in backward)
    with precision(Precision.HIGHEST):
        check(sign_free(fn), [inp(kind, SHAPES[shape], dtype, 1, layout == "noncontig")], grad=grad, scale=20,
              mode=mode)


RECT_OPS = {
    "svd": lambda a: torch.linalg.svd(a, full_matrices=False),
    "svd_full": lambda a: torch.linalg.svd(a, full_matrices=True)[1],
    "svd_full_vectors": lambda a: torch.linalg.svd(a.detach(), full_matrices=True),
    "qr": torch.linalg.qr,
    "qr_complete": lambda a: torch.linalg.qr(a.detach(), mode="complete"),  # no derivative for m > n
    "lu": torch.linalg.lu,
    "lu_factor_unpack": lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)),
    "pinv": torch.linalg.pinv,
    "geqrf": lambda a: torch.geqrf(a.detach()),
    "householder_product": lambda a: torch.linalg.householder_product(*torch.geqrf(a.detach())),
}


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5), (4, 0), (0, 4)], ids=str)
@pytest.mark.parametrize("name", list(RECT_OPS))
def test_rectangular(name, shape, dtype, mode):
    with precision(Precision.HIGHEST):
        check(sign_free(RECT_OPS[name]), [inp(general, shape, dtype, 2, False)], scale=20, mode=mode)


SOLVE_OPS = {
    "solve": (torch.linalg.solve, general, 3),
    "solve_vector": (torch.linalg.solve, general, None),
    "solve_right": (lambda a, b: torch.linalg.solve(a, b.mT, left=False), general, 3),
    "lu_solve": (lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b), general, 2),
    "lu_solve_adjoint": (lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True), general, 2),
    "lu_solve_right": (lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b.mT, left=False), general, 2),
    "lu_solve_legacy": (lambda a, b: torch.lu_solve(b, *torch.linalg.lu_factor(a)), general, 2),
    "solve_triangular_upper": (lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), general, 3),
    "solve_triangular_lower_right": (
        lambda a, b: torch.linalg.solve_triangular(a, b.mT, upper=False, left=False), general, 3),
    "solve_triangular_unit": (lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
                              general, 3),
    "triangular_solve": (lambda a, b: torch.triangular_solve(b, a), general, 2),
    "triangular_solve_lower_t": (lambda a, b: torch.triangular_solve(b, a, upper=False, transpose=True), general, 2),
    "cholesky_solve": (lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a)), spd, 2),
    "cholesky_solve_upper": (lambda a, b: torch.cholesky_solve(b, torch.linalg.cholesky(a, upper=True), upper=True),
                             spd, 2),
    "ormqr": (lambda a, b: torch.ormqr(*torch.geqrf(a.detach()), b), general, 2),
    "ormqr_right_t": (lambda a, b: torch.ormqr(*torch.geqrf(a.detach()), b.mT, left=False, transpose=True), general, 2),
    "ldl_solve": (lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a.detach()), b.detach()), sym, 2),
}


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contig", "noncontig"])
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("name", list(SOLVE_OPS))
def test_solve(name, shape, layout, dtype, mode):
    fn, kind, k = SOLVE_OPS[name]
    s = SHAPES[shape]
    a = inp(kind, s, dtype, 3, layout == "noncontig")
    gen = torch.Generator().manual_seed(4)
    b = Input(make(s[:-1] if k is None else s[:-1] + (k,), dtype, gen, -1, 1))
    with precision(Precision.HIGHEST):
        check(fn, [a, b], scale=20, mode=mode)


def test_solve_broadcasts_batch():
    gen = torch.Generator().manual_seed(5)
    a, b = Input(general((3, 4, 4), F64, gen)), Input(make((2, 1, 4, 2), F64, gen))
    check(torch.linalg.solve, [a, b])
    check(lambda x, y: torch.linalg.solve_triangular(x, y, upper=True), [a, b])


def _singular(dtype):
    a = torch.tensor([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]],
                      [[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 4.0]]], dtype=dtype)
    return a


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_singular_and_non_pd_info_match_cpu(dtype):
    a = _singular(dtype)
    t = a.to("tpu")
    for fn in (torch.linalg.inv_ex, torch.linalg.lu_factor_ex, torch.linalg.cholesky_ex,
               lambda x: torch.linalg.cholesky_ex(x, upper=True), torch.linalg.ldl_factor_ex,
               lambda x: torch.linalg.solve_ex(x, x[..., :1])):
        want, got = fn(a), fn(t)
        assert torch.equal(got.info.cpu(), want.info), (got.info, want.info)
        assert got.info.dtype == torch.int32
    assert torch.equal(torch.linalg.det(t).cpu(), torch.linalg.det(a))
    sign, logabs = torch.linalg.slogdet(t)
    torch.testing.assert_close(sign.cpu(), torch.linalg.slogdet(a).sign)
    torch.testing.assert_close(logabs.cpu(), torch.linalg.slogdet(a).logabsdet)


@pytest.mark.parametrize("fn,match", [
    (torch.linalg.inv, "singular"),
    (torch.linalg.cholesky, "positive-definite"),
    (lambda x: torch.linalg.solve(x, x), "singular"),
    (lambda x: torch.linalg.inv_ex(x, check_errors=True), "singular"),
    (lambda x: torch.linalg.cholesky_ex(x, check_errors=True), "positive-definite"),
])
def test_errors_raise_like_cpu(fn, match):
    a = _singular(torch.float32)
    with pytest.raises(RuntimeError, match=match):
        fn(a)
    with pytest.raises(RuntimeError, match=match):
        fn(a.to("tpu"))
        torch.tpu.synchronize()
    # a batched error names the batch on CPU; the device still works afterwards
    x = torch.eye(3, device="tpu")
    assert torch.equal(torch.linalg.inv(x).cpu(), torch.eye(3))


@pytest.mark.parametrize("fn", [
    torch.linalg.inv, torch.linalg.cholesky, torch.linalg.svd, torch.linalg.qr, torch.linalg.det,
    lambda x: torch.linalg.eigh(x, UPLO="X"), lambda x: torch.linalg.qr(x, mode="bad"),
    lambda x: torch.linalg.lu_factor(x, pivot=False), lambda x: torch.linalg.solve(x, x[:2]),
    lambda x: torch.linalg.svd(x, driver="gesvd"), lambda x: torch.linalg.solve_triangular(x, x[0], upper=True),
])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.bfloat16], ids=str)
def test_bad_input_rejected_like_cpu(fn, dtype):
    x = torch.arange(9, dtype=dtype).reshape(3, 3) + torch.eye(3, dtype=dtype) * 10
    try:
        fn(x)
        ok = True
    except Exception:
        ok = False
    if ok:
        check(sign_free(fn), [Input(x)], grad=False, scale=20)
    else:
        with pytest.raises(Exception) as e:
            fn(x.to("tpu"))
            torch.tpu.synchronize()
        assert not isinstance(e.value, (SystemError, MemoryError))


def test_lu_unpack_rejects_bad_pivots():
    lu = torch.eye(3, device="tpu")
    with pytest.raises(RuntimeError, match="pivots"):
        torch.lu_unpack(lu, torch.tensor([0, 2, 3], dtype=torch.int32, device="tpu"))
        torch.tpu.synchronize()


@pytest.mark.parametrize("shape", [(1, 4), (3, 1, 5), (2, 1, 1), (1, 1)])
def test_linalg_lu_of_single_row_matrices(shape):
    # unpack's eye(g.shape(l)) held a shape reference across node additions (a freed shape)
    a = torch.randn(*shape)
    for got, want in zip(torch.linalg.lu(a.to("tpu")), torch.linalg.lu(a)):
        torch.testing.assert_close(got.cpu(), want)
