// Softmax, log_softmax and layer_norm with their backward ops, computed in f32 for
// bf16/f16 inputs (PyTorch CPU does the same).
#include <limits>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Reducer;

ir::Shape kept(const ir::Shape& s, const std::vector<int64_t>& dims) {
  ir::Shape k = s;
  for (int64_t d : dims) k[d] = 1;
  return k;
}
Value reduce_keep(Lower& L, Value x, Reducer r, const std::vector<int64_t>& dims) {
  return L.g.reshape(L.g.reduce(x, r, dims), kept(L.g.shape(x), dims));
}

// Returns (x - max) and log(sum(exp(x - max))) along dim (kept).
std::pair<Value, Value> shifted_lse(Lower& L, Value x, int64_t d) {
  Value mx = reduce_keep(L, x, Reducer::Max, {d});
  // All -inf rows: keep the shift finite so exp gives 0 (PyTorch yields nan for log_softmax then).
  Value shifted = bin(L, OpCode::Sub, x, mx);
  Value lse = L.g.unary(OpCode::Log, reduce_keep(L, L.g.unary(OpCode::Exp, shifted), Reducer::Sum, {d}));
  return {shifted, lse};
}

struct SoftmaxArgs {
  at::Tensor self;
  int64_t dim;
  DType out, math;
};
SoftmaxArgs softmax_args(Lower& L, Args a) {
  SoftmaxArgs s;
  s.self = a[0].toTensor();
  s.dim = wrap_dim(a[1].toInt(), std::max<int64_t>(s.self.dim(), 1));
  bool half_to_float = a[2].toBool();
  DType in = to_ir(s.self.scalar_type(), L.op());
  TORCH_CHECK(ir::is_float(in), "[", L.op(), "] softmax needs a floating point input; got ", s.self.scalar_type());
  s.out = half_to_float ? DType::F32 : in;
  s.math = opmath(in);
  return s;
}

std::vector<Value> softmax(Lower& L, Args a, bool log) {
  SoftmaxArgs s = softmax_args(L, a);
  Value x = L.in(s.self, s.math);
  if (s.self.dim() == 0) x = L.g.reshape(x, {1});
  Value r;
  if (log) {
    auto [shifted, lse] = shifted_lse(L, x, s.dim);
    r = bin(L, OpCode::Sub, shifted, lse);
  } else {  // exp(x - max) / sum: one exp per element (as PyTorch CPU), not exp(x - max - lse)
    Value e = L.g.unary(OpCode::Exp, bin(L, OpCode::Sub, x, reduce_keep(L, x, Reducer::Max, {s.dim})));
    r = bin(L, OpCode::Div, e, reduce_keep(L, e, Reducer::Sum, {s.dim}));
  }
  if (s.self.dim() == 0) r = L.g.reshape(r, {});
  return one(L.g.convert(r, s.out));
}

// _safe_softmax(self, dim, dtype): softmax, with rows that are all -inf (fully masked
// attention rows) giving zeros. ATen computes eq(-inf), all() over the row and a where; a row
// is all -inf exactly when its max is -inf (a NaN makes both false), so the row max the
// softmax needs anyway decides it. Autograd uses _softmax_backward_data (derivatives.yaml).
std::vector<Value> safe_softmax(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  int64_t d = wrap_dim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
  DType out = a[2].isNone() ? to_ir(self.scalar_type(), L.op()) : to_ir(a[2].toScalarType(), L.op());
  TORCH_CHECK(ir::is_float(out), "[", L.op(), "] softmax needs a floating point dtype; got ", self.scalar_type());
  Value x = L.g.convert(L.in(self, out), opmath(out));
  if (self.dim() == 0) x = L.g.reshape(x, {1});
  Value mx = reduce_keep(L, x, Reducer::Max, {d});
  Value e = L.g.unary(OpCode::Exp, bin(L, OpCode::Sub, x, mx));
  Value r = bin(L, OpCode::Div, e, reduce_keep(L, e, Reducer::Sum, {d}));
  Value masked = cmp(L, ir::Cmp::EQ, mx, scal(L, -std::numeric_limits<double>::infinity(), mx));
  r = where(L, masked, scal(L, 0.0, r), r);
  if (self.dim() == 0) r = L.g.reshape(r, {});
  return one(L.g.convert(r, out));
}

// _softmax_backward_data(grad_output, output, dim, input_dtype)
std::vector<Value> softmax_backward(Lower& L, Args a, bool log) {
  const at::Tensor &go = a[0].toTensor(), &out = a[1].toTensor();
  int64_t d = wrap_dim(a[2].toInt(), std::max<int64_t>(out.dim(), 1));
  DType in = to_ir(a[3].toScalarType(), L.op()), ct = opmath(to_ir(go.scalar_type(), L.op()));
  Value g = L.in(go, ct), y = L.in(out, ct);
  if (out.dim() == 0) {
    g = L.g.reshape(g, {1});
    y = L.g.reshape(y, {1});
  }
  Value r;
  if (log) {
    Value s = reduce_keep(L, g, Reducer::Sum, {d});
    r = bin(L, OpCode::Sub, g, bin(L, OpCode::Mul, L.g.unary(OpCode::Exp, y), s));
  } else {
    Value gy = L.g.binary(OpCode::Mul, g, y);
    Value s = reduce_keep(L, gy, Reducer::Sum, {d});
    r = bin(L, OpCode::Sub, gy, bin(L, OpCode::Mul, y, s));
  }
  if (out.dim() == 0) r = L.g.reshape(r, {});
  return one(L.g.convert(r, in));
}

struct LnShape {
  std::vector<int64_t> norm_dims;  // trailing dims
  ir::Shape stat_shape;            // input shape with normalized dims set to 1
  int64_t n = 1;
};
LnShape ln_shape(Lower& L, const at::Tensor& x, c10::IntArrayRef normalized) {
  int64_t r = x.dim(), k = static_cast<int64_t>(normalized.size());
  TORCH_CHECK(k >= 1 && k <= r, "[", L.op(), "] normalized_shape has ", k, " dims; input has ", r);
  for (int64_t i = 0; i < k; ++i)
    TORCH_CHECK(x.size(r - k + i) == normalized[i], "[", L.op(),
                "] Given normalized_shape=", normalized, ", expected input with shape [*, ",
                normalized, "], but got input of size", x.sizes());
  LnShape s;
  s.stat_shape = shape_of(x);
  for (int64_t i = r - k; i < r; ++i) {
    s.norm_dims.push_back(i);
    s.stat_shape[i] = 1;
    s.n *= x.size(i);
  }
  return s;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
std::vector<Value> layer_norm(Lower& L, Args a) {
  const at::Tensor& input = a[0].toTensor();
  auto normalized = a[1].toIntVector();
  LnShape s = ln_shape(L, input, normalized);
  for (int i : {2, 3})  // weight, bias: normalized_shape exactly (no broadcasting), as CPU checks
    if (has_tensor(a[i]))
      TORCH_CHECK(a[i].toTensor().sizes().vec() == normalized, "[", L.op(), "] Expected ",
                  i == 2 ? "weight" : "bias", " to be of same shape as normalized_shape, but got ",
                  i == 2 ? "weight" : "bias", " of shape ", a[i].toTensor().sizes(),
                  " and normalized_shape = ", c10::IntArrayRef(normalized));
  DType dt = to_ir(input.scalar_type(), L.op()), ct = opmath(dt);
  Value x = L.in(input, ct);
  Value n = L.cst(double(s.n), ct);
  Value mean = bin(L, OpCode::Div, reduce_keep(L, x, Reducer::Sum, s.norm_dims), n);
  Value c = bin(L, OpCode::Sub, x, mean);
  Value var = bin(L, OpCode::Div, reduce_keep(L, L.g.binary(OpCode::Mul, c, c), Reducer::Sum, s.norm_dims), n);
  Value rstd = L.g.unary(OpCode::Rsqrt, bin(L, OpCode::Add, var, L.scalar(a[4].toScalar(), ct)));
  Value y = bin(L, OpCode::Mul, c, rstd);
  if (has_tensor(a[2])) y = bin(L, OpCode::Mul, y, L.in(a[2].toTensor(), ct));
  if (has_tensor(a[3])) y = bin(L, OpCode::Add, y, L.in(a[3].toTensor(), ct));
  return {L.g.convert(y, dt), L.g.convert(mean, dt), L.g.convert(rstd, dt)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?, mask)
std::vector<Value> layer_norm_backward(Lower& L, Args a) {
  const at::Tensor &go = a[0].toTensor(), &input = a[1].toTensor();
  auto normalized = a[2].toIntVector();
  LnShape s = ln_shape(L, input, normalized);
  DType dt = to_ir(input.scalar_type(), L.op()), ct = opmath(dt);
  Value g = L.in(go, ct), x = L.in(input, ct);
  Value mean = L.g.reshape(L.in(a[3].toTensor(), ct), s.stat_shape);
  Value rstd = L.g.reshape(L.in(a[4].toTensor(), ct), s.stat_shape);
  Value xhat = bin(L, OpCode::Mul, bin(L, OpCode::Sub, x, mean), rstd);
  bool has_w = has_tensor(a[5]);
  Value gw = has_w ? bin(L, OpCode::Mul, g, L.in(a[5].toTensor(), ct)) : g;
  std::vector<int64_t> outer;
  for (int64_t i = 0; i < input.dim() - static_cast<int64_t>(normalized.size()); ++i) outer.push_back(i);
  Value n = L.cst(double(s.n), ct);
  Value m1 = bin(L, OpCode::Div, reduce_keep(L, gw, Reducer::Sum, s.norm_dims), n);
  Value m2 = bin(L, OpCode::Div, reduce_keep(L, L.g.binary(OpCode::Mul, gw, xhat), Reducer::Sum, s.norm_dims), n);
  Value dx = bin(L, OpCode::Mul, rstd, bin(L, OpCode::Sub, bin(L, OpCode::Sub, gw, m1), bin(L, OpCode::Mul, xhat, m2)));
  auto mask = a[7].toBoolList();
  std::vector<Value> outs;
  outs.push_back(L.g.convert(dx, dt));
  ir::Shape wshape(normalized.begin(), normalized.end());
  Value dw = L.g.reshape(L.g.reduce(L.g.binary(OpCode::Mul, g, xhat), Reducer::Sum, outer), wshape);
  Value db = L.g.reshape(L.g.reduce(g, Reducer::Sum, outer), wshape);
  outs.push_back(L.g.convert(dw, has_w ? to_ir(a[5].toTensor().scalar_type(), L.op()) : dt));
  outs.push_back(L.g.convert(db, has_tensor(a[6]) ? to_ir(a[6].toTensor().scalar_type(), L.op()) : dt));
  (void)mask;  // all three are computed; autograd ignores the unused ones
  return outs;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto sm = [](Lower& L, Args a) { return softmax(L, a, false); };
  auto lsm = [](Lower& L, Args a) { return softmax(L, a, true); };
  auto smb = [](Lower& L, Args a) { return softmax_backward(L, a, false); };
  auto lsmb = [](Lower& L, Args a) { return softmax_backward(L, a, true); };
  register_ops(m, {
      {"_softmax", sm}, {"_softmax.out", sm}, {"_safe_softmax", safe_softmax}, {"_log_softmax", lsm}, {"_log_softmax.out", lsm},
      {"_softmax_backward_data", smb}, {"_softmax_backward_data.out", smb},
      {"_log_softmax_backward_data", lsmb}, {"_log_softmax_backward_data.out", lsmb},
      {"native_layer_norm", layer_norm}, {"native_layer_norm_backward", layer_norm_backward},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
