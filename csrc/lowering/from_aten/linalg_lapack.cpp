// The helpers of linalg_lapack.h: checks, masks, batch broadcasting, LU solve on IR values.
#include "lowering/from_aten/linalg_lapack.h"

#include <numeric>

namespace torch_tpu::lowering::linalg {

using ir::Cmp;

DType check_matrix(Lower& L, const at::Tensor& t, const char* api, const char* name, bool square) {
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, "[", L.op(), "] ", api,
              ": unsupported dtype of ", name, "; got ", t.scalar_type(), ", expected float32 or float64");
  TORCH_CHECK(t.dim() >= 2, "[", L.op(), "] ", api, ": Expected ", name,
              " to be a tensor of at least 2 dimensions; got ", t.dim(), " dimensions");
  if (square)
    TORCH_CHECK(t.size(-1) == t.size(-2), "[", L.op(), "] ", api, ": Expected ", name,
                " to be a square matrix or batch of square matrices. Got matrices of size (", t.size(-2), ", ",
                t.size(-1), ").");
  return to_ir(t.scalar_type(), L.op());
}

Value call(Lower& L, Target t, std::vector<Value> operands, int64_t index, std::vector<int64_t> params) {
  return L.g.op(OpCode::CustomCall, std::move(operands), ir::custom_call_attrs(t, index, std::move(params)));
}

int64_t rows(Lower& L, Value v) { return L.g.shape(v).end()[-2]; }
int64_t cols(Lower& L, Value v) { return L.g.shape(v).back(); }
ir::Shape batch_of(Lower& L, Value v, size_t core) {
  const ir::Shape& s = L.g.shape(v);
  return ir::Shape(s.begin(), s.end() - core);
}
ir::Shape with(ir::Shape batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail);
  return batch;
}

Value mT(Lower& L, Value v) {
  std::vector<int64_t> perm(L.g.shape(v).size());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm.end()[-1], perm.end()[-2]);
  return L.g.transpose(v, perm);
}

namespace {
// col - row for each element of a [.., r, c] shape (i64).
Value col_minus_row(Lower& L, const ir::Shape& s) {
  int64_t r = static_cast<int64_t>(s.size());
  return L.g.binary(OpCode::Sub, L.g.iota(DType::I64, s, r - 1), L.g.iota(DType::I64, s, r - 2));
}
}  // namespace

Value tri(Lower& L, Value x, int64_t k, bool upper) {
  const ir::Shape s = L.g.shape(x);
  Value keep = L.g.compare(upper ? Cmp::GE : Cmp::LE, col_minus_row(L, s), L.g.constant(k, DType::I64, s));
  return L.g.select(keep, x, L.cst_like(0, x));
}

Value eye(Lower& L, const ir::Shape& s, DType dt) {
  return L.g.convert(L.g.compare(Cmp::EQ, col_minus_row(L, s), L.g.constant(0, DType::I64, s)), dt);
}

Value diagonal(Lower& L, Value x) {
  const ir::Shape s = L.g.shape(x);
  Value on = L.g.compare(Cmp::EQ, col_minus_row(L, s), L.g.constant(0, DType::I64, s));
  return L.g.reduce(L.g.select(on, x, L.cst_like(0, x)), ir::Reducer::Sum, {static_cast<int64_t>(s.size()) - 1});
}

Value slice2(Lower& L, Value x, int64_t r1, int64_t c1) {
  const ir::Shape s = L.g.shape(x);
  std::vector<int64_t> start(s.size(), 0), limit = s, stride(s.size(), 1);
  limit.end()[-2] = r1;
  limit.end()[-1] = c1;
  return L.g.slice(x, start, limit, stride);
}

Value any_nonzero(Lower& L, Value x) {
  return any_true(L, L.g.compare(Cmp::NE, x, L.cst_like(0, x)));
}

Value empty(Lower& L, DType dt) { return L.g.constant(0, dt, {0}); }

void broadcast_batch(Lower& L, Value& a, size_t core_a, Value& b, size_t core_b) {
  ir::Shape ba = batch_of(L, a, core_a), bb = batch_of(L, b, core_b);
  if (ba == bb) return;
  ir::Shape batch = broadcast_shapes(L.op(), ba, bb);
  auto expand = [&](Value& v, size_t core) {
    ir::Shape s = batch;
    const ir::Shape& vs = L.g.shape(v);
    s.insert(s.end(), vs.end() - core, vs.end());
    v = L.g.broadcast_to(v, s);
  };
  expand(a, core_a);
  expand(b, core_b);
}

namespace {
Value tsolve(Lower& L, Value a, Value b, bool lower, bool unit, bool transpose) {
  ir::Attrs at;
  at.dims = {1, lower, unit, transpose ? 1 : 0};
  return L.g.op(OpCode::TriangularSolve, {a, b}, at);
}
}  // namespace

Value lu_solve(Lower& L, Value lu, Value pivots, Value b, bool left, bool adjoint) {
  if (!left) return mT(L, lu_solve(L, lu, pivots, mT(L, b), true, !adjoint));
  broadcast_batch(L, lu, 2, b, 2);
  broadcast_batch(L, pivots, 1, b, 2);
  const ir::Shape bs = L.g.shape(b);
  int64_t n = rows(L, b), axis = static_cast<int64_t>(bs.size()) - 2;
  Value perm = call(L, Target::LuPivotsToPermutation, {pivots}, 0, {n});
  Value idx = L.g.broadcast_to(L.g.reshape(perm, with(batch_of(L, perm, 1), {n, 1})), bs);
  ir::Attrs ax;
  ax.dims = {axis};
  if (!adjoint) {  // A = P L U: X = U^-1 L^-1 P^T B
    Value y = L.g.op(OpCode::Gather, {b, idx}, ax);
    return tsolve(L, lu, tsolve(L, lu, y, true, true, false), false, false, false);
  }
  // A^T = U^T L^T P^T: X = P L^-T U^-T B
  Value y = tsolve(L, lu, tsolve(L, lu, b, false, false, true), true, true, true);
  return L.g.op(OpCode::Scatter, {L.cst_like(0, y), idx, y}, ax);
}

Value det_p(Lower& L, Value pivots, DType dt) {
  const ir::Shape s = L.g.shape(pivots);
  int64_t r = static_cast<int64_t>(s.size());
  Value pos = L.g.binary(OpCode::Add, L.g.iota(DType::I32, s, r - 1), L.g.constant(1, DType::I32, s));
  Value swaps = L.g.reduce(L.g.convert(L.g.compare(Cmp::NE, pivots, pos), DType::I64), ir::Reducer::Sum, {r - 1});
  Value odd = L.g.binary(OpCode::Rem, swaps, L.cst_like(2, swaps));
  return L.g.convert(L.g.binary(OpCode::Sub, L.cst_like(1, odd), L.g.binary(OpCode::Mul, odd, L.cst_like(2, odd))), dt);
}

void check_info(Lower& L, Value info, const std::string& message) {
  L.check(any_nonzero(L, info), "[" + std::string(L.op()) + "] " + message);
}

}  // namespace torch_tpu::lowering::linalg
