// Solves, inverses and determinants over the LAPACK factorizations and the IR's
// triangular_solve: solve_ex, inv_ex, lu_solve, det, slogdet, triangular_solve,
// solve_triangular, cholesky_solve, cholesky_inverse. The LU factored is PyTorch CPU's
// (2.14): A for solve/inv, A^T for det/slogdet of a contiguous A (ATen's backward formulas
// read that choice back from A.is_contiguous()).
#include "lowering/from_aten/linalg_lapack.h"

namespace torch_tpu::lowering {
namespace {

using namespace linalg;

Value tsolve(Lower& L, Value a, Value b, bool left, bool lower, bool unit, bool transpose) {
  ir::Attrs at;
  at.dims = {left, lower, unit, transpose ? 1 : 0};
  return L.g.op(OpCode::TriangularSolve, {a, b}, at);
}

// NumPy-style vector right-hand side of linalg.solve (PyTorch's linalg_solve_is_vector_rhs).
bool vector_rhs(const at::Tensor& A, const at::Tensor& B) {
  auto batch = A.sizes().slice(0, A.dim() - 1);
  return B.dim() == 1 || (A.dim() - 1 == B.dim() && B.sizes() == batch);
}

// {X, LU, pivots, info} of A X = B (left) or X A = B.
std::vector<Value> solve(Lower& L, const at::Tensor& A, const at::Tensor& B, bool left, bool check, const char* api) {
  check_matrix(L, A, api, "A", true);
  TORCH_CHECK(B.scalar_type() == A.scalar_type(), "[", L.op(), "] ", api, ": Expected A and B to have the same dtype, "
              "but found A of type ", A.scalar_type(), " and B of type ", B.scalar_type(), " instead");
  bool vec = vector_rhs(A, B);
  TORCH_CHECK(left || !vec, "[", L.op(), "] ", api, ": Vector broadcasting of the left hand side is not supported "
              "for left=False. In this case linalg.solve is equivalent to B / A.squeeze(-1)");
  Value a = L.in(A), b = L.in(B);
  if (vec) b = L.g.reshape(b, with(shape_of(B), {1}));
  TORCH_CHECK(L.g.shape(b).size() >= 2 && (left ? rows(L, b) == A.size(-2) : cols(L, b) == A.size(-1)), "[", L.op(),
              "] ", api, ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B", " (",
              A.size(-2), "x", A.size(-1), " and ", B.sizes(), ")");
  Value lu = call(L, Target::Getrf, {a}, 0), piv = call(L, Target::Getrf, {a}, 1), info = call(L, Target::Getrf, {a}, 2);
  if (check)
    check_info(L, info, std::string(api) + ": The solver failed because the input matrix is singular.");
  Value x = lu_solve(L, lu, piv, b, left, false);
  if (vec) x = L.g.reshape(x, batch_of(L, x, 1));
  return {x, lu, piv, info};
}

std::vector<Value> solve_ex(Lower& L, Args a) {
  return solve(L, a[0].toTensor(), a[1].toTensor(), a[2].toBool(), a[3].toBool(), "linalg.solve");
}

// PyTorch: inverse = solve(A, I).
std::vector<Value> inv_ex(Lower& L, Args a) {
  const at::Tensor& A = a[0].toTensor();
  check_matrix(L, A, "linalg.inv", "A", true);
  Value x = L.in(A);
  Value info = call(L, Target::Getrf, {x}, 2);
  if (a[1].toBool()) check_info(L, info, "linalg.inv_ex: The matrix is singular, it could not be inverted.");
  Value id = eye(L, shape_of(A), L.g.dtype(x));
  return {lu_solve(L, call(L, Target::Getrf, {x}, 0), call(L, Target::Getrf, {x}, 1), id, true, false), info};
}

std::vector<Value> linalg_lu_solve(Lower& L, Args a) {
  const at::Tensor &LU = a[0].toTensor(), &P = a[1].toTensor(), &B = a[2].toTensor();
  bool left = a[3].toBool(), adjoint = a[4].toBool();
  const char* api = "torch.linalg.lu_solve";
  check_matrix(L, LU, api, "LU", true);
  check_matrix(L, B, api, "B");
  TORCH_CHECK(B.scalar_type() == LU.scalar_type(), "[", L.op(), "] ", api, ": Expected LU and B to have the same dtype, "
              "but found LU of type ", LU.scalar_type(), " and B of type ", B.scalar_type(), " instead");
  TORCH_CHECK(P.scalar_type() == at::kInt, "[", L.op(), "] ", api, ": pivots should be a Tensor of scalar type "
              "torch.int32; got ", P.scalar_type());
  TORCH_CHECK(P.dim() == LU.dim() - 1 && P.size(-1) == LU.size(-1) &&
                  P.sizes().slice(0, P.dim() - 1) == LU.sizes().slice(0, LU.dim() - 2),
              "[", L.op(), "] ", api, ": Expected LU.shape[:-1] and pivots.shape to be the same; got ", LU.sizes(),
              " and ", P.sizes());
  TORCH_CHECK(left ? LU.size(-1) == B.size(-2) : LU.size(-1) == B.size(-1), "[", L.op(), "] ", api,
              ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B", " (", LU.size(-2), "x",
              LU.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  Value piv = L.in(P);
  Value bad = L.g.binary(OpCode::Or, L.g.compare(ir::Cmp::LT, piv, L.cst_like(1, piv)),
                         L.g.compare(ir::Cmp::GT, piv, L.cst_like(LU.size(-1), piv)));
  L.check(any_nonzero(L, bad), "[" + std::string(L.op()) + "] " + api + ": pivots must be between 1 and LU.size(-1)");
  return one(lu_solve(L, L.in(LU), piv, L.in(B), left, adjoint));
}

// det = det(P) * prod(diag(U)) from getrf of A^T (contiguous A) or A, as PyTorch CPU.
std::vector<Value> lu_of(Lower& L, const at::Tensor& A, const char* api) {
  check_matrix(L, A, api, "A", true);
  Value x = L.in(A);
  Value f = A.is_contiguous() ? mT(L, x) : x;
  return {call(L, Target::Getrf, {f}, 0), call(L, Target::Getrf, {f}, 1)};
}

std::vector<Value> det(Lower& L, Args a) {
  auto lu = lu_of(L, a[0].toTensor(), "linalg.det");
  DType dt = L.g.dtype(lu[0]);
  int64_t r = static_cast<int64_t>(L.g.shape(lu[0]).size());
  Value d = L.g.binary(OpCode::Mul, det_p(L, lu[1], dt), L.g.reduce(diagonal(L, lu[0]), ir::Reducer::Prod, {r - 2}));
  return {d, lu[0], lu[1]};
}

std::vector<Value> slogdet(Lower& L, Args a) {
  auto lu = lu_of(L, a[0].toTensor(), "linalg.slogdet");
  DType dt = L.g.dtype(lu[0]);
  int64_t r = static_cast<int64_t>(L.g.shape(lu[0]).size());
  Value dg = diagonal(L, lu[0]);
  Value sign = L.g.binary(OpCode::Mul, L.g.reduce(L.g.unary(OpCode::Sign, dg), ir::Reducer::Prod, {r - 2}),
                          det_p(L, lu[1], dt));
  Value logabs = L.g.reduce(L.g.unary(OpCode::Log, L.g.unary(OpCode::Abs, dg)), ir::Reducer::Sum, {r - 2});
  return {sign, logabs, lu[0], lu[1]};
}

// Checks and batch-broadcasts (B, A) of a triangular solve; A is square.
std::pair<Value, Value> tri_operands(Lower& L, const at::Tensor& A, const at::Tensor& B, bool left, const char* api) {
  check_matrix(L, A, api, "A", true);
  check_matrix(L, B, api, "B");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), "[", L.op(), "] ", api, ": Expected A and B to have the same dtype; "
              "got ", A.scalar_type(), " and ", B.scalar_type());
  TORCH_CHECK(left ? A.size(-1) == B.size(-2) : A.size(-1) == B.size(-1), "[", L.op(), "] ", api,
              ": Incompatible shapes of A and B for the equation ", left ? "AX = B" : "XA = B", " (", A.size(-2), "x",
              A.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  Value a = L.in(A), b = L.in(B);
  broadcast_batch(L, a, 2, b, 2);
  return {a, b};
}

// triangular_solve(b, A, upper, transpose, unitriangular) -> (X, A broadcast).
std::vector<Value> triangular_solve(Lower& L, Args a) {
  auto [A, b] = tri_operands(L, a[1].toTensor(), a[0].toTensor(), true, "torch.triangular_solve");
  return {tsolve(L, A, b, true, !a[2].toBool(), a[4].toBool(), a[3].toBool()), A};
}

std::vector<Value> solve_triangular(Lower& L, Args a) {
  bool upper = a[2].toBool(), left = a[3].toBool(), unit = a[4].toBool();
  auto [A, b] = tri_operands(L, a[0].toTensor(), a[1].toTensor(), left, "linalg.solve_triangular");
  return one(tsolve(L, A, b, left, !upper, unit, false));
}

// A = L L^T (lower) or U^T U: two triangular solves.
std::vector<Value> cholesky_solve_helper(Lower& L, Args a) {
  bool upper = a[2].toBool();
  auto [f, b] = tri_operands(L, a[1].toTensor(), a[0].toTensor(), true, "torch.cholesky_solve");
  Value y = tsolve(L, f, b, true, !upper, false, upper);
  return one(tsolve(L, f, y, true, !upper, false, !upper));
}

std::vector<Value> cholesky_inverse(Lower& L, Args a) {
  const at::Tensor& F = a[0].toTensor();
  bool upper = a[1].toBool();
  check_matrix(L, F, "cholesky_inverse", "input", true);
  Value f = L.in(F);
  Value y = tsolve(L, f, eye(L, shape_of(F), L.g.dtype(f)), true, !upper, false, upper);
  return one(tsolve(L, f, y, true, !upper, false, !upper));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"_linalg_solve_ex", solve_ex}, {"_linalg_solve_ex.result", solve_ex},
      {"linalg_inv_ex", inv_ex}, {"linalg_inv_ex.inverse", inv_ex},
      {"linalg_lu_solve", linalg_lu_solve}, {"linalg_lu_solve.out", linalg_lu_solve},
      {"_linalg_det", det}, {"_linalg_det.result", det},
      {"_linalg_slogdet", slogdet}, {"_linalg_slogdet.sign", slogdet},
      {"triangular_solve", triangular_solve}, {"triangular_solve.X", triangular_solve},
      {"linalg_solve_triangular", solve_triangular}, {"linalg_solve_triangular.out", solve_triangular},
      {"_cholesky_solve_helper", cholesky_solve_helper}, {"_cholesky_solve_helper.out", cholesky_solve_helper},
      {"cholesky_inverse", cholesky_inverse}, {"cholesky_inverse.out", cholesky_inverse},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
