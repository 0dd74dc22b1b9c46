// Unary math, activations and their backward formulas, lerp/addcmul/addcdiv (optimizers),
// fill_/zero_. Integer inputs to float-only math promote to the default float dtype.
#include <cmath>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;

// Input as its math dtype; `out` receives the result dtype.
Value input(Lower& L, const c10::IValue& v, bool to_float, DType* out) {
  at::ScalarType st = v.toTensor().scalar_type();
  if (to_float) st = float_type(st);
  *out = to_ir(st, L.op());
  return L.in(v.toTensor(), opmath(*out));
}

template <OpCode op>
std::vector<Value> float_unary(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], true, &dt);
  return one(L.g.convert(L.g.unary(op, x), dt));
}

// Ops that keep integer dtypes unchanged (floor/ceil/round/trunc are identity on ints).
template <OpCode op>
std::vector<Value> rounding(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], false, &dt);
  if (!ir::is_float(dt)) return one(x);
  return one(L.g.convert(L.g.unary(op, x), dt));
}

Value trunc_v(Lower& L, Value x) {
  return L.g.binary(OpCode::Mul, L.g.unary(OpCode::Sign, x), L.g.unary(OpCode::Floor, L.g.unary(OpCode::Abs, x)));
}

std::vector<Value> neg(Lower& L, Args a) {
  TORCH_CHECK(a[0].toTensor().scalar_type() != at::kBool, "[", L.op(),
              "] Negation, the `-` operator, on a bool tensor is not supported.");
  DType dt;
  Value x = input(L, a[0], false, &dt);
  return one(L.g.convert(L.g.unary(OpCode::Negate, x), dt));
}

std::vector<Value> abs(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], false, &dt);
  TORCH_CHECK_NOT_IMPLEMENTED(dt != DType::Bool, "[", L.op(), "] not implemented for bool tensors; got Bool, expected a numeric dtype");
  return one(L.g.convert(L.g.unary(OpCode::Abs, x), dt));
}

// sign(NaN) is 0 in PyTorch (the IR's sign propagates NaN).
std::vector<Value> sign(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], false, &dt);
  if (dt == DType::Bool) return one(x);
  Value s = L.g.unary(OpCode::Sign, x);
  if (ir::is_float(dt)) s = L.g.select(L.g.compare(Cmp::NE, x, x), L.cst_like(0, x), s);
  return one(L.g.convert(s, dt));
}

std::vector<Value> isnan(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  if (!at::isFloatingType(self.scalar_type())) return one(L.g.constant(0, DType::Bool, shape_of(self)));
  Value x = L.in(self);
  return one(L.g.compare(Cmp::NE, x, x));
}

// PyTorch converts a kernel's Scalar arguments with an overflow check (-2 as uint8 raises).
void check_scalar_fits(const at::Scalar& s, at::ScalarType t) {
  AT_DISPATCH_ALL_TYPES_AND3(at::kBool, at::kHalf, at::kBFloat16, t, "check_scalar_fits", [&] { (void)s.to<scalar_t>(); });
}

std::vector<Value> scaled_log(Lower& L, Args a, double inv) {
  DType dt;
  Value x = input(L, a[0], true, &dt);
  return one(L.g.convert(mulc(L, L.g.unary(OpCode::Log, x), inv), dt));
}

std::vector<Value> reciprocal(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], true, &dt);
  return one(L.g.convert(bin(L, OpCode::Div, scal(L, 1, x), x), dt));
}

std::vector<Value> relu(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], false, &dt);
  TORCH_CHECK(dt != DType::Bool, "[", L.op(), "] relu is not implemented for bool tensors");
  return one(L.g.convert(bin(L, OpCode::Max, x, scal(L, 0, x)), dt));
}

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kBeta = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

bool tanh_approx(Lower& L, Args a, size_t i) {
  if (a.size() <= i) return false;
  const std::string& s = a[i].toStringRef();
  TORCH_CHECK(s == "none" || s == "tanh", "[", L.op(), "] approximate must be 'none' or 'tanh'; got '", s, "'");
  return s == "tanh";
}

std::vector<Value> gelu(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], false, &dt);
  Value r;
  if (tanh_approx(L, a, 1)) {
    Value inner = mulc(L, bin(L, OpCode::Add, x, mulc(L, bin(L, OpCode::Mul, x, bin(L, OpCode::Mul, x, x)), kKappa)), kBeta);
    r = bin(L, OpCode::Mul, mulc(L, x, 0.5), addc(L, L.g.unary(OpCode::Tanh, inner), 1));
  } else {
    r = bin(L, OpCode::Mul, mulc(L, x, 0.5), addc(L, L.g.unary(OpCode::Erf, mulc(L, x, kSqrt1_2)), 1));
  }
  return one(L.g.convert(r, dt));
}

std::vector<Value> gelu_backward(Lower& L, Args a) {
  DType dt;
  Value g = input(L, a[0], false, &dt);
  Value x = L.in(a[1].toTensor(), opmath(dt));
  Value d;
  if (tanh_approx(L, a, 2)) {
    Value x2 = bin(L, OpCode::Mul, x, x);
    Value inner = mulc(L, bin(L, OpCode::Add, x, mulc(L, bin(L, OpCode::Mul, x2, x), kKappa)), kBeta);
    Value t = L.g.unary(OpCode::Tanh, inner);
    Value left = mulc(L, x, 0.5), right = addc(L, t, 1);
    Value dleft = mulc(L, right, 0.5);
    Value dright = bin(L, OpCode::Mul, bin(L, OpCode::Mul, left, bin(L, OpCode::Sub, scal(L, 1, t), bin(L, OpCode::Mul, t, t))),
                       mulc(L, addc(L, mulc(L, x2, 3 * kKappa), 1), kBeta));
    d = bin(L, OpCode::Add, dleft, dright);
  } else {
    Value cdf = mulc(L, addc(L, L.g.unary(OpCode::Erf, mulc(L, x, kSqrt1_2)), 1), 0.5);
    Value pdf = mulc(L, L.g.unary(OpCode::Exp, mulc(L, bin(L, OpCode::Mul, x, x), -0.5)), 0.39894228040143267794);
    d = bin(L, OpCode::Add, cdf, bin(L, OpCode::Mul, x, pdf));
  }
  return one(L.g.convert(bin(L, OpCode::Mul, g, d), dt));
}

std::vector<Value> silu(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], false, &dt);
  return one(L.g.convert(bin(L, OpCode::Mul, x, L.g.unary(OpCode::Logistic, x)), dt));
}

std::vector<Value> silu_backward(Lower& L, Args a) {
  DType dt;
  Value g = input(L, a[0], false, &dt);
  Value x = L.in(a[1].toTensor(), opmath(dt));
  Value s = L.g.unary(OpCode::Logistic, x);
  Value d = bin(L, OpCode::Mul, s, addc(L, bin(L, OpCode::Mul, x, bin(L, OpCode::Sub, scal(L, 1, s), s)), 1));
  return one(L.g.convert(bin(L, OpCode::Mul, g, d), dt));
}

std::vector<Value> tanh_backward(Lower& L, Args a) {
  DType dt;
  Value g = input(L, a[0], false, &dt);
  Value y = L.in(a[1].toTensor(), opmath(dt));
  return one(L.g.convert(bin(L, OpCode::Mul, g, bin(L, OpCode::Sub, scal(L, 1, y), bin(L, OpCode::Mul, y, y))), dt));
}

std::vector<Value> sigmoid_backward(Lower& L, Args a) {
  DType dt;
  Value g = input(L, a[0], false, &dt);
  Value y = L.in(a[1].toTensor(), opmath(dt));
  return one(L.g.convert(bin(L, OpCode::Mul, g, bin(L, OpCode::Mul, y, bin(L, OpCode::Sub, scal(L, 1, y), y))), dt));
}

std::vector<Value> threshold_backward(Lower& L, Args a) {
  DType dt = to_ir(result_type(a[0], a[1]), L.op());
  Value g = L.in(a[0].toTensor(), dt), x = L.in(a[1].toTensor(), dt);
  Value th = L.scalar(a[2].toScalar(), dt);
  Value zero = scal(L, 0, g);
  return one(where(L, cmp(L, Cmp::LE, x, th), zero, g));
}

// softshrink_backward / hardshrink_backward(grad_out, self, lambd): grad where |x| > lambd
// (or x is NaN), else 0.
std::vector<Value> shrink_backward(Lower& L, Args a) {
  DType dt = to_ir(result_type(a[0], a[1]), L.op());
  Value g = L.in(a[0].toTensor(), dt), x = L.in(a[1].toTensor(), dt);
  Value lam = L.scalar(a[2].toScalar(), dt);
  Value inside = cmp(L, Cmp::GE, x, L.g.unary(OpCode::Negate, lam));
  Value le = cmp(L, Cmp::LE, x, lam);
  broadcast_all(L, {&inside, &le});
  return one(where(L, L.g.binary(OpCode::And, inside, le), scal(L, 0, g), g));
}

std::vector<Value> threshold(Lower& L, Args a) {
  DType dt;
  Value x = input(L, a[0], false, &dt);
  check_scalar_fits(a[1].toScalar(), a[0].toTensor().scalar_type());
  check_scalar_fits(a[2].toScalar(), a[0].toTensor().scalar_type());
  Value th = L.scalar(a[1].toScalar(), L.g.dtype(x)), v = L.scalar(a[2].toScalar(), L.g.dtype(x));
  return one(L.g.convert(where(L, cmp(L, Cmp::LE, x, th), v, x), dt));
}

// lerp: self + w * (end - self), with PyTorch's two-sided form for accuracy.
std::vector<Value> lerp(Lower& L, Args a) {
  at::ScalarType st = a[0].toTensor().scalar_type();  // CPU: end and a weight of rank >= 1 have self's dtype
  TORCH_CHECK(a[1].toTensor().scalar_type() == st, "[", L.op(), "] expected dtype ", st, " for `end`; got ",
              a[1].toTensor().scalar_type());
  TORCH_CHECK(!a[2].isTensor() || a[2].toTensor().dim() == 0 || a[2].toTensor().scalar_type() == st, "[", L.op(),
              "] expected dtype ", st,
              " for `weight`; got ", a[2].isTensor() ? a[2].toTensor().scalar_type() : st);
  DType dt = to_ir(st, L.op()), ct = opmath(dt);
  Value s = L.in(a[0].toTensor(), ct), e = L.in(a[1].toTensor(), ct), w = arg(L, a[2], ct);
  broadcast_all(L, {&s, &e, &w});
  Value diff = L.g.binary(OpCode::Sub, e, s);
  auto lo = [&] { return L.g.binary(OpCode::Add, s, L.g.binary(OpCode::Mul, w, diff)); };
  auto hi = [&] {
    return L.g.binary(OpCode::Sub, e, L.g.binary(OpCode::Mul, diff, L.g.binary(OpCode::Sub, L.cst_like(1, w), w)));
  };
  // A number weight (an optimizer's 1 - beta1): the side is known here (the value is part of
  // the fast path's signature, as for any scalar() operand), so only that side is computed;
  // |w| < 0.5 compared in the compute dtype, as the select below does.
  if (!a[2].isTensor() && !a[2].toScalar().isComplex() && (ct == DType::F32 || ct == DType::F64)) {
    double wv = a[2].toScalar().toDouble();
    bool small = ct == DType::F64 ? std::abs(wv) < 0.5 : std::abs(static_cast<float>(wv)) < 0.5f;
    return one(L.g.convert(small ? lo() : hi(), dt));
  }
  Value small = L.g.compare(Cmp::LT, L.g.unary(OpCode::Abs, w), L.cst_like(0.5, w));
  return one(L.g.convert(L.g.select(small, lo(), hi()), dt));
}

std::vector<Value> addcmuldiv(Lower& L, Args a, OpCode op) {
  DType dt = to_ir(result_type(a[0], a[1], a[2]), L.op()), ct = opmath(dt);
  Value s = L.in(a[0].toTensor(), ct), t1 = L.in(a[1].toTensor(), ct), t2 = L.in(a[2].toTensor(), ct);
  Value v = L.scalar_arg(a[3], ct);
  // CPU's order, self + value * t1 op t2 = self + ((value * t1) op t2): near the dtype's max,
  // value * (t1 / t2) stays finite where CPU's overflows to inf.
  return one(L.g.convert(bin(L, OpCode::Add, s, bin(L, op, bin(L, OpCode::Mul, v, t1), t2)), dt));
}

std::vector<Value> fill(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  DType dt = to_ir(self.scalar_type(), L.op());
  Value v = L.scalar_arg(a[1], dt);
  if (a[1].isTensor())
    TORCH_CHECK(a[1].toTensor().dim() == 0, "[", L.op(), "] fill_ only supports 0-dimension value tensor; got ", a[1].toTensor().dim(), " dims");
  return one(L.bcast(v, shape_of(self)));
}

std::vector<Value> zero(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  return one(L.g.constant(0, to_ir(self.scalar_type(), L.op()), shape_of(self)));
}

#define FU(name, op) {name, float_unary<OpCode::op>}, {name ".out", float_unary<OpCode::op>}, {name "_", float_unary<OpCode::op>}
#define RU(name, op) {name, rounding<OpCode::op>}, {name ".out", rounding<OpCode::op>}, {name "_", rounding<OpCode::op>}
#define V3(name, fn) {name, fn}, {name ".out", fn}, {name "_", fn}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      FU("exp", Exp), FU("expm1", Expm1), FU("log", Log), FU("log1p", Log1p), FU("sqrt", Sqrt),
      FU("rsqrt", Rsqrt), FU("sin", Sin), FU("cos", Cos), FU("tan", Tan), FU("tanh", Tanh),
      FU("sigmoid", Logistic), FU("erf", Erf),
      RU("floor", Floor), RU("ceil", Ceil), RU("round", RoundEven),
      V3("trunc", [](Lower& L, Args a) {
        DType dt;
        Value x = input(L, a[0], false, &dt);
        return one(ir::is_float(dt) ? L.g.convert(trunc_v(L, x), dt) : x); }),
      V3("neg", neg), V3("abs", abs), V3("sign", sign), V3("sgn", sign), V3("reciprocal", reciprocal),
      V3("log2", [](Lower& L, Args a) { return scaled_log(L, a, 1.0 / std::log(2.0)); }),
      V3("log10", [](Lower& L, Args a) { return scaled_log(L, a, 1.0 / std::log(10.0)); }),
      {"relu", relu}, {"relu_", relu},
      {"gelu", gelu}, {"gelu_", gelu}, {"gelu.out", gelu},
      {"gelu_backward", gelu_backward}, {"gelu_backward.grad_input", gelu_backward},
      {"silu", silu}, {"silu_", silu}, {"silu.out", silu},
      {"silu_backward", silu_backward}, {"silu_backward.grad_input", silu_backward},
      {"tanh_backward", tanh_backward}, {"tanh_backward.grad_input", tanh_backward},
      {"sigmoid_backward", sigmoid_backward}, {"sigmoid_backward.grad_input", sigmoid_backward},
      {"threshold_backward", threshold_backward}, {"threshold_backward.grad_input", threshold_backward},
      {"threshold", threshold}, {"threshold_", threshold}, {"threshold.out", threshold},
      {"softshrink_backward", shrink_backward}, {"softshrink_backward.grad_input", shrink_backward},
      {"hardshrink_backward", shrink_backward}, {"hardshrink_backward.grad_input", shrink_backward},
      {"lerp.Scalar", lerp}, {"lerp_.Scalar", lerp}, {"lerp.Scalar_out", lerp},
      {"lerp.Tensor", lerp}, {"lerp_.Tensor", lerp}, {"lerp.Tensor_out", lerp},
      {"addcmul", [](Lower& L, Args a) { return addcmuldiv(L, a, OpCode::Mul); }},
      {"addcmul_", [](Lower& L, Args a) { return addcmuldiv(L, a, OpCode::Mul); }},
      {"addcmul.out", [](Lower& L, Args a) { return addcmuldiv(L, a, OpCode::Mul); }},
      {"addcdiv", [](Lower& L, Args a) { return addcmuldiv(L, a, OpCode::Div); }},
      {"addcdiv_", [](Lower& L, Args a) { return addcmuldiv(L, a, OpCode::Div); }},
      {"addcdiv.out", [](Lower& L, Args a) { return addcmuldiv(L, a, OpCode::Div); }},
      {"fill_.Scalar", fill}, {"fill_.Tensor", fill}, {"zero_", zero},
      {"isnan", isnan},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
