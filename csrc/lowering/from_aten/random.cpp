// Random ops on the device's counter-based Philox generator: uniform_, normal_,
// bernoulli, random_, native_dropout (+ backward). A generator reserves numel counters per
// call, so results depend only on the seed and the order of random calls.
#include <cmath>
#include <limits>

#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;

std::optional<at::Generator> gen_arg(const c10::IValue& v) {
  if (v.isNone()) return std::nullopt;
  return v.toGenerator();
}

Value rng(Lower& L, OpCode op, const ir::Shape& shape, DType dt, const c10::IValue& gen) {
  Value st = L.rng_state(gen_arg(gen), static_cast<uint64_t>(ir::numel(shape)));
  return L.g.op(op, {st}, {}, shape, dt);
}

DType float_math(Lower& L, const at::Tensor& self) {
  DType dt = to_ir(self.scalar_type(), L.op());
  return ir::is_float(dt) ? opmath(dt) : DType::F64;
}

std::vector<Value> uniform(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  double from = a[1].toDouble(), to = a[2].toDouble();
  TORCH_CHECK(from <= to, "[", L.op(), "] uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  DType ct = float_math(L, self);
  Value u = rng(L, OpCode::RngUniform, shape_of(self), ct, a[3]);
  Value r = addc(L, mulc(L, u, to - from), from);
  return one(L.g.convert(r, to_ir(self.scalar_type(), L.op())));
}

std::vector<Value> normal(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  double mean = a[1].toDouble(), std = a[2].toDouble();
  TORCH_CHECK(std >= 0.0, "[", L.op(), "] normal expects std >= 0.0, but found std ", std);
  DType ct = float_math(L, self);
  Value z = rng(L, OpCode::RngNormal, shape_of(self), ct, a[3]);
  return one(L.g.convert(addc(L, mulc(L, z, std), mean), to_ir(self.scalar_type(), L.op())));
}

// Probabilities outside [0, 1] (or NaN) raise at the next sync, as CPU raises at once.
void p_in_range(Lower& L, Value p) {
  Value ok = L.g.binary(OpCode::And, cmp(L, Cmp::GE, p, scal(L, 0, p)), cmp(L, Cmp::LE, p, scal(L, 1, p)));
  L.check(any_true(L, L.g.unary(OpCode::Not, ok)),
          std::string("[") + L.op() + "] Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
}

std::vector<Value> bernoulli_p(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  DType ct = float_math(L, self);
  Value u = rng(L, OpCode::RngUniform, shape_of(self), ct, a[2]);
  Value p = a[1].isTensor() ? L.in(a[1].toTensor(), ct) : L.scalar(a[1].toScalar(), ct);
  if (a[1].isScalar()) {
    double pv = a[1].toDouble();
    TORCH_CHECK(pv >= 0 && pv <= 1, "[", L.op(), "] bernoulli_ expects p to be in [0, 1], but got p=", pv);
  } else {
    p_in_range(L, p);
  }
  return one(L.g.convert(cmp(L, Cmp::LT, u, p), to_ir(self.scalar_type(), L.op())));
}

// bernoulli(self = probabilities, generator)
std::vector<Value> bernoulli_t(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  Value u = rng(L, OpCode::RngUniform, shape_of(self), ct, a[1]);
  Value p = L.in(self, ct);
  p_in_range(L, p);
  return one(L.g.convert(cmp(L, Cmp::LT, u, p), dt));
}

// Integers in [from, to): floor(u * (to - from)) + from, u in f64.
Value random_range(Lower& L, const at::Tensor& self, double from, double to, const c10::IValue& gen) {
  TORCH_CHECK(from < to, "[", L.op(), "] random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", to);
  Value u = rng(L, OpCode::RngUniform, shape_of(self), DType::F64, gen);
  Value r = addc(L, L.g.unary(OpCode::Floor, mulc(L, u, to - from)), from);
  return L.g.convert(r, to_ir(self.scalar_type(), L.op()));
}

double default_to(const at::Tensor& self) {
  switch (self.scalar_type()) {
    case at::kFloat: return double(1 << 24);
    case at::kDouble: return std::ldexp(1.0, 53);
    case at::kBFloat16: return 256.0;
    case at::kHalf: return 2048.0;
    case at::kBool: return 2.0;
    case at::kByte: return 256.0;
    case at::kChar: return 128.0;
    case at::kShort: return 32768.0;
    case at::kInt: return 2147483648.0;
    default: return std::ldexp(1.0, 53);
  }
}

std::vector<Value> random_from(Lower& L, Args a) {
  const at::Tensor& self = a[0].toTensor();
  double from = double(a[1].toInt());
  double to = a[2].isNone() ? default_to(self) : double(a[2].toInt());
  return one(random_range(L, self, from, to, a[3]));
}
std::vector<Value> random_to(Lower& L, Args a) {
  return one(random_range(L, a[0].toTensor(), 0, double(a[1].toInt()), a[2]));
}
std::vector<Value> random_plain(Lower& L, Args a) {
  return one(random_range(L, a[0].toTensor(), 0, default_to(a[0].toTensor()), a[1]));
}

// native_dropout(input, p, train?) -> (output, mask)
std::vector<Value> dropout(Lower& L, Args a) {
  const at::Tensor& x = a[0].toTensor();
  double p = a[1].toDouble();
  TORCH_CHECK(p >= 0 && p <= 1, "[", L.op(), "] dropout probability has to be between 0 and 1, but got ", p);
  bool train = a[2].isNone() ? true : a[2].toBool();
  DType dt = to_ir(x.scalar_type(), L.op()), ct = opmath(dt);
  Value in = L.in(x, ct);
  if (!train || p == 0) return {L.g.convert(in, dt), L.g.constant(1, DType::Bool, shape_of(x))};
  Value u = rng(L, OpCode::RngUniform, shape_of(x), ct, c10::IValue());
  Value keep = L.g.compare(Cmp::LT, u, L.cst_like(1 - p, u));
  double scale = p == 1 ? 0.0 : 1.0 / (1 - p);
  Value out = L.g.select(keep, mulc(L, in, scale), L.cst_like(0, in));
  return {L.g.convert(out, dt), keep};
}

// native_dropout_backward(grad_output, mask, scale)
std::vector<Value> dropout_backward(Lower& L, Args a) {
  const at::Tensor& g = a[0].toTensor();
  // grad * mask * scale as CPU computes it: the grad and mask dtypes promote (a non-bool mask
  // multiplies by its values), and an integer product times the float scale gives the default
  // float.
  DType dt = to_ir(float_type(result_type(a[0], a[1])), L.op()), ct = opmath(dt);
  Value gv = L.in(g, ct);
  // A product, not a select: a NaN/Inf gradient where the mask is 0 gives NaN, as on CPU.
  Value mask = L.in(a[1].toTensor(), ct);
  Value s = bin(L, OpCode::Mul, bin(L, OpCode::Mul, gv, mask), L.scalar(a[2].toScalar(), ct));
  return one(L.g.convert(s, dt));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"uniform_", uniform}, {"normal_", normal},
      {"bernoulli_.float", bernoulli_p}, {"bernoulli_.Tensor", bernoulli_p},
      {"bernoulli", bernoulli_t}, {"bernoulli.out", bernoulli_t},
      {"random_.from", random_from}, {"random_.to", random_to}, {"random_", random_plain},
      {"native_dropout", dropout}, {"native_dropout_backward", dropout_backward},
      {"native_dropout_backward.out", dropout_backward},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
