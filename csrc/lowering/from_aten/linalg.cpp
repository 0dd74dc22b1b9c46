// Vector norms: linalg_vector_norm (the per-tensor op that _foreach_norm, and so
// clip_grad_norm_, reaches on tpu). Its backward is ATen's composite formula.
#include <cmath>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Reducer;

Value keep_dims(Lower& L, Value r, const ir::Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  if (!keepdim) return r;
  ir::Shape s = in;
  for (int64_t d : dims) s[d] = 1;
  return L.g.reshape(r, s);
}

// linalg_vector_norm(self, ord, dim?, keepdim, dtype?): the p-norm over dims (clip_grad_norm_
// and _foreach_norm reach it), accumulated in at least f32.
std::vector<Value> vector_norm(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "[", L.op(),
              "] linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  double p = a[1].toScalar().toDouble();
  bool keepdim = a[3].toBool();
  DType dt = to_ir(a[4].isNone() ? self.scalar_type() : a[4].toScalarType(), L.op()), ct = opmath(dt);
  auto dims = dims_arg(a[2], self.dim());
  if (self.dim() == 0) dims.clear();
  if (p < 0 || std::isinf(p))
    for (int64_t d : dims)
      TORCH_CHECK(self.size(d) != 0, "[", L.op(), "] linalg.vector_norm cannot compute the ", p,
                  " norm on the empty dimension ", d);
  Value x = L.g.unary(OpCode::Abs, L.in(self, ct));
  int64_t extent = 1;  // elements per result
  for (int64_t d : dims) extent *= self.size(d);
  Value r;
  if (extent == 1 && p != 0) {
    // One element: its norm is |x| for every p (CPU's kernel too); pow(pow(|x|, p), 1/p) would
    // overflow to inf for a large p (|x| = 4.6, p = 100).
    r = L.g.reduce(x, Reducer::Sum, dims);
  } else if (std::isinf(p)) {
    r = L.g.reduce(x, p > 0 ? Reducer::Max : Reducer::Min, dims);
  } else if (p == 0) {
    r = L.g.reduce(L.g.convert(L.g.compare(ir::Cmp::NE, x, L.cst_like(0, x)), ct), Reducer::Sum, dims);
  } else if (p == 1) {
    r = L.g.reduce(x, Reducer::Sum, dims);
  } else if (p == 2) {
    r = L.g.unary(OpCode::Sqrt, L.g.reduce(L.g.binary(OpCode::Mul, x, x), Reducer::Sum, dims));
  } else {
    Value s = L.g.reduce(bin(L, OpCode::Pow, x, L.cst(p, ct)), Reducer::Sum, dims);
    r = bin(L, OpCode::Pow, s, L.cst(1.0 / p, ct));
  }
  return one(L.g.convert(keep_dims(L, r, shape_of(self), dims, keepdim), dt));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {{"linalg_vector_norm", vector_norm}, {"linalg_vector_norm.out", vector_norm}});
}

}  // namespace
}  // namespace torch_tpu::lowering
