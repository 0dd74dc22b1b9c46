// Binary arithmetic, comparison, logical and bitwise ops, where and clamp, with ATen's
// type promotion and broadcasting. bf16/f16 compute in f32 and round once (as PyTorch CPU).
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;

struct Promoted {
  DType out, math;
};
Promoted promote(Lower& L, const c10::IValue& a, const c10::IValue& b, bool to_float = false) {
  at::ScalarType rt = result_type(a, b);
  if (to_float) rt = float_type(rt);
  DType dt = to_ir(rt, L.op());
  return {dt, opmath(dt)};
}

// self (op) other*alpha, for add/sub; bool add is logical or.
std::vector<Value> add_sub(Lower& L, Args a, bool sub) {
  Promoted p = promote(L, a[0], a[1]);
  if (p.out == DType::Bool) {
    TORCH_CHECK(!sub, "[", L.op(), "] Subtraction, the `-` operator, with two bool tensors is not supported");
    Value x = arg(L, a[0], p.out), y = arg(L, a[1], p.out);
    if (a.size() > 2 && a[2].isScalar() && !a[2].toScalar().toBool()) y = L.g.constant(0, DType::Bool, L.g.shape(y));
    return one(bin(L, OpCode::Or, x, y));
  }
  Value x = operand(L, a[0], p.math), y = operand(L, a[1], p.math);
  if (a.size() > 2 && a[2].isScalar() && !(a[2].toScalar().equal(1)))  // x + y * 1 == x + y
    y = bin(L, OpCode::Mul, y, L.scalar_arg(a[2], p.math));
  return one(L.g.convert(bin(L, sub ? OpCode::Sub : OpCode::Add, x, y), p.out));
}

std::vector<Value> rsub(Lower& L, Args a) {
  Promoted p = promote(L, a[0], a[1]);
  Value x = operand(L, a[0], p.math), y = operand(L, a[1], p.math);
  if (a.size() > 2 && !(a[2].toScalar().equal(1))) x = bin(L, OpCode::Mul, x, L.scalar_arg(a[2], p.math));
  return one(L.g.convert(bin(L, OpCode::Sub, y, x), p.out));
}

std::vector<Value> mul(Lower& L, Args a) {
  Promoted p = promote(L, a[0], a[1]);
  OpCode op = p.out == DType::Bool ? OpCode::And : OpCode::Mul;
  return one(L.g.convert(bin(L, op, operand(L, a[0], p.math), operand(L, a[1], p.math)), p.out));
}

Value floor_div(Lower& L, Value x, Value y) {
  DType dt = L.g.dtype(x);
  if (ir::is_float(dt)) {
    // PyTorch's div_floor_floating: (x - fmod(x, y)) / y, corrected to the floor.
    Value mod = bin(L, OpCode::Rem, x, y);
    Value div = bin(L, OpCode::Div, bin(L, OpCode::Sub, x, mod), y);
    Value zero = scal(L, 0, x);
    Value fix = L.g.binary(OpCode::And, cmp(L, Cmp::NE, mod, L.bcast(zero, L.g.shape(mod))),
                           cmp(L, Cmp::NE, cmp(L, Cmp::LT, y, L.bcast(zero, L.g.shape(y))),
                               cmp(L, Cmp::LT, mod, L.bcast(zero, L.g.shape(mod)))));
    div = where(L, fix, addc(L, div, -1), div);
    Value fl = L.g.unary(OpCode::Floor, div);
    fl = where(L, cmp(L, Cmp::GT, bin(L, OpCode::Sub, div, fl), scal(L, 0.5, div)), addc(L, fl, 1), fl);
    // y == 0: plain division (inf/nan); div == 0: a zero with the quotient's sign.
    Value q = bin(L, OpCode::Div, x, y);
    Value signed_zero = where(L, cmp(L, Cmp::LT, q, scal(L, 0, q)), scal(L, -0.0, q), scal(L, 0.0, q));
    Value res = where(L, cmp(L, Cmp::EQ, div, scal(L, 0, div)), signed_zero, fl);
    return where(L, cmp(L, Cmp::EQ, L.bcast(y, L.g.shape(q)), scal(L, 0, q)), q, res);
  }
  Value q = bin(L, OpCode::Div, x, y);
  Value r = bin(L, OpCode::Rem, x, y);
  Value zero = scal(L, 0, x);
  Value adjust = L.g.binary(OpCode::And, cmp(L, Cmp::NE, r, L.bcast(zero, L.g.shape(r))),
                            cmp(L, Cmp::NE, cmp(L, Cmp::LT, r, L.bcast(zero, L.g.shape(r))),
                                cmp(L, Cmp::LT, L.bcast(y, L.g.shape(r)), L.bcast(zero, L.g.shape(r)))));
  return where(L, adjust, addc(L, q, -1), q);
}

// The divisor of an integer division or remainder: zero raises "ZeroDivisionError" as on CPU.
// A Scalar (or CPU 0-dim) divisor is checked here and so bound by value (not as an all-values
// operand), unless the dividend is empty (CPU divides no element; tril_indices(0, 0) relies on
// it); a tpu tensor divisor is checked on the device (raised at the next sync).
Value int_divisor(Lower& L, const c10::IValue& x, const c10::IValue& v, DType dt) {
  if (v.isTensor() && v.toTensor().is_privateuseone()) {
    Value y = L.in(v.toTensor(), dt);
    L.check(any_true(L, cmp(L, Cmp::EQ, y, scal(L, 0, y))), std::string("[") + L.op() + "] ZeroDivisionError");
    return y;
  }
  at::Scalar s = v.isTensor() ? v.toTensor().item() : v.toScalar();
  bool empty = x.isTensor() && x.toTensor().numel() == 0;
  TORCH_CHECK(empty || s.toComplexDouble() != 0.0, "[", L.op(), "] ZeroDivisionError");
  return arg(L, v, dt);
}

// x op y for div/remainder/fmod: float math takes any divisor; integer math checks it.
Value divisor(Lower& L, const c10::IValue& x, const c10::IValue& v, DType dt) {
  return ir::is_float(dt) ? operand(L, v, dt) : int_divisor(L, x, v, dt);
}

std::vector<Value> div(Lower& L, Args a) {
  std::optional<std::string> mode;
  if (a.size() > 2 && a[2].isString()) mode = a[2].toStringRef();
  Promoted p = promote(L, a[0], a[1], /*to_float=*/!mode);
  Value x = operand(L, a[0], p.math), y = divisor(L, a[0], a[1], p.math);
  Value r;
  if (!mode) {
    r = bin(L, OpCode::Div, x, y);
  } else if (*mode == "trunc") {
    r = bin(L, OpCode::Div, x, y);
    if (ir::is_float(p.math)) {
      Value s = L.g.unary(OpCode::Sign, r);
      r = bin(L, OpCode::Mul, s, L.g.unary(OpCode::Floor, L.g.unary(OpCode::Abs, r)));
    }
  } else {
    TORCH_CHECK(*mode == "floor", "[", L.op(), "] rounding_mode must be None, 'trunc' or 'floor'; got '", *mode, "'");
    r = floor_div(L, x, y);
  }
  return one(L.g.convert(r, p.out));
}

// floor_divide(self, other): div with rounding_mode="floor" (integers stay integers).
std::vector<Value> floor_divide(Lower& L, Args a) {
  Promoted p = promote(L, a[0], a[1], /*to_float=*/false);
  Value x = operand(L, a[0], p.math), y = divisor(L, a[0], a[1], p.math);
  return one(L.g.convert(floor_div(L, x, y), p.out));
}

// Python-style remainder (sign of the divisor).
std::vector<Value> remainder(Lower& L, Args a) {
  Promoted p = promote(L, a[0], a[1]);
  Value x = arg(L, a[0], p.math), y = divisor(L, a[0], a[1], p.math);
  Value r = bin(L, OpCode::Rem, x, y);
  Value zero = scal(L, 0, r);
  Value yb = L.bcast(y, L.g.shape(r));
  Value fix = L.g.binary(OpCode::And, cmp(L, Cmp::NE, r, L.bcast(zero, L.g.shape(r))),
                         cmp(L, Cmp::NE, cmp(L, Cmp::LT, r, L.bcast(zero, L.g.shape(r))),
                             cmp(L, Cmp::LT, yb, L.bcast(zero, L.g.shape(r)))));
  return one(L.g.convert(where(L, fix, bin(L, OpCode::Add, r, yb), r), p.out));
}

std::vector<Value> fmod(Lower& L, Args a) {
  Promoted p = promote(L, a[0], a[1]);
  return one(L.g.convert(bin(L, OpCode::Rem, arg(L, a[0], p.math), divisor(L, a[0], a[1], p.math)), p.out));
}

std::vector<Value> binop(Lower& L, Args a, OpCode op) {
  Promoted p = promote(L, a[0], a[1]);
  return one(L.g.convert(bin(L, op, arg(L, a[0], p.math), arg(L, a[1], p.math)), p.out));
}

std::vector<Value> pow(Lower& L, Args a) {
  Promoted p = promote(L, a[0], a[1]);
  Value x = arg(L, a[0], p.math);
  if (a[1].isScalar()) {
    double e = a[1].toScalar().toDouble();
    if (e == 2) return one(L.g.convert(bin(L, OpCode::Mul, x, x), p.out));
    if (e == 1) return one(L.g.convert(x, p.out));
    if (e == 0.5 && ir::is_float(p.math)) return one(L.g.convert(L.g.unary(OpCode::Sqrt, x), p.out));
  }
  if (ir::is_int(p.math) && a[1].isTensor() == false)
    TORCH_CHECK(a[1].toScalar().toLong() >= 0 || a[0].isScalar(), "[", L.op(), "] Integers to negative integer powers are not allowed.");
  return one(L.g.convert(bin(L, OpCode::Pow, x, arg(L, a[1], p.math)), p.out));
}

std::vector<Value> compare(Lower& L, Args a, Cmp d) {
  DType dt = to_ir(result_type(a[0], a[1]), L.op());
  return one(cmp(L, d, arg(L, a[0], dt), arg(L, a[1], dt)));
}

Value truthy(Lower& L, const c10::IValue& v) {
  if (v.isTensor() && v.toTensor().scalar_type() == at::kBool) return L.in(v.toTensor());
  DType dt = v.isTensor() ? to_ir(v.toTensor().scalar_type(), L.op()) : DType::F64;
  Value x = arg(L, v, dt);
  return cmp(L, Cmp::NE, x, scal(L, 0, x));
}

std::vector<Value> logical(Lower& L, Args a, OpCode op) {
  return one(bin(L, op, truthy(L, a[0]), truthy(L, a[1])));
}

std::vector<Value> bitwise(Lower& L, Args a, OpCode op) {
  DType dt = to_ir(result_type(a[0], a[1]), L.op());
  TORCH_CHECK(!ir::is_float(dt), "[", L.op(), "] bitwise ops need integer or bool tensors; got ", to_aten(dt));
  return one(bin(L, op, arg(L, a[0], dt), arg(L, a[1], dt)));
}

std::vector<Value> where_self(Lower& L, Args a) {
  const at::Tensor& c = a[0].toTensor();
  TORCH_CHECK(c.scalar_type() == at::kBool || c.scalar_type() == at::kByte, "[", L.op(),
              "] condition must be a bool tensor; got ", c.scalar_type());
  Value pred = L.in(c, DType::Bool);
  DType dt = to_ir(result_type(a[1], a[2]), L.op());
  return one(where(L, pred, arg(L, a[1], dt), arg(L, a[2], dt)));
}

// clamp / clamp_min / clamp_max with optional Scalar-or-Tensor bounds.
std::vector<Value> clamp(Lower& L, const c10::IValue& self, const c10::IValue& lo, const c10::IValue& hi) {
  TORCH_CHECK(!lo.isNone() || !hi.isNone(), "[", L.op(), "] At least one of 'min' or 'max' must not be None");
  at::ScalarType rt = self.toTensor().scalar_type();
  if (!lo.isNone() && !hi.isNone()) rt = result_type(self, lo, hi);
  else rt = result_type(self, lo.isNone() ? hi : lo);
  DType dt = to_ir(rt, L.op());
  Value x = operand(L, self, dt);
  if (!lo.isNone()) x = bin(L, OpCode::Max, x, operand(L, lo, dt));
  if (!hi.isNone()) x = bin(L, OpCode::Min, x, operand(L, hi, dt));
  return one(x);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  auto add = [](Lower& L, Args a) { return add_sub(L, a, false); };
  auto sub = [](Lower& L, Args a) { return add_sub(L, a, true); };
  register_ops(m, {
      {"add.Tensor", add}, {"add_.Tensor", add}, {"add.out", add},
      {"add.Scalar", add}, {"add_.Scalar", add}, {"add.Scalar_out", add},
      {"sub.Tensor", sub}, {"sub_.Tensor", sub}, {"sub.out", sub},
      {"sub.Scalar", sub}, {"sub_.Scalar", sub}, {"sub.Scalar_out", sub},
      {"rsub.Tensor", rsub}, {"rsub.Scalar", rsub},
      {"mul.Tensor", mul}, {"mul_.Tensor", mul}, {"mul.out", mul},
      {"mul.Scalar", mul}, {"mul_.Scalar", mul}, {"mul.Scalar_out", mul},
      {"div.Tensor", div}, {"div_.Tensor", div}, {"div.out", div},
      {"div.Scalar", div}, {"div_.Scalar", div}, {"div.Scalar_out", div},
      {"div.Tensor_mode", div}, {"div_.Tensor_mode", div}, {"div.out_mode", div},
      {"div.Scalar_mode", div}, {"div_.Scalar_mode", div}, {"div.Scalar_mode_out", div},
      {"floor_divide", floor_divide}, {"floor_divide_.Tensor", floor_divide}, {"floor_divide.out", floor_divide},
      {"remainder.Tensor", remainder}, {"remainder_.Tensor", remainder}, {"remainder.Tensor_out", remainder},
      {"remainder.Scalar", remainder}, {"remainder_.Scalar", remainder}, {"remainder.Scalar_out", remainder},
      {"fmod.Tensor", fmod}, {"fmod.Scalar", fmod}, {"fmod_.Tensor", fmod}, {"fmod_.Scalar", fmod},
      {"fmod.Tensor_out", fmod}, {"fmod.Scalar_out", fmod},
      {"pow.Tensor_Tensor", pow}, {"pow_.Tensor", pow}, {"pow.Tensor_Tensor_out", pow},
      {"pow.Tensor_Scalar", pow}, {"pow_.Scalar", pow}, {"pow.Tensor_Scalar_out", pow},
      {"pow.Scalar", pow}, {"pow.Scalar_out", pow},
      {"maximum", [](Lower& L, Args a) { return binop(L, a, OpCode::Max); }},
      {"maximum.out", [](Lower& L, Args a) { return binop(L, a, OpCode::Max); }},
      {"minimum", [](Lower& L, Args a) { return binop(L, a, OpCode::Min); }},
      {"minimum.out", [](Lower& L, Args a) { return binop(L, a, OpCode::Min); }},
      {"atan2", [](Lower& L, Args a) {
         at::ScalarType rt = float_type(result_type(a[0], a[1]));
         DType dt = to_ir(rt, L.op());
         return one(L.g.convert(bin(L, OpCode::Atan2, arg(L, a[0], opmath(dt)), arg(L, a[1], opmath(dt))), dt)); }},
      {"where.self", where_self}, {"where.self_out", where_self},
      {"clamp", [](Lower& L, Args a) { return clamp(L, a[0], a[1], a[2]); }},
      {"clamp_", [](Lower& L, Args a) { return clamp(L, a[0], a[1], a[2]); }},
      {"clamp.out", [](Lower& L, Args a) { return clamp(L, a[0], a[1], a[2]); }},
      {"clamp.Tensor", [](Lower& L, Args a) { return clamp(L, a[0], a[1], a[2]); }},
      {"clamp_.Tensor", [](Lower& L, Args a) { return clamp(L, a[0], a[1], a[2]); }},
      {"clamp.Tensor_out", [](Lower& L, Args a) { return clamp(L, a[0], a[1], a[2]); }},
      {"clamp_min", [](Lower& L, Args a) { return clamp(L, a[0], a[1], c10::IValue()); }},
      {"clamp_min_", [](Lower& L, Args a) { return clamp(L, a[0], a[1], c10::IValue()); }},
      {"clamp_min.out", [](Lower& L, Args a) { return clamp(L, a[0], a[1], c10::IValue()); }},
      {"clamp_min.Tensor", [](Lower& L, Args a) { return clamp(L, a[0], a[1], c10::IValue()); }},
      {"clamp_max", [](Lower& L, Args a) { return clamp(L, a[0], c10::IValue(), a[1]); }},
      {"clamp_max_", [](Lower& L, Args a) { return clamp(L, a[0], c10::IValue(), a[1]); }},
      {"clamp_max.out", [](Lower& L, Args a) { return clamp(L, a[0], c10::IValue(), a[1]); }},
      {"clamp_max.Tensor", [](Lower& L, Args a) { return clamp(L, a[0], c10::IValue(), a[1]); }},
      {"logical_and", [](Lower& L, Args a) { return logical(L, a, OpCode::And); }},
      {"logical_and.out", [](Lower& L, Args a) { return logical(L, a, OpCode::And); }},
      {"logical_and_", [](Lower& L, Args a) { return logical(L, a, OpCode::And); }},
      {"logical_or", [](Lower& L, Args a) { return logical(L, a, OpCode::Or); }},
      {"logical_or.out", [](Lower& L, Args a) { return logical(L, a, OpCode::Or); }},
      {"logical_or_", [](Lower& L, Args a) { return logical(L, a, OpCode::Or); }},
      {"logical_xor", [](Lower& L, Args a) { return logical(L, a, OpCode::Xor); }},
      {"logical_xor.out", [](Lower& L, Args a) { return logical(L, a, OpCode::Xor); }},
      {"logical_xor_", [](Lower& L, Args a) { return logical(L, a, OpCode::Xor); }},
      {"bitwise_and.Tensor", [](Lower& L, Args a) { return bitwise(L, a, OpCode::And); }},
      {"bitwise_and.Tensor_out", [](Lower& L, Args a) { return bitwise(L, a, OpCode::And); }},
      {"bitwise_and_.Tensor", [](Lower& L, Args a) { return bitwise(L, a, OpCode::And); }},
      {"bitwise_and.Scalar", [](Lower& L, Args a) { return bitwise(L, a, OpCode::And); }},
      {"bitwise_or.Tensor", [](Lower& L, Args a) { return bitwise(L, a, OpCode::Or); }},
      {"bitwise_or.Tensor_out", [](Lower& L, Args a) { return bitwise(L, a, OpCode::Or); }},
      {"bitwise_or_.Tensor", [](Lower& L, Args a) { return bitwise(L, a, OpCode::Or); }},
      {"bitwise_or.Scalar", [](Lower& L, Args a) { return bitwise(L, a, OpCode::Or); }},
      {"bitwise_xor.Tensor", [](Lower& L, Args a) { return bitwise(L, a, OpCode::Xor); }},
      {"bitwise_xor.Tensor_out", [](Lower& L, Args a) { return bitwise(L, a, OpCode::Xor); }},
      {"bitwise_xor_.Tensor", [](Lower& L, Args a) { return bitwise(L, a, OpCode::Xor); }},
      {"bitwise_xor.Scalar", [](Lower& L, Args a) { return bitwise(L, a, OpCode::Xor); }},
  });
#define CMP(name, dir)                                                                      \
  register_ops(m, {{name ".Tensor", [](Lower& L, Args a) { return compare(L, a, dir); }},    \
                   {name ".Scalar", [](Lower& L, Args a) { return compare(L, a, dir); }},    \
                   {name ".Tensor_out", [](Lower& L, Args a) { return compare(L, a, dir); }}, \
                   {name ".Scalar_out", [](Lower& L, Args a) { return compare(L, a, dir); }}, \
                   {name "_.Tensor", [](Lower& L, Args a) { return compare(L, a, dir); }},   \
                   {name "_.Scalar", [](Lower& L, Args a) { return compare(L, a, dir); }}});
  CMP("eq", Cmp::EQ) CMP("ne", Cmp::NE) CMP("lt", Cmp::LT) CMP("le", Cmp::LE) CMP("gt", Cmp::GT) CMP("ge", Cmp::GE)
#undef CMP
}

}  // namespace
}  // namespace torch_tpu::lowering
