// Activations whose functional form PyTorch implements through a structured `.out` kernel
// (so without a lowering they ran as Python decompositions): softplus, log_sigmoid, glu, mish,
// leaky_relu, elu, hardtanh (ReLU6), hardswish, hardsigmoid, and their backward ops. bf16/f16
// compute in f32, as PyTorch CPU does; formulas follow CPU's kernels.
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;

struct FloatIn {
  Value x;
  DType dt;  // the result dtype
};

// A float tensor argument in its math dtype.
FloatIn float_in(Lower& L, const c10::IValue& v) {
  at::ScalarType st = v.toTensor().scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "[", L.op(), "] not implemented for '", st,
                              "'; expected a floating point input");
  DType dt = to_ir(st, L.op());
  return {L.in(v.toTensor(), opmath(dt)), dt};
}

Value ct_in(Lower& L, const c10::IValue& v, const FloatIn& like) { return L.in(v.toTensor(), L.g.dtype(like.x)); }

// softplus(x, beta, threshold): x where beta * x > threshold, else log1p(exp(beta * x)) / beta.
std::vector<Value> softplus(Lower& L, Args a) {
  FloatIn in = float_in(L, a[0]);
  DType ct = L.g.dtype(in.x);
  Value beta = operand(L, a[1], ct), th = operand(L, a[2], ct);
  Value bx = bin(L, OpCode::Mul, in.x, beta);
  Value soft = bin(L, OpCode::Div, L.g.unary(OpCode::Log1p, L.g.unary(OpCode::Exp, bx)), beta);
  return one(L.g.convert(where(L, cmp(L, Cmp::GT, bx, th), in.x, soft), in.dt));
}

// softplus_backward(grad, x, beta, threshold): grad where beta * x > threshold, else
// grad * z / (z + 1) with z = exp(beta * x).
std::vector<Value> softplus_backward(Lower& L, Args a) {
  FloatIn g = float_in(L, a[0]);
  Value x = ct_in(L, a[1], g);
  DType ct = L.g.dtype(g.x);
  Value beta = operand(L, a[2], ct), th = operand(L, a[3], ct);
  Value bx = bin(L, OpCode::Mul, x, beta);
  Value z = L.g.unary(OpCode::Exp, bx);
  Value soft = bin(L, OpCode::Mul, g.x, bin(L, OpCode::Div, z, addc(L, z, 1)));
  return one(L.g.convert(where(L, cmp(L, Cmp::GT, bx, th), g.x, soft), g.dt));
}

// log_sigmoid_forward(x) -> (min(x, 0) - log1p(exp(-|x|)), buffer): the buffer is empty (as
// CUDA's); the backward recomputes from x.
std::vector<Value> log_sigmoid_forward(Lower& L, Args a) {
  FloatIn in = float_in(L, a[0]);
  Value z = L.g.unary(OpCode::Exp, L.g.unary(OpCode::Negate, L.g.unary(OpCode::Abs, in.x)));
  Value y = bin(L, OpCode::Sub, bin(L, OpCode::Min, in.x, scal(L, 0, in.x)), L.g.unary(OpCode::Log1p, z));
  return {L.g.convert(y, in.dt), L.g.constant(0, in.dt, {0})};
}

// log_sigmoid_backward(grad, x, buffer): grad * (x < 0 ? 1 - z / (1 + z) : z / (1 + z)),
// z = exp(-|x|) (CPU's formula).
std::vector<Value> log_sigmoid_backward(Lower& L, Args a) {
  FloatIn g = float_in(L, a[0]);
  Value x = ct_in(L, a[1], g);
  Value z = L.g.unary(OpCode::Exp, L.g.unary(OpCode::Negate, L.g.unary(OpCode::Abs, x)));
  Value q = bin(L, OpCode::Div, z, addc(L, z, 1));
  Value d = where(L, cmp(L, Cmp::LT, x, scal(L, 0, x)), bin(L, OpCode::Sub, scal(L, 1, q), q), q);
  return one(L.g.convert(bin(L, OpCode::Mul, g.x, d), g.dt));
}

// The two halves of x along `dim` (glu); checks the size is even.
std::pair<Value, Value> halves(Lower& L, Value x, const at::Tensor& t, int64_t dim) {
  TORCH_CHECK(t.dim() > 0, "[", L.op(), "] glu does not support scalars because halving size must be even");
  int64_t d = wrap_dim(dim, t.dim()), n = t.size(d);
  TORCH_CHECK(n % 2 == 0, "[", L.op(), "] Halving dimension must be even, but dimension ", d, " is size ", n);
  ir::Shape s = shape_of(t);
  std::vector<int64_t> start(s.size(), 0), mid = s, mid0(s.size(), 0), strides(s.size(), 1);
  mid[d] = n / 2;
  mid0[d] = n / 2;
  return {L.g.slice(x, start, mid, strides), L.g.slice(x, mid0, s, strides)};
}

// glu(x, dim): a * sigmoid(b) for the halves a, b of x along dim.
std::vector<Value> glu(Lower& L, Args a) {
  FloatIn in = float_in(L, a[0]);
  auto [x1, x2] = halves(L, in.x, a[0].toTensor(), a[1].toInt());
  return one(L.g.convert(L.g.binary(OpCode::Mul, x1, L.g.unary(OpCode::Logistic, x2)), in.dt));
}

// glu_backward(grad, x, dim): (grad * s, grad * a * s * (1 - s)) concatenated, s = sigmoid(b).
std::vector<Value> glu_backward(Lower& L, Args a) {
  FloatIn g = float_in(L, a[0]);
  const at::Tensor& self = a[1].toTensor();
  auto [x1, x2] = halves(L, ct_in(L, a[1], g), self, a[2].toInt());
  Value s = L.g.unary(OpCode::Logistic, x2);
  Value da = L.g.binary(OpCode::Mul, g.x, s);
  Value db = L.g.binary(OpCode::Mul, L.g.binary(OpCode::Mul, da, x1), L.g.binary(OpCode::Sub, L.cst_like(1, s), s));
  return one(L.g.convert(L.g.concat({da, db}, wrap_dim(a[2].toInt(), self.dim())), g.dt));
}

// mish(x) = x * tanh(softplus(x)) (threshold 20, as CPU's kernel).
std::vector<Value> mish(Lower& L, Args a) {
  FloatIn in = float_in(L, a[0]);
  Value sp = L.g.unary(OpCode::Log1p, L.g.unary(OpCode::Exp, in.x));
  sp = where(L, cmp(L, Cmp::GT, in.x, scal(L, 20, in.x)), in.x, sp);
  return one(L.g.convert(L.g.binary(OpCode::Mul, in.x, L.g.unary(OpCode::Tanh, sp)), in.dt));
}

// leaky_relu(x, slope): x > 0 ? x : x * slope.
std::vector<Value> leaky_relu(Lower& L, Args a) {
  FloatIn in = float_in(L, a[0]);
  Value slope = operand(L, a[1], L.g.dtype(in.x));
  Value y = where(L, cmp(L, Cmp::GT, in.x, scal(L, 0, in.x)), in.x, bin(L, OpCode::Mul, in.x, slope));
  return one(L.g.convert(y, in.dt));
}

// leaky_relu_backward(grad, x, slope, self_is_result): x > 0 ? grad : grad * slope.
std::vector<Value> leaky_relu_backward(Lower& L, Args a) {
  FloatIn g = float_in(L, a[0]);
  Value x = ct_in(L, a[1], g);
  Value slope = operand(L, a[2], L.g.dtype(g.x));
  Value d = where(L, cmp(L, Cmp::GT, x, scal(L, 0, x)), g.x, bin(L, OpCode::Mul, g.x, slope));
  return one(L.g.convert(d, g.dt));
}

// elu(x, alpha, scale, input_scale): x > 0 ? x * scale : (exp(x * input_scale) - 1) * alpha * scale.
std::vector<Value> elu(Lower& L, Args a) {
  FloatIn in = float_in(L, a[0]);
  DType ct = L.g.dtype(in.x);
  Value alpha = operand(L, a[1], ct), scale = operand(L, a[2], ct), iscale = operand(L, a[3], ct);
  Value neg = bin(L, OpCode::Mul, bin(L, OpCode::Mul, L.g.unary(OpCode::Expm1, bin(L, OpCode::Mul, in.x, iscale)), alpha), scale);
  Value y = where(L, cmp(L, Cmp::GT, in.x, scal(L, 0, in.x)), bin(L, OpCode::Mul, in.x, scale), neg);
  return one(L.g.convert(y, in.dt));
}

// elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result): for x <= 0 (or a
// result y <= 0) grad * input_scale * (y + alpha * scale), or grad * input_scale * alpha *
// scale * exp(x * input_scale); else grad * scale.
std::vector<Value> elu_backward(Lower& L, Args a) {
  FloatIn g = float_in(L, a[0]);
  DType ct = L.g.dtype(g.x);
  Value alpha = operand(L, a[1], ct), scale = operand(L, a[2], ct), iscale = operand(L, a[3], ct);
  bool is_result = a[4].toBool();
  Value v = ct_in(L, a[5], g);
  Value as = bin(L, OpCode::Mul, alpha, scale);
  Value neg = is_result ? bin(L, OpCode::Add, v, as)
                        : bin(L, OpCode::Mul, as, L.g.unary(OpCode::Exp, bin(L, OpCode::Mul, v, iscale)));
  neg = bin(L, OpCode::Mul, bin(L, OpCode::Mul, g.x, iscale), neg);
  Value d = where(L, cmp(L, Cmp::LE, v, scal(L, 0, v)), neg, bin(L, OpCode::Mul, g.x, scale));
  return one(L.g.convert(d, g.dt));
}

// hardtanh(x, min, max) = clamp (ReLU6 is hardtanh(0, 6)); integer inputs stay integers.
std::vector<Value> hardtanh(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  TORCH_CHECK(self.scalar_type() != at::kBool, "[", L.op(), "] not implemented for 'Bool'");
  TORCH_CHECK(self.scalar_type() != at::kByte || (a[1].toScalar().toDouble() >= 0 && a[2].toScalar().toDouble() >= 0),
              "[", L.op(), "] cannot do hardtanh on an unsigned type with negative limits");
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  Value x = L.in(self, ct);
  // uint8 checks the limits' values: bind them by value there (Lower::scalar_arg's rule).
  auto limit = [&](const c10::IValue& v) { return self.scalar_type() == at::kByte ? L.scalar(v.toScalar(), ct) : operand(L, v, ct); };
  Value lo = limit(a[1]), hi = limit(a[2]);
  Value y = bin(L, OpCode::Min, bin(L, OpCode::Max, x, lo), hi);
  // NaN stays NaN (max/min of the IR propagate it, as CPU's clamp).
  return one(L.g.convert(y, dt));
}

// hardtanh_backward(grad, x, min, max): grad where min < x < max, else 0.
std::vector<Value> hardtanh_backward(Lower& L, Args a) {
  FloatIn g = float_in(L, a[0]);
  Value x = ct_in(L, a[1], g);
  DType ct = L.g.dtype(g.x);
  Value lo = operand(L, a[2], ct), hi = operand(L, a[3], ct);
  Value out = L.g.binary(OpCode::Or, cmp(L, Cmp::LE, x, lo), cmp(L, Cmp::GE, x, hi));
  return one(L.g.convert(where(L, out, scal(L, 0, g.x), g.x), g.dt));
}

Value relu6_of(Lower& L, Value x) {  // min(max(x + 3, 0), 6)
  return bin(L, OpCode::Min, bin(L, OpCode::Max, addc(L, x, 3), scal(L, 0, x)), scal(L, 6, x));
}

// hardswish(x) = x * relu6(x + 3) / 6; hardsigmoid(x) = relu6(x + 3) / 6.
std::vector<Value> hardswish(Lower& L, Args a) {
  FloatIn in = float_in(L, a[0]);
  return one(L.g.convert(bin(L, OpCode::Div, L.g.binary(OpCode::Mul, in.x, relu6_of(L, in.x)), scal(L, 6, in.x)), in.dt));
}

std::vector<Value> hardsigmoid(Lower& L, Args a) {
  FloatIn in = float_in(L, a[0]);
  return one(L.g.convert(bin(L, OpCode::Div, relu6_of(L, in.x), scal(L, 6, in.x)), in.dt));
}

// hardswish_backward(grad, x): x < -3 ? 0 : x <= 3 ? grad * (x / 3 + 0.5) : grad.
std::vector<Value> hardswish_backward(Lower& L, Args a) {
  FloatIn g = float_in(L, a[0]);
  Value x = ct_in(L, a[1], g);
  Value mid = bin(L, OpCode::Mul, g.x, addc(L, bin(L, OpCode::Div, x, scal(L, 3, x)), 0.5));
  Value d = where(L, cmp(L, Cmp::LT, x, scal(L, -3, x)), scal(L, 0, g.x),
                  where(L, cmp(L, Cmp::LE, x, scal(L, 3, x)), mid, g.x));
  return one(L.g.convert(d, g.dt));
}

// hardsigmoid_backward(grad, x): grad / 6 where -3 < x < 3, else 0.
std::vector<Value> hardsigmoid_backward(Lower& L, Args a) {
  FloatIn g = float_in(L, a[0]);
  Value x = ct_in(L, a[1], g);
  Value in = L.g.binary(OpCode::And, cmp(L, Cmp::GT, x, scal(L, -3, x)), cmp(L, Cmp::LT, x, scal(L, 3, x)));
  return one(L.g.convert(where(L, in, bin(L, OpCode::Div, g.x, scal(L, 6, g.x)), scal(L, 0, g.x)), g.dt));
}

#define V3(name, fn) {name, fn}, {name ".out", fn}, {name "_", fn}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"softplus", softplus}, {"softplus.out", softplus},
      {"softplus_backward", softplus_backward}, {"softplus_backward.grad_input", softplus_backward},
      {"log_sigmoid_forward", log_sigmoid_forward}, {"log_sigmoid_forward.output", log_sigmoid_forward},
      {"log_sigmoid_backward", log_sigmoid_backward}, {"log_sigmoid_backward.grad_input", log_sigmoid_backward},
      {"glu", glu}, {"glu.out", glu}, {"glu_backward", glu_backward}, {"glu_backward.grad_input", glu_backward},
      V3("mish", mish), V3("leaky_relu", leaky_relu), V3("elu", elu), V3("hardtanh", hardtanh),
      V3("hardswish", hardswish), V3("hardsigmoid", hardsigmoid),
      {"leaky_relu_backward", leaky_relu_backward}, {"leaky_relu_backward.grad_input", leaky_relu_backward},
      {"elu_backward", elu_backward}, {"elu_backward.grad_input", elu_backward},
      {"hardtanh_backward", hardtanh_backward}, {"hardtanh_backward.grad_input", hardtanh_backward},
      {"hardswish_backward", hardswish_backward}, {"hardswish_backward.out", hardswish_backward},
      {"hardsigmoid_backward", hardsigmoid_backward},
      {"hardsigmoid_backward.grad_input", hardsigmoid_backward},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
