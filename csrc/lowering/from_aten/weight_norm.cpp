// Weight norm (nn.utils.weight_norm / parametrizations.weight_norm with dim first or last):
// _weight_norm_interface -> (v * g / ||v||, ||v||) with the norm over every dim but `dim`, and
// its backward. bf16/f16 compute in f32 (norms come back in f32, as on CPU).
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Reducer;

struct WnShape {
  int64_t dim;               // the kept dim (first or last)
  std::vector<int64_t> red;  // every other dim
  ir::Shape kept;            // v's shape with the reduced dims 1 (g's and the norms' shape)
};

WnShape wn_shape(Lower& L, const at::Tensor& v, int64_t dim) {
  int64_t r = v.dim();
  TORCH_CHECK(r >= 1, "[", L.op(), "] expected v with at least one dim");
  int64_t d = dim;  // CPU's kernel takes no negative dim either
  TORCH_CHECK(d == 0 || d == r - 1, "[", L.op(), "] fused kernels can only be applied for first or last dim; got dim ", dim);
  WnShape s;
  s.dim = d;
  s.kept = ir::Shape(r, 1);
  s.kept[d] = v.size(d);
  for (int64_t i = 0; i < r; ++i)
    if (i != d) s.red.push_back(i);
  return s;
}

// ||v|| over the reduced dims, in v's shape with those dims 1.
Value norms_of(Lower& L, Value v, const WnShape& s) {
  Value sq = L.g.reduce(L.g.binary(OpCode::Mul, v, v), Reducer::Sum, s.red);
  return L.g.unary(OpCode::Sqrt, L.g.reshape(sq, s.kept));
}

// _weight_norm_interface(v, g, dim) -> (w, norms)
std::vector<Value> weight_norm(Lower& L, Args a) {
  const at::Tensor &vt = a[0].toTensor(), &gt = a[1].toTensor();
  WnShape s = wn_shape(L, vt, a[2].toInt());
  TORCH_CHECK(gt.numel() == vt.size(s.dim), "[", L.op(),
              "] g must have one value per slice of v along dim; got g of shape ", gt.sizes(), " for v of shape ", vt.sizes());
  DType dt = to_ir(vt.scalar_type(), L.op()), ct = opmath(dt);
  Value v = L.in(vt, ct), g = L.g.reshape(L.in(gt, ct), s.kept);
  Value n = norms_of(L, v, s);
  Value w = bin(L, OpCode::Mul, v, L.g.binary(OpCode::Div, g, n));
  DType nt = (dt == DType::BF16 || dt == DType::F16) ? DType::F32 : dt;
  return {L.g.convert(w, dt), L.g.convert(n, nt)};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim) -> (grad_v, grad_g):
// grad_g = sum(grad_w * v) / n; grad_v = (g / n) * (grad_w - v * grad_g / n).
std::vector<Value> weight_norm_backward(Lower& L, Args a) {
  const at::Tensor &gw = a[0].toTensor(), &vt = a[1].toTensor(), &gt = a[2].toTensor();
  WnShape s = wn_shape(L, vt, a[4].toInt());
  DType dt = to_ir(vt.scalar_type(), L.op()), ct = opmath(dt);
  Value grad = L.in(gw, ct), v = L.in(vt, ct);
  Value g = L.g.reshape(L.in(gt, ct), s.kept), n = L.g.reshape(L.in(a[3].toTensor(), ct), s.kept);
  Value dot = L.g.reshape(L.g.reduce(L.g.binary(OpCode::Mul, grad, v), Reducer::Sum, s.red), s.kept);
  Value grad_g = L.g.binary(OpCode::Div, dot, n);
  Value gv = bin(L, OpCode::Sub, grad, bin(L, OpCode::Mul, v, L.g.binary(OpCode::Div, grad_g, n)));
  Value grad_v = bin(L, OpCode::Mul, gv, L.g.binary(OpCode::Div, g, n));
  return {L.g.convert(grad_v, dt), L.g.convert(L.g.reshape(grad_g, shape_of(gt)), to_ir(gt.scalar_type(), L.op()))};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"_weight_norm_interface", weight_norm},
      {"_weight_norm_interface_backward", weight_norm_backward},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
