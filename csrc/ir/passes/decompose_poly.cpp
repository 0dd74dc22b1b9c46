// Decompositions of the orthogonal polynomials p(x, n) (Chebyshev T/U/V/W and shifted,
// Hermite H/He, Laguerre L, Legendre P) with a per-element degree n: the host's algorithm
// (special_poly.h) with its recurrences unrolled and the step whose index equals n picked
// by select; see decompose.h for the degree bounds and what happens above them.
#include <cmath>
#include <limits>

#include "ir/passes/decompose.h"
#include "ir/passes/decompose_internal.h"

namespace torch_tpu::ir::decomp {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The host's degree: n truncated toward zero; NaN, inf and |n| >= 9.2e18 count as -1, so
// `valid` (n > -1, n < 9.2e18) marks the elements whose polynomial is not 0.
struct Degree {
  Value valid, d, even;  // d = trunc(n) (0 where invalid); even: d % 2 == 0
};
Degree degree(const Ew& e, Value n) {
  Degree r;
  r.valid = e.land(e.gt(n, e.c(-1)), e.lt(n, e.c(9.2e18)));
  r.d = e.sel(r.valid, e.floor(e.abs(n)), e.c(0));
  Value half = e.floor(e.mul(r.d, e.c(0.5)));
  r.even = e.eq(e.sub(r.d, e.add(half, half)), e.c(0));
  return r;
}

Value pm(const Ew& e, Value even, Value v) { return e.sel(even, v, e.neg(v)); }

// The host's three-term recurrence r_k = 2y r_{k-1} - r_{k-2} (r_0 = 1, r_1 = first) for
// d <= kChebyshevUnroll; a NaN stays NaN, as the host's loop that stops at NaN leaves it.
Value chebyshev_recurrence(const Ew& e, Value y, Value first, Value d) {
  Value two_y = e.add(y, y);
  Value res = e.sel(e.eq(d, e.c(0)), e.c(1), first);
  Value p = e.c(1), q = first;
  for (int k = 2; k <= kChebyshevUnroll; ++k) {
    Value r = e.sub(e.mul(two_y, q), p);
    res = e.sel(e.eq(d, e.c(k)), r, res);
    p = q;
    q = r;
  }
  return res;
}

// num(L) / den with num = cosh or sinh, without overflowing before the quotient does: for
// L > 20, e^-L is below f64's epsilon relative to e^L, so num(L) = e^L / 2.
Value hyp_ratio(const Ew& e, Value l, bool sinh, Value den) {
  Value direct = e.div(e.un(sinh ? OpCode::Sinh : OpCode::Cosh, l), den);
  Value large = e.exp(e.sub(l, e.log(e.add(den, den))));
  return e.sel(e.gt(l, e.c(20)), large, direct);
}

// Chebyshev kind 0..3 at |y| > 1 (or NaN) for degree d: T = cosh(d a), U = sinh((d+1)a) /
// sinh(a), V = cosh((d+1/2)a) / cosh(a/2), W = sinh((d+1/2)a) / sinh(a/2), a = acosh|y|;
// y < 0: T, U times (-1)^d, V(y) = (-1)^d W(|y|), W(y) = (-1)^d V(|y|).
Value chebyshev_hyperbolic(const Ew& e, int kind, Value y, Value d, Value even) {
  Value a = e.un(OpCode::Acosh, e.abs(y));
  Value neg = e.lt(y, e.c(0));
  Value half_a = e.mul(a, e.c(0.5));
  Value t = hyp_ratio(e, e.mul(d, a), false, e.c(1));
  Value u = hyp_ratio(e, e.mul(e.add(d, e.c(1)), a), true, e.un(OpCode::Sinh, a));
  Value lh = e.mul(e.add(d, e.c(0.5)), a);
  Value v = hyp_ratio(e, lh, false, e.un(OpCode::Cosh, half_a));
  Value w = hyp_ratio(e, lh, true, e.un(OpCode::Sinh, half_a));
  switch (kind) {
    case 0: return e.sel(neg, pm(e, even, t), t);
    case 1: return e.sel(neg, pm(e, even, u), u);
    case 2: return e.sel(neg, pm(e, even, w), v);
    default: return e.sel(neg, pm(e, even, v), w);
  }
}

// Above the unrolled degree: the closed form, NaN where the host's recurrence met inf - inf
// (its value two degrees lower already overflowed: r_n = 2y inf - inf).
Value chebyshev_large(const Ew& e, int kind, Value y, const Degree& n) {
  Value v = chebyshev_hyperbolic(e, kind, y, n.d, n.even);
  Value lower = chebyshev_hyperbolic(e, kind, y, e.sub(n.d, e.c(2)), n.even);
  return e.sel(e.is_inf(lower), e.c(kNaN), v);
}

// The trigonometric branch of the host for |y| < 1 and d > big (t = acos y).
Value chebyshev_trig(const Ew& e, int kind, Value y, const Degree& n, Value odd, Value n1) {
  Value t = e.un(OpCode::Acos, y), half_t = e.div(t, e.c(2));
  Value dh = e.mul(e.add(n.d, e.c(0.5)), t);
  switch (kind) {
    case 0: return e.cos(e.mul(n.d, t));
    case 1: {
      Value s = e.sin(t);
      Value alt = e.div(e.mul(n1, e.cos(e.mul(n1, t))), y);
      return e.sel(e.ne(s, e.c(0)), e.div(e.sin(e.mul(n1, t)), s), alt);
    }
    case 2:
      return e.sel(e.ne(e.sin(half_t), e.c(1)), e.div(e.cos(dh), e.cos(half_t)), pm(e, n.even, odd));
    default: {
      Value alt = e.sel(e.gt(y, e.c(0)), odd, pm(e, n.even, e.c(1)));
      return e.sel(e.ne(e.cos(half_t), e.c(1)), e.div(e.sin(dh), e.sin(half_t)), alt);
    }
  }
}

// special_poly.h `chebyshev`: endpoint values, trig branch, recurrence / closed form.
Value chebyshev(const Ew& e, int kind, Value y, const Degree& n, int big, Value at_one, Value at_m1) {
  Value odd = e.add(e.add(n.d, n.d), e.c(1)), n1 = e.add(n.d, e.c(1));
  Value two_y = e.add(y, y);
  Value first = kind == 0 ? y : kind == 1 ? two_y : kind == 2 ? e.sub(two_y, e.c(1)) : e.add(two_y, e.c(1));
  Value v = e.sel(e.le(n.d, e.c(kChebyshevUnroll)), chebyshev_recurrence(e, y, first, n.d),
                  chebyshev_large(e, kind, y, n));
  Value trig = e.land(e.gt(n.d, e.c(big)), e.lt(e.abs(y), e.c(1)));
  v = e.sel(trig, chebyshev_trig(e, kind, y, n, odd, n1), v);
  Value m1 = kind == 0 || kind == 3 ? pm(e, n.even, e.c(1)) : pm(e, n.even, kind == 1 ? n1 : odd);
  v = e.sel(at_m1, m1, v);
  Value one = kind == 0 || kind == 2 ? e.c(1) : (kind == 1 ? n1 : odd);
  return e.sel(at_one, one, v);
}

// Hermite H (he = false) / He: recurrence up to the host's limit, NaN above it (as the host).
Value hermite(const Ew& e, bool he, Value x, const Degree& n) {
  int limit = e.t == DType::F64 ? 512 : 128;
  Value two_x = e.add(x, x);
  Value first = he ? x : two_x;
  Value res = e.sel(e.eq(n.d, e.c(0)), e.c(1), first);
  Value p = e.c(1), q = first;
  for (int k = 1; k < limit; ++k) {  // step k reaches degree k + 1
    Value r = he ? e.sub(e.mul(x, q), e.mul(e.c(k), p)) : e.sub(e.mul(two_x, q), e.mul(e.c(2 * k), p));
    res = e.sel(e.eq(n.d, e.c(k + 1)), r, res);
    p = q;
    q = r;
  }
  return e.sel(e.gt(n.d, e.c(limit)), e.c(kNaN), res);
}

// Laguerre / Legendre: recurrence r_{k+1} = (A_k q - k p) / (k + 1) up to kPolyMaxDegree,
// NaN above (documented in decompose.h; callers check n).
Value laguerre_legendre(const Ew& e, bool legendre, Value x, const Degree& n) {
  Value omx = e.sub(e.c(1), x);
  Value first = legendre ? x : omx;
  Value res = e.sel(e.eq(n.d, e.c(0)), e.c(1), first);
  Value p = e.c(1), q = first;
  for (int k = 1; k < kPolyMaxDegree; ++k) {
    Value a = legendre ? e.mul(e.mul(e.c(2 * k + 1), x), q) : e.mul(e.add(e.c(2 * k), omx), q);
    Value r = e.div(e.sub(a, e.mul(e.c(k), p)), e.c(k + 1));
    res = e.sel(e.eq(n.d, e.c(k + 1)), r, res);
    p = q;
    q = r;
  }
  res = e.sel(e.gt(n.d, e.c(kPolyMaxDegree)), e.c(kNaN), res);
  if (legendre) {
    Value ends = e.sel(e.lor(e.gt(x, e.c(0)), n.even), e.c(1), e.c(-1));
    return e.sel(e.eq(e.abs(x), e.c(1)), ends, res);
  }
  return e.sel(e.eq(e.abs(x), e.c(0)), e.c(1), res);
}

Value shifted_chebyshev(const Ew& e, int kind, Value x, const Degree& n) {
  Value y = e.sub(e.add(x, x), e.c(1));
  Value x1 = e.eq(x, e.c(1)), x0 = e.eq(x, e.c(0));
  Value v = chebyshev(e, kind, y, n, kind == 3 ? 4 : 6, x1, x0);
  if (kind != 3) return v;
  // The host's shifted W: where cos(acos(y)/2) rounds to 1 inside (-1, 1), +-1 by parity.
  Value inner = e.land(e.land(e.gt(n.d, e.c(4)), e.lt(e.abs(y), e.c(1))), e.lnot(e.lor(x1, x0)));
  Value one = e.eq(e.cos(e.div(e.un(OpCode::Acos, y), e.c(2))), e.c(1));
  return e.sel(e.land(inner, one), pm(e, n.even, e.c(1)), v);
}

}  // namespace

Value orthogonal_poly(Ew& e, OpCode op, Value x, Value nv) {
  Degree n = degree(e, nv);
  Value v;
  Value unit = e.eq(e.abs(x), e.c(1)), pos = e.gt(x, e.c(0));
  switch (op) {
    case OpCode::ChebyshevT: case OpCode::ChebyshevU: case OpCode::ChebyshevV: case OpCode::ChebyshevW: {
      int kind = static_cast<int>(op) - static_cast<int>(OpCode::ChebyshevT);
      v = chebyshev(e, kind, x, n, kind == 0 ? 6 : 8, e.land(unit, pos), e.land(unit, e.lnot(pos)));
      break;
    }
    case OpCode::ShiftedChebyshevT: case OpCode::ShiftedChebyshevU:
    case OpCode::ShiftedChebyshevV: case OpCode::ShiftedChebyshevW:
      v = shifted_chebyshev(e, static_cast<int>(op) - static_cast<int>(OpCode::ShiftedChebyshevT), x, n);
      break;
    case OpCode::HermiteH: v = hermite(e, false, x, n); break;
    case OpCode::HermiteHe: v = hermite(e, true, x, n); break;
    case OpCode::LaguerreL: v = laguerre_legendre(e, false, x, n); break;
    default: v = laguerre_legendre(e, true, x, n); break;
  }
  return e.sel(n.valid, v, e.c(0));
}

}  // namespace torch_tpu::ir::decomp
