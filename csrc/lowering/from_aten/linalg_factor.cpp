// Matrix factorizations as LAPACK custom calls (docs/decisions/linalg.md): cholesky, LU
// (lu_factor, lu, lu_unpack), QR (geqrf, householder_product, ormqr, qr), eigh, svd and
// LDL. Each mirrors PyTorch CPU's implementation (same LAPACK routine on the same matrix),
// so outputs agree with CPU, including the signs of eigen/singular vectors. Backward is
// ATen's autograd formulas over the forwards.
#include <cctype>

#include "lowering/from_aten/linalg_lapack.h"

namespace torch_tpu::lowering {
namespace {

using namespace linalg;

std::vector<Value> cholesky_ex(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "linalg.cholesky", "A", true);
  bool upper = a[1].toBool(), check = a[2].toBool();
  Value x = L.in(A);
  Value info = call(L, Target::Potrf, {x}, 1, {!upper});
  if (check)
    check_info(L, info, "linalg.cholesky_ex: The factorization could not be completed because the input is not "
                        "positive-definite (info > 0 for some matrix).");
  return {call(L, Target::Potrf, {x}, 0, {!upper}), info};
}

std::vector<Value> lu_factor_ex(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "torch.lu_factor");
  TORCH_CHECK(a[1].toBool(), "[", L.op(), "] linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  Value x = L.in(A);
  Value info = call(L, Target::Getrf, {x}, 2);
  if (a[2].toBool())
    check_info(L, info, "torch.linalg.lu_factor_ex: The factorization could not be completed because the input is "
                        "singular (info > 0 for some matrix).");
  return {call(L, Target::Getrf, {x}, 0), call(L, Target::Getrf, {x}, 1), info};
}

// P [.., m, m] with P[r, c] = (r == perm[c]), L [.., m, k] unit lower, U [.., k, n].
std::vector<Value> unpack(Lower& L, Value lu, Value piv, bool data, bool pivots) {
  DType dt = L.g.dtype(lu);
  int64_t m = rows(L, lu), n = cols(L, lu), k = std::min(m, n);
  std::vector<Value> r;
  if (pivots) {
    Value perm = call(L, Target::LuPivotsToPermutation, {piv}, 0, {m});
    ir::Shape s = with(batch_of(L, lu), {m, m});
    int64_t rank = static_cast<int64_t>(s.size());
    Value pc = L.g.broadcast_to(L.g.reshape(perm, with(batch_of(L, perm, 1), {1, m})), s);
    r.push_back(L.g.convert(L.g.compare(ir::Cmp::EQ, L.g.iota(DType::I32, s, rank - 2), pc), dt));
  } else {
    r.push_back(empty(L, dt));
  }
  if (data) {
    Value l = tri(L, slice2(L, lu, m, k), -1, false);
    r.push_back(L.g.binary(OpCode::Add, l, eye(L, L.g.shape(l), dt)));
    r.push_back(tri(L, slice2(L, lu, k, n), 0, true));
  } else {
    r.push_back(empty(L, dt));
    r.push_back(empty(L, dt));
  }
  return r;
}

// Pivots of user data: each must be in [1, m] (LAPACK's 1-based row indices).
void check_pivots(Lower& L, Value piv, int64_t m) {
  Value lo = L.g.compare(ir::Cmp::LT, piv, L.cst_like(1, piv)), hi = L.g.compare(ir::Cmp::GT, piv, L.cst_like(m, piv));
  L.check(any_nonzero(L, L.g.binary(OpCode::Or, lo, hi)),
          "[" + std::string(L.op()) + "] pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive. "
          "Did you use the LU from linalg.lu_factor?");
}

std::vector<Value> lu_unpack(Lower& L, Args a) {
  const at::Tensor &LU = a[0].toTensor(), &P = a[1].toTensor();
  check_matrix(L, LU, "torch.lu_unpack", "LU_data");
  bool data = a[2].toBool(), pivots = a[3].toBool();
  TORCH_CHECK(!pivots || P.scalar_type() == at::kInt, "[", L.op(), "] torch.lu_unpack: LU_pivots is expected to be a "
              "contiguous tensor of torch.int32 dtype; got ", P.scalar_type());
  Value lu = L.in(LU), piv = pivots ? L.in(P) : Value{};
  if (pivots) {
    int64_t k = std::min(LU.size(-2), LU.size(-1));
    TORCH_CHECK(P.dim() >= 1 && P.size(-1) == k && shape_of(P) == with(batch_of(L, lu), {k}), "[", L.op(),
                "] torch.lu_unpack: LU_pivots shape ", P.sizes(), " does not match LU_data ", LU.sizes(),
                "; expected batch dims of LU_data and a last dim of ", k);
    check_pivots(L, piv, LU.size(-2));
  }
  return unpack(L, lu, piv, data, pivots);
}

std::vector<Value> linalg_lu(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "linalg.lu");
  TORCH_CHECK(a[1].toBool(), "[", L.op(), "] linalg.lu_factor: LU without pivoting is not implemented on the CPU");
  Value x = L.in(A);
  return unpack(L, call(L, Target::Getrf, {x}, 0), call(L, Target::Getrf, {x}, 1), true, true);
}

std::vector<Value> geqrf(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "geqrf", "input");
  Value x = L.in(A);
  return {call(L, Target::Geqrf, {x}, 0), call(L, Target::Geqrf, {x}, 1)};
}

std::vector<Value> householder_product(Lower& L, Args a) {
  const at::Tensor &A = a[0].toTensor(), &tau = a[1].toTensor();
  const char* api = "torch.linalg.householder_product";
  check_matrix(L, A, api, "input");
  TORCH_CHECK(A.size(-2) >= A.size(-1), "[", L.op(), "] ", api, ": input.shape[-2] must be greater than or equal to "
              "input.shape[-1]; got ", A.sizes());
  TORCH_CHECK(tau.dim() == A.dim() - 1 && A.size(-1) >= tau.size(-1), "[", L.op(), "] ", api, ": input.shape[-1] "
              "must be greater than or equal to tau.shape[-1] and tau must have one dim less; got ", A.sizes(), " and ",
              tau.sizes());
  TORCH_CHECK(tau.scalar_type() == A.scalar_type(), "[", L.op(), "] ", api, ": tau dtype ", tau.scalar_type(),
              " does not match input dtype ", A.scalar_type());
  Value x = L.in(A), t = L.in(tau);
  TORCH_CHECK(batch_of(L, t, 1) == batch_of(L, x), "[", L.op(), "] ", api, ": Expected batch dimensions of tau to "
              "be equal to input.shape[:-2]; got ", tau.sizes(), " and ", A.sizes());
  return one(call(L, Target::Orgqr, {x, t}, 0));
}

std::vector<Value> ormqr(Lower& L, Args a) {
  const at::Tensor &A = a[0].toTensor(), &tau = a[1].toTensor(), &C = a[2].toTensor();
  bool left = a[3].toBool(), transpose = a[4].toBool();
  check_matrix(L, A, "torch.ormqr", "input");
  check_matrix(L, C, "torch.ormqr", "other");
  int64_t mn = left ? C.size(-2) : C.size(-1);
  TORCH_CHECK(A.size(-2) == mn && tau.dim() == A.dim() - 1 && tau.size(-1) <= A.size(-1) && tau.size(-1) <= mn &&
                  A.scalar_type() == C.scalar_type() && tau.scalar_type() == A.scalar_type(),
              "[", L.op(), "] torch.ormqr: incompatible input ", A.sizes(), ", tau ", tau.sizes(), " and other ",
              C.sizes(), " (left=", left, ")");
  Value x = L.in(A), t = L.in(tau), c = L.in(C);
  TORCH_CHECK(batch_of(L, t, 1) == batch_of(L, x) && batch_of(L, c) == batch_of(L, x), "[", L.op(),
              "] torch.ormqr: batch dimensions of input, tau and other must be equal; got ", A.sizes(), ", ",
              tau.sizes(), ", ", C.sizes());
  return one(call(L, Target::Ormqr, {x, t, c}, 0, {left, transpose}));
}

// PyTorch CPU: geqrf, R = triu of the first k (reduced) or m (complete) rows, Q = orgqr of
// the packed matrix (m x m for complete with m > n; the extra columns become unit vectors).
std::vector<Value> linalg_qr(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "linalg.qr");
  std::string mode(a[1].toStringRef());
  TORCH_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "[", L.op(), "] qr received unrecognized mode '",
              mode, "' but expected one of 'reduced' (default), 'r', or 'complete'");
  Value x = L.in(A);
  DType dt = L.g.dtype(x);
  int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  Value qr = call(L, Target::Geqrf, {x}, 0), tau = call(L, Target::Geqrf, {x}, 1);
  Value R = tri(L, slice2(L, qr, mode == "complete" ? m : k, n), 0, true);
  if (mode == "r") return {empty(L, dt), R};
  int64_t qc = mode == "complete" ? m : k;
  Value q = slice2(L, qr, m, std::min(n, qc));
  if (qc > n) q = L.g.concat({q, L.g.constant(0, dt, with(batch_of(L, x), {m, qc - n}))}, L.g.shape(q).size() - 1);
  return {call(L, Target::Orgqr, {q, tau}, 0), R};
}

std::vector<Value> eigh(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "linalg.eigh", "A", true);
  std::string uplo(a[1].toStringRef());
  char u = uplo.size() == 1 ? static_cast<char>(std::toupper(static_cast<unsigned char>(uplo[0]))) : 0;
  TORCH_CHECK(u == 'U' || u == 'L', "[", L.op(), "] Expected UPLO argument to be 'L' or 'U', but got ", uplo);
  bool v = a[2].toBool();
  Value x = L.in(A);
  std::vector<int64_t> p = {u == 'L', v};
  check_info(L, call(L, Target::Syevd, {x}, 2, p),
             "linalg.eigh: The algorithm failed to converge because the input matrix is ill-conditioned or has too "
             "many repeated eigenvalues.");
  return {call(L, Target::Syevd, {x}, 0, p), v ? call(L, Target::Syevd, {x}, 1, p) : empty(L, L.g.dtype(x))};
}

std::vector<Value> svd(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "linalg.svd");
  bool full = a[1].toBool(), uv = a[2].toBool();
  TORCH_CHECK(a[3].isNone(), "[", L.op(), "] torch.linalg.svd: keyword argument `driver=` is only supported on CUDA "
              "inputs with cuSOLVER backend.");
  Value x = L.in(A);
  std::vector<int64_t> p = {full, uv};
  check_info(L, call(L, Target::Gesdd, {x}, 3, p),
             "linalg.svd: The algorithm failed to converge because the input matrix is ill-conditioned or has too "
             "many repeated singular values.");
  Value s = call(L, Target::Gesdd, {x}, 0, p);
  if (!uv) return {empty(L, L.g.dtype(x)), s, empty(L, L.g.dtype(x))};
  return {call(L, Target::Gesdd, {x}, 1, p), s, call(L, Target::Gesdd, {x}, 2, p)};
}

// PyTorch CPU: LD = tril(A), sytrf('L'); the strict upper triangle stays zero.
std::vector<Value> ldl_factor_ex(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "torch.linalg.ldl_factor_ex", "A", true);
  Value x = L.in(A);
  Value info = call(L, Target::Sytrf, {x}, 2, {1});
  if (a[2].toBool())
    check_info(L, info, "torch.linalg.ldl_factor_ex: The factorization could not be completed (info > 0 for some "
                        "matrix).");
  return {tri(L, call(L, Target::Sytrf, {x}, 0, {1}), 0, false), call(L, Target::Sytrf, {x}, 1, {1}), info};
}

std::vector<Value> ldl_solve(Lower& L, Args a) {
  const at::Tensor &LD = a[0].toTensor(), &P = a[1].toTensor(), &B = a[2].toTensor();
  check_matrix(L, LD, "torch.linalg.ldl_solve", "LD", true);
  check_matrix(L, B, "torch.linalg.ldl_solve", "B");
  TORCH_CHECK(P.scalar_type() == at::kInt && P.dim() == LD.dim() - 1 && P.size(-1) == LD.size(-1), "[", L.op(),
              "] torch.linalg.ldl_solve: pivots must be int32 of shape LD.shape[:-1]; got ", P.scalar_type(),
              P.sizes());
  TORCH_CHECK(B.scalar_type() == LD.scalar_type() && B.size(-2) == LD.size(-1), "[", L.op(),
              "] torch.linalg.ldl_solve: B ", B.sizes(), " ", B.scalar_type(), " does not fit LD ", LD.sizes(), " ",
              LD.scalar_type());
  Value ld = L.in(LD), piv = L.in(P), b = L.in(B);
  broadcast_batch(L, ld, 2, b, 2);
  broadcast_batch(L, piv, 1, b, 2);
  return one(call(L, Target::Sytrs, {ld, piv, b}, 0, {1}));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"linalg_cholesky_ex", cholesky_ex}, {"linalg_cholesky_ex.L", cholesky_ex},
      {"linalg_lu_factor_ex", lu_factor_ex}, {"linalg_lu_factor_ex.out", lu_factor_ex},
      {"linalg_lu", linalg_lu}, {"linalg_lu.out", linalg_lu},
      {"lu_unpack", lu_unpack}, {"lu_unpack.out", lu_unpack},
      {"geqrf", geqrf}, {"geqrf.a", geqrf},
      {"linalg_householder_product", householder_product}, {"linalg_householder_product.out", householder_product},
      {"ormqr", ormqr}, {"ormqr.out", ormqr},
      {"linalg_qr", linalg_qr}, {"linalg_qr.out", linalg_qr},
      {"_linalg_eigh", eigh}, {"_linalg_eigh.eigenvalues", eigh},
      {"_linalg_svd", svd}, {"_linalg_svd.U", svd},
      {"linalg_ldl_factor_ex", ldl_factor_ex}, {"linalg_ldl_factor_ex.out", ldl_factor_ex},
      {"linalg_ldl_solve", ldl_solve}, {"linalg_ldl_solve.out", ldl_solve},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
