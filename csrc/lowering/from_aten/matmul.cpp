// Matrix products: mm, bmm, addmm, baddbmm, addbmm, dot, mv, addmv as dot_general with the current
// matmul precision (TPU DEFAULT = bf16 inputs, f32 accumulation, for f32 operands).
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

void check_float_or_same(Lower& L, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "[", L.op(),
              "] expected both operands to have the same dtype; got ", a.scalar_type(), " and ", b.scalar_type());
}

// [.., m, k] x [.., k, n] with `nb` leading batch dims.
Value matmul_v(Lower& L, Value a, Value b, int nb) {
  const auto& sa = L.g.shape(a);
  const auto& sb = L.g.shape(b);
  int ra = static_cast<int>(sa.size()), rb = static_cast<int>(sb.size());
  TORCH_CHECK(sa[ra - 1] == sb[rb - 2], "[", L.op(), "] mat1 and mat2 shapes cannot be multiplied (",
              sa[ra - 2], "x", sa[ra - 1], " and ", sb[rb - 2], "x", sb[rb - 1], ")");
  ir::Attrs d;
  for (int i = 0; i < nb; ++i) {
    d.lhs_batch.push_back(i);
    d.rhs_batch.push_back(i);
  }
  d.lhs_contract = {ra - 1};
  d.rhs_contract = {rb - 2};
  DType dt = L.g.dtype(a);
  d.precision = dt == DType::F32 ? matmul_precision() : ir::Precision::Highest;
  return L.g.dot(a, b, d);
}

std::vector<Value> mm(Lower& L, Args a) {
  const at::Tensor &x = a[0].toTensor(), &y = a[1].toTensor();
  TORCH_CHECK(x.dim() == 2 && y.dim() == 2, "[", L.op(), "] expected 2-D tensors; got ", x.dim(), "-D and ", y.dim(), "-D");
  check_float_or_same(L, x, y);
  return one(matmul_v(L, L.in(x), L.in(y), 0));
}

std::vector<Value> bmm(Lower& L, Args a) {
  const at::Tensor &x = a[0].toTensor(), &y = a[1].toTensor();
  TORCH_CHECK(x.dim() == 3 && y.dim() == 3, "[", L.op(), "] expected 3-D tensors; got ", x.dim(), "-D and ", y.dim(), "-D");
  TORCH_CHECK(x.size(0) == y.size(0), "[", L.op(), "] batch sizes differ; got ", x.size(0), " and ", y.size(0));
  check_float_or_same(L, x, y);
  return one(matmul_v(L, L.in(x), L.in(y), 1));
}

// self of addmm / baddbmm / addbmm must expand to the product's shape (checked even when
// beta = 0, as on CPU).
void check_self_expands(Lower& L, const at::Tensor& self, const ir::Shape& ps) {
  bool expands = self.dim() <= static_cast<int64_t>(ps.size());
  for (int64_t i = 1; expands && i <= self.dim(); ++i)
    expands = self.size(-i) == 1 || self.size(-i) == ps[ps.size() - i];
  TORCH_CHECK(expands, "[", L.op(), "] self of shape ", self.sizes(), " does not expand to the product's shape ",
              ir::shape_str(ps));
}

// beta * self + alpha * (m1 @ m2), for addmm / baddbmm.
std::vector<Value> add_product(Lower& L, Args a, int nb) {
  const at::Tensor &self = a[0].toTensor(), &x = a[1].toTensor(), &y = a[2].toTensor();
  TORCH_CHECK(x.dim() == 2 + nb && y.dim() == 2 + nb, "[", L.op(), "] expected ", 2 + nb, "-D matrices; got ",
              x.dim(), "-D and ", y.dim(), "-D");
  check_float_or_same(L, x, y);
  check_float_or_same(L, self, x);
  DType dt = to_ir(x.scalar_type(), L.op()), ct = opmath(dt);
  Value p = L.g.convert(matmul_v(L, L.in(x), L.in(y), nb), ct);
  check_self_expands(L, self, L.g.shape(p));
  at::Scalar beta = a[3].toScalar(), alpha = a[4].toScalar();
  if (!alpha.equal(1)) p = bin(L, OpCode::Mul, p, L.scalar(alpha, ct));
  if (beta.equal(0)) return one(L.g.convert(p, dt));
  Value s = L.in(self, ct);
  if (!beta.equal(1)) s = bin(L, OpCode::Mul, s, L.scalar(beta, ct));
  s = L.bcast(s, L.g.shape(p));
  return one(L.g.convert(L.g.binary(OpCode::Add, p, s), dt));
}

// addbmm(self, batch1, batch2, beta, alpha): beta * self + alpha * sum_b batch1[b] @ batch2[b],
// as one [n, b*m] x [b*m, p] product.
std::vector<Value> addbmm(Lower& L, Args a) {
  const at::Tensor &self = a[0].toTensor(), &x = a[1].toTensor(), &y = a[2].toTensor();
  TORCH_CHECK(x.dim() == 3 && y.dim() == 3, "[", L.op(), "] batch1 and batch2 must be 3D tensors; got ", x.dim(), "-D and ", y.dim(), "-D");
  TORCH_CHECK(x.size(0) == y.size(0) && x.size(2) == y.size(1), "[", L.op(), "] batch1 and batch2 shapes cannot be multiplied; got ",
              x.sizes(), " and ", y.sizes());
  check_float_or_same(L, x, y);
  check_float_or_same(L, self, x);
  int64_t b = x.size(0), n = x.size(1), m = x.size(2), p = y.size(2);
  check_self_expands(L, self, {n, p});
  DType dt = to_ir(x.scalar_type(), L.op()), ct = opmath(dt);
  Value lhs = L.g.reshape(L.g.transpose(L.in(x), {1, 0, 2}), {n, b * m});
  Value rhs = L.g.reshape(L.in(y), {b * m, p});
  Value prod = b * m == 0 ? L.g.constant(0, ct, {n, p}) : L.g.convert(matmul_v(L, lhs, rhs, 0), ct);
  at::Scalar beta = a[3].toScalar(), alpha = a[4].toScalar();
  if (!alpha.equal(1)) prod = bin(L, OpCode::Mul, prod, L.scalar(alpha, ct));
  if (beta.equal(0)) return one(L.g.convert(prod, dt));
  Value s = L.in(self, ct);
  if (!beta.equal(1)) s = bin(L, OpCode::Mul, s, L.scalar(beta, ct));
  return one(L.g.convert(L.g.binary(OpCode::Add, prod, L.bcast(s, {n, p})), dt));
}

std::vector<Value> dot(Lower& L, Args a) {
  const at::Tensor &x = a[0].toTensor(), &y = a[1].toTensor();
  TORCH_CHECK(x.dim() == 1 && y.dim() == 1, "[", L.op(), "] 1D tensors expected, but got ", x.dim(), "D and ", y.dim(), "D tensors");
  TORCH_CHECK(x.size(0) == y.size(0), "[", L.op(), "] inconsistent tensor size, expected tensor [", x.size(0),
              "] and src [", y.size(0), "] to have the same number of elements, but got ", x.size(0), " and ", y.size(0), " elements respectively");
  check_float_or_same(L, x, y);
  Value r = matmul_v(L, L.g.reshape(L.in(x), {1, x.size(0)}), L.g.reshape(L.in(y), {y.size(0), 1}), 0);
  return one(L.g.reshape(r, {}));
}

std::vector<Value> mv(Lower& L, Args a) {
  const at::Tensor &x = a[0].toTensor(), &v = a[1].toTensor();
  TORCH_CHECK(x.dim() == 2 && v.dim() == 1, "[", L.op(), "] vector + matrix @ vector expected, got ", x.dim(), ", ", v.dim());
  check_float_or_same(L, x, v);
  Value r = matmul_v(L, L.in(x), L.g.reshape(L.in(v), {v.size(0), 1}), 0);
  return one(L.g.reshape(r, {x.size(0)}));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto addmm = [](Lower& L, Args a) { return add_product(L, a, 0); };
  auto baddbmm = [](Lower& L, Args a) { return add_product(L, a, 1); };
  register_ops(m, {
      {"mm", mm}, {"mm.out", mm}, {"bmm", bmm}, {"bmm.out", bmm},
      {"addmm", addmm}, {"addmm.out", addmm}, {"addmm_", addmm},
      {"baddbmm", baddbmm}, {"baddbmm.out", baddbmm}, {"baddbmm_", baddbmm},
      {"addbmm", addbmm}, {"addbmm.out", addbmm}, {"addbmm_", addbmm},
      {"dot", dot}, {"dot.out", dot}, {"mv", mv}, {"mv.out", mv},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
