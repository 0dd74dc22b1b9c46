// Shared by the decompose*.cpp files: an elementwise emitter (constants splatted to one
// shape and dtype, arithmetic, compares, select, Horner and Chebyshev series) and the
// per-family lowering entry points. Not a public header.
#pragma once
#include <cstddef>

#include "ir/graph.h"

namespace torch_tpu::ir::decomp {

// Builds elementwise ops on values of one shape and one dtype `t` in graph `g`.
struct Ew {
  Graph& g;
  Shape shape;
  DType t;

  Value c(double v) const { return g.constant(v, t, shape); }
  Value un(OpCode op, Value a) const { return g.unary(op, a); }
  Value bin(OpCode op, Value a, Value b) const { return g.binary(op, a, b); }
  Value add(Value a, Value b) const { return bin(OpCode::Add, a, b); }
  Value sub(Value a, Value b) const { return bin(OpCode::Sub, a, b); }
  Value mul(Value a, Value b) const { return bin(OpCode::Mul, a, b); }
  Value div(Value a, Value b) const { return bin(OpCode::Div, a, b); }
  Value neg(Value a) const { return un(OpCode::Negate, a); }
  Value abs(Value a) const { return un(OpCode::Abs, a); }
  Value exp(Value a) const { return un(OpCode::Exp, a); }
  Value log(Value a) const { return un(OpCode::Log, a); }
  Value sqrt(Value a) const { return un(OpCode::Sqrt, a); }
  Value sin(Value a) const { return un(OpCode::Sin, a); }
  Value cos(Value a) const { return un(OpCode::Cos, a); }
  Value floor(Value a) const { return un(OpCode::Floor, a); }
  Value cmp(Cmp d, Value a, Value b) const { return g.compare(d, a, b); }
  Value lt(Value a, Value b) const { return cmp(Cmp::LT, a, b); }
  Value le(Value a, Value b) const { return cmp(Cmp::LE, a, b); }
  Value gt(Value a, Value b) const { return cmp(Cmp::GT, a, b); }
  Value ge(Value a, Value b) const { return cmp(Cmp::GE, a, b); }
  Value eq(Value a, Value b) const { return cmp(Cmp::EQ, a, b); }
  Value ne(Value a, Value b) const { return cmp(Cmp::NE, a, b); }
  Value sel(Value p, Value a, Value b) const { return g.select(p, a, b); }
  Value land(Value p, Value q) const { return bin(OpCode::And, p, q); }
  Value lor(Value p, Value q) const { return bin(OpCode::Or, p, q); }
  Value lnot(Value p) const { return un(OpCode::Not, p); }
  Value is_nan(Value a) const { return ne(a, a); }
  Value is_inf(Value a) const;  // |a| == inf

  // c[0] z^(n-1) + ... + c[n-1], as the host loops `r = r * z + c[i]` from r = c[0]
  // (lead_one: Cephes' p1evl, an implicit leading coefficient 1 before c[0]).
  Value horner(const double* c, size_t n, Value z, bool lead_one = false) const;
  // Cephes chbevl: the Chebyshev series sum_i c[i] T_i(x/2), Clenshaw's recurrence.
  Value chbevl(Value x, const double* c, size_t n) const;
};

// Family lowerings: `x` (and `n`) already in the compute dtype (f32 or f64); they return a
// value of that dtype. Each is the host kernel's algorithm.
Value bessel(Ew& e, OpCode op, Value x);          // BesselJ0 ... BesselK1
Value airy_ai(Ew& e, Value x);
Value orthogonal_poly(Ew& e, OpCode op, Value x, Value n);  // Chebyshev ... LegendreP

}  // namespace torch_tpu::ir::decomp
