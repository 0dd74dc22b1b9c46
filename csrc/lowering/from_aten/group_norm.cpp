// Group norm: native_group_norm and native_group_norm_backward. The input [N, C, *] is viewed
// as [N, G, C/G * HxW]; statistics per (sample, group); computed in f32 for bf16/f16 inputs.
// mean and rstd take CPU's dtype (f32 for a bf16/f16 input with f32 parameters, else the input's).
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Reducer;

struct GnShape {
  int64_t n, c, hw, g;
  ir::Shape grouped, channels, input;  // [N, G, C/G * HxW], [N, C, HxW], the input's
};

GnShape gn_shape(Lower& L, const at::Tensor& input, Args a, size_t first) {
  GnShape s{a[first].toInt(), a[first + 1].toInt(), a[first + 2].toInt(), a[first + 3].toInt(), {}, {}, shape_of(input)};
  TORCH_CHECK(s.g > 0 && s.c % s.g == 0, "[", L.op(), "] Expected number of channels in input to be divisible by num_groups, ",
              "but got input of shape ", input.sizes(), " and num_groups=", s.g);
  TORCH_CHECK(input.numel() == s.n * s.c * s.hw && input.dim() >= 2 && input.size(0) == s.n && input.size(1) == s.c,
              "[", L.op(), "] expected an input of shape [N=", s.n, ", C=", s.c, ", *] with HxW=", s.hw, " values per channel; got ",
              input.sizes());
  s.grouped = {s.n, s.g, s.c / s.g * s.hw};
  s.channels = {s.n, s.c, s.hw};
  return s;
}

// The statistics' dtype; checks the parameters as CPU does.
DType param_dtype(Lower& L, const at::Tensor& input, const GnShape& s, std::initializer_list<at::Tensor> params) {
  at::ScalarType it = input.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(it), "[", L.op(), "] \"group_norm\" not implemented for '", it, "'");
  bool mixed = false;
  for (const at::Tensor& p : params) {
    if (!p.defined()) continue;
    TORCH_CHECK(p.dim() == 1 && p.numel() == s.c, "[", L.op(), "] Expected weight and bias to be vectors of size equal to the ",
                "number of channels in input (", s.c, "); got shape ", p.sizes());
    TORCH_CHECK(p.scalar_type() == it || ((it == at::kBFloat16 || it == at::kHalf) && p.scalar_type() == at::kFloat), "[",
                L.op(), "] mixed dtype (CPU): expect parameter to have scalar type of Float; got ", p.scalar_type());
    mixed |= p.scalar_type() != it;
  }
  return to_ir(mixed ? at::kFloat : it, L.op());
}

Value per_channel(Lower& L, const at::Tensor& t, DType ct, const GnShape& s) {
  return L.g.reshape(L.in(t, ct), {1, s.c, 1});
}

// Per (sample, group) statistic [N, G] broadcast over the grouped view.
Value grouped(Lower& L, Value stat, const GnShape& s) { return L.g.reshape(stat, {s.n, s.g, 1}); }

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
std::vector<Value> group_norm(Lower& L, Args a) {
  const at::Tensor& input = a[0].toTensor();
  at::Tensor w = opt_tensor(a[1]), b = opt_tensor(a[2]);
  GnShape s = gn_shape(L, input, a, 3);
  DType pt = param_dtype(L, input, s, {w, b});
  DType dt = to_ir(input.scalar_type(), L.op()), ct = opmath(dt);
  Value x = L.g.reshape(L.in(input, ct), s.grouped);
  Value n = L.cst(double(s.grouped[2]), ct);
  Value mean = bin(L, OpCode::Div, L.g.reduce(x, Reducer::Sum, {2}), n);
  Value xmu = bin(L, OpCode::Sub, x, grouped(L, mean, s));
  Value var = bin(L, OpCode::Div, L.g.reduce(L.g.binary(OpCode::Mul, xmu, xmu), Reducer::Sum, {2}), n);
  Value rstd = L.g.unary(OpCode::Rsqrt, bin(L, OpCode::Add, var, L.scalar(a[7].toScalar(), ct)));
  Value y = L.g.reshape(bin(L, OpCode::Mul, xmu, grouped(L, rstd, s)), s.channels);
  if (w.defined()) y = bin(L, OpCode::Mul, y, per_channel(L, w, ct, s));
  if (b.defined()) y = bin(L, OpCode::Add, y, per_channel(L, b, ct, s));
  return {L.g.convert(L.g.reshape(y, s.input), dt), L.g.convert(mean, pt), L.g.convert(rstd, pt)};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
// -> (grad_input, grad_weight, grad_bias); all three computed (autograd ignores the rest).
std::vector<Value> group_norm_backward(Lower& L, Args a) {
  const at::Tensor &go = a[0].toTensor(), &input = a[1].toTensor();
  at::Tensor w = opt_tensor(a[4]);
  GnShape s = gn_shape(L, input, a, 5);
  DType pt = param_dtype(L, input, s, {w});
  if (!w.defined()) pt = to_ir(a[2].toTensor().scalar_type(), L.op());
  DType dt = to_ir(input.scalar_type(), L.op()), ct = opmath(dt);
  Value g = L.g.reshape(L.in(go, ct), s.channels);
  Value x = L.g.reshape(L.in(input, ct), s.grouped);
  Value mean = L.g.reshape(L.in(a[2].toTensor(), ct), {s.n, s.g, 1});
  Value rstd = L.g.reshape(L.in(a[3].toTensor(), ct), {s.n, s.g, 1});
  Value xhat = bin(L, OpCode::Mul, bin(L, OpCode::Sub, x, mean), rstd);
  Value gw = L.g.reshape(w.defined() ? bin(L, OpCode::Mul, g, per_channel(L, w, ct, s)) : g, s.grouped);
  Value n = L.cst(double(s.grouped[2]), ct);
  Value m1 = bin(L, OpCode::Div, L.g.reduce(gw, Reducer::Sum, {2}), n);
  Value m2 = bin(L, OpCode::Div, L.g.reduce(L.g.binary(OpCode::Mul, gw, xhat), Reducer::Sum, {2}), n);
  Value dx = bin(L, OpCode::Sub, bin(L, OpCode::Sub, gw, grouped(L, m1, s)), bin(L, OpCode::Mul, xhat, grouped(L, m2, s)));
  dx = bin(L, OpCode::Mul, dx, rstd);
  Value dw = L.g.reduce(L.g.binary(OpCode::Mul, g, L.g.reshape(xhat, s.channels)), Reducer::Sum, {0, 2});
  Value db = L.g.reduce(g, Reducer::Sum, {0, 2});
  return {L.g.convert(L.g.reshape(dx, s.input), dt), L.g.convert(dw, pt), L.g.convert(db, pt)};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"native_group_norm", group_norm}, {"native_group_norm.out", group_norm},
      {"native_group_norm_backward", group_norm_backward}, {"native_group_norm_backward.out", group_norm_backward},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
