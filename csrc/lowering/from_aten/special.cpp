// Special and inverse-trig math: asin..atanh, erfc/erfinv/erfcx, lgamma/digamma/polygamma,
// zeta, Bessel functions, Airy Ai, the orthogonal polynomials and the torch.special
// compositions built on them (i0e, ndtri, log_ndtr, entr, xlogy, sinc, ...). Integer inputs promote to the default float dtype.
// Compositions that overflow or cancel in f32 (scaled Bessel, polygamma, sinc) compute in f64.
#include <cmath>

#include "ir/passes/decompose.h"
#include "lowering/from_aten/common.h"
#include "runtime/runtime.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kPi = 3.14159265358979323846;

// The float input of a unary op (math dtype) and its result dtype.
Value finput(Lower& L, const c10::IValue& v, DType* out) {
  *out = to_ir(float_type(v.toTensor().scalar_type()), L.op());
  return L.in(v.toTensor(), opmath(*out));
}

Value un(Lower& L, OpCode op, Value x) { return L.g.unary(op, x); }
Value f64(Lower& L, Value x) { return L.g.convert(x, DType::F64); }
Value isnan(Lower& L, Value x) { return cmp(L, Cmp::NE, x, x); }

template <OpCode op>
std::vector<Value> unary(Lower& L, Args a) {
  DType dt;
  Value x = finput(L, a[0], &dt);
  return one(L.g.convert(un(L, op, x), dt));
}

// A unary composition evaluated in f64: fn(L, x) with x already f64.
template <Value (*fn)(Lower&, Value)>
std::vector<Value> unary64(Lower& L, Args a) {
  DType dt;
  Value x = f64(L, finput(L, a[0], &dt));
  return one(L.g.convert(fn(L, x), dt));
}

// Scaled Bessel functions e^-|x| I_n(x), e^x K_n(x): past |x| = 700 the unscaled factor
// overflows (0 * inf) so the asymptotic series takes over (three terms: error ~1e-15 there).
constexpr double kScaledSwitch = 700;
// (1 + c1/x + c2/x^2 + c3/x^3) * (I: 1/sqrt(2 pi x), K: sqrt(pi / (2x))), for x > 0.
Value bessel_asym(Lower& L, Value x, bool k_kind, double c1, double c2, double c3) {
  Value r = bin(L, OpCode::Div, scal(L, 1, x), x);
  Value poly = addc(L, bin(L, OpCode::Mul, r, addc(L, bin(L, OpCode::Mul, r, addc(L, mulc(L, r, c3), c2)), c1)), 1);
  Value pre = k_kind ? un(L, OpCode::Sqrt, bin(L, OpCode::Div, scal(L, kPi / 2, x), x))
                     : un(L, OpCode::Rsqrt, mulc(L, x, 2 * kPi));
  return bin(L, OpCode::Mul, pre, poly);
}
Value scaled_i(Lower& L, Value x, OpCode op, double c1, double c2, double c3) {
  Value ax = un(L, OpCode::Abs, x);
  Value direct = bin(L, OpCode::Mul, un(L, OpCode::Exp, un(L, OpCode::Negate, ax)), un(L, op, x));
  Value big = cmp(L, Cmp::GT, ax, scal(L, kScaledSwitch, x));
  Value safe = where(L, big, ax, scal(L, kScaledSwitch + 1, x));  // no division by 0 in the unused lanes
  Value asym = bessel_asym(L, safe, false, c1, c2, c3);
  if (op == OpCode::BesselI1) asym = bin(L, OpCode::Mul, un(L, OpCode::Sign, x), asym);
  return where(L, big, asym, direct);
}
Value scaled_k(Lower& L, Value x, OpCode op, double c1, double c2, double c3) {
  Value direct = bin(L, OpCode::Mul, un(L, OpCode::Exp, x), un(L, op, x));
  Value big = cmp(L, Cmp::GT, x, scal(L, kScaledSwitch, x));
  Value asym = bessel_asym(L, where(L, big, x, scal(L, kScaledSwitch + 1, x)), true, c1, c2, c3);
  return where(L, big, asym, direct);
}
Value i0e(Lower& L, Value x) { return scaled_i(L, x, OpCode::BesselI0, 1.0 / 8, 9.0 / 128, 225.0 / 3072); }
Value i1e(Lower& L, Value x) { return scaled_i(L, x, OpCode::BesselI1, -3.0 / 8, -15.0 / 128, -315.0 / 3072); }
Value k0e(Lower& L, Value x) { return scaled_k(L, x, OpCode::BesselK0, -1.0 / 8, 9.0 / 128, -225.0 / 3072); }
Value k1e(Lower& L, Value x) { return scaled_k(L, x, OpCode::BesselK1, 3.0 / 8, -15.0 / 128, 315.0 / 3072); }
Value ndtri(Lower& L, Value p) { return mulc(L, un(L, OpCode::ErfInv, addc(L, mulc(L, p, 2), -1)), kSqrt2); }

// log(Phi(x)): the erfcx form for the lower tail (no underflow), log1p of erfc above.
Value log_ndtr(Lower& L, Value x) {
  Value t = mulc(L, x, 1 / kSqrt2);
  Value lower = bin(L, OpCode::Sub, un(L, OpCode::Log, mulc(L, un(L, OpCode::Erfcx, un(L, OpCode::Negate, t)), 0.5)),
                    bin(L, OpCode::Mul, t, t));
  Value upper = un(L, OpCode::Log1p, mulc(L, un(L, OpCode::Erfc, t), -0.5));
  return where(L, cmp(L, Cmp::LT, x, scal(L, -1, x)), lower, upper);
}

Value entr(Lower& L, Value x) {
  Value pos = un(L, OpCode::Negate, bin(L, OpCode::Mul, x, un(L, OpCode::Log, x)));
  Value r = where(L, cmp(L, Cmp::EQ, x, scal(L, 0, x)), L.cst_like(0, x), L.cst_like(-INFINITY, x));
  r = where(L, cmp(L, Cmp::GT, x, scal(L, 0, x)), pos, r);
  return where(L, isnan(L, x), x, r);
}

Value sinc(Lower& L, Value x) {
  Value px = mulc(L, x, kPi);
  Value r = bin(L, OpCode::Div, un(L, OpCode::Sin, px), px);
  return where(L, cmp(L, Cmp::EQ, x, scal(L, 0, x)), L.cst_like(1, x), r);
}

Value sph_j0(Lower& L, Value x) {
  Value r = bin(L, OpCode::Div, un(L, OpCode::Sin, x), x);
  r = where(L, cmp(L, Cmp::EQ, un(L, OpCode::Abs, x), L.cst_like(INFINITY, x)), L.cst_like(0, x), r);
  return where(L, cmp(L, Cmp::EQ, x, scal(L, 0, x)), L.cst_like(1, x), r);
}

Value exp2(Lower& L, Value x) { return un(L, OpCode::Exp, mulc(L, x, std::log(2.0))); }

std::vector<Value> frac(Lower& L, Args a) {
  DType dt = to_ir(a[0].toTensor().scalar_type(), L.op());
  TORCH_CHECK(ir::is_float(dt), "[", L.op(), "] frac needs a float tensor; got ", to_aten(dt));
  Value x = L.in(a[0].toTensor(), opmath(dt));
  Value t = bin(L, OpCode::Mul, un(L, OpCode::Sign, x), un(L, OpCode::Floor, un(L, OpCode::Abs, x)));
  return one(L.g.convert(bin(L, OpCode::Sub, x, t), dt));
}

// logit with PyTorch CPU's clamp: x < eps -> eps, else x > 1 - eps -> 1 - eps.
Value logit_clamp(Lower& L, Value x, double eps) {
  Value lo = scal(L, eps, x), hi = scal(L, 1 - eps, x);
  return where(L, cmp(L, Cmp::LT, x, lo), L.bcast(lo, L.g.shape(x)),
               where(L, cmp(L, Cmp::GT, x, hi), L.bcast(hi, L.g.shape(x)), x));
}

std::vector<Value> logit(Lower& L, Args a) {
  DType dt;
  Value x = finput(L, a[0], &dt);
  if (a.size() > 1 && !a[1].isNone()) x = logit_clamp(L, x, a[1].toDouble());
  Value r = un(L, OpCode::Log, bin(L, OpCode::Div, x, bin(L, OpCode::Sub, scal(L, 1, x), x)));
  return one(L.g.convert(r, dt));
}

// d logit: g / (x (1 - x)); 0 outside [eps, 1 - eps] with eps, NaN outside [0, 1] without.
std::vector<Value> logit_backward(Lower& L, Args a) {
  DType dt = to_ir(result_type(a[0], a[1]), L.op()), ct = opmath(dt);
  Value g = L.in(a[0].toTensor(), ct), x = L.in(a[1].toTensor(), ct);
  broadcast_all(L, {&g, &x});
  Value d = L.g.binary(OpCode::Div, g, L.g.binary(OpCode::Mul, x, L.g.binary(OpCode::Sub, L.cst_like(1, x), x)));
  bool has_eps = a.size() > 2 && !a[2].isNone();
  double lo = has_eps ? a[2].toDouble() : 0, hi = 1 - lo;
  Value out = L.g.binary(OpCode::Or, cmp(L, Cmp::LT, x, scal(L, lo, x)), cmp(L, Cmp::GT, x, scal(L, hi, x)));
  if (has_eps && lo >= 0) d = where(L, out, L.cst_like(0, d), d);
  else d = where(L, out, L.cst_like(NAN, d), d);
  return one(L.g.convert(d, dt));
}

// Float binary ops on Tensor-or-Scalar arguments, result dtype promoted to float.
DType fpromote(Lower& L, Args a) { return to_ir(float_type(result_type(a[0], a[1])), L.op()); }

template <OpCode op>
std::vector<Value> binary(Lower& L, Args a) {
  DType dt = fpromote(L, a), ct = opmath(dt);
  return one(L.g.convert(bin(L, op, arg(L, a[0], ct), arg(L, a[1], ct)), dt));
}

// XLA's Hurwitz zeta (chlo.zeta) is far off near the poles at negative q (trigamma at
// -8.995 in f32: -2.3e4 for 4.9e4): on the pjrt runtime a negative q raises at the next sync
// instead of returning wrong numbers. The host's Cephes kernel handles them.
void pjrt_reject_negative_q(Lower& L, Value q) {
  if (std::string(runtime::current().name()) != "pjrt") return;
  L.check(any_true(L, L.g.compare(Cmp::LT, q, L.cst_like(0, q))),
          std::string("[") + L.op() + "] negative arguments are not supported on the pjrt runtime (XLA's zeta is "
                                      "inaccurate near its poles); got an argument < 0, expected >= 0 (the host runtime has no limit)");
}

std::vector<Value> zeta(Lower& L, Args a) {
  DType dt = fpromote(L, a), ct = opmath(dt);
  Value x = arg(L, a[0], ct), q = arg(L, a[1], ct);
  pjrt_reject_negative_q(L, q);
  return one(L.g.convert(bin(L, OpCode::Zeta, x, q), dt));
}

// Laguerre L and Legendre P: the pjrt runtime evaluates them by a recurrence unrolled to
// ir::kPolyMaxDegree (ir/passes/decompose.h; no closed form exists). There a larger degree is
// an error at the next sync, never a silent NaN; the host runtime has no limit.
template <OpCode op>
std::vector<Value> bounded_poly(Lower& L, Args a) {
  DType dt = fpromote(L, a), ct = opmath(dt);
  Value x = arg(L, a[0], ct), n = arg(L, a[1], ct);
  if (std::string(runtime::current().name()) == "pjrt") {
    int64_t bound = ir::max_exact_degree(op, ct);
    Value big = L.g.compare(Cmp::GT, n, L.cst_like(static_cast<double>(bound), n));
    L.check(any_true(L, big),
            std::string("[") + L.op() + "] degree n too large for the pjrt runtime; got n > " + std::to_string(bound) +
                ", expected n <= " + std::to_string(bound) + " (the host runtime has no limit)");
  }
  return one(L.g.convert(bin(L, op, x, n), dt));
}

// x * log(y) (or log1p(y)), 0 where x == 0, NaN where y is NaN.
template <bool log1p>
std::vector<Value> xlogy(Lower& L, Args a) {
  DType dt = fpromote(L, a), ct = opmath(dt);
  Value x = arg(L, a[0], ct), y = arg(L, a[1], ct);
  broadcast_all(L, {&x, &y});
  Value r = bin(L, OpCode::Mul, x, un(L, log1p ? OpCode::Log1p : OpCode::Log, y));
  r = where(L, cmp(L, Cmp::EQ, x, scal(L, 0, x)), L.cst_like(0, x), r);
  return one(L.g.convert(where(L, isnan(L, y), y, r), dt));
}

// polygamma(n, x): digamma for n = 0, else (-1)^(n+1) n! zeta(n+1, x) (in f64).
std::vector<Value> polygamma(Lower& L, Args a) {
  int64_t n = a[0].toInt();
  TORCH_CHECK(n >= 0, "[", L.op(), "] polygamma(n, x) does not support negative n; got ", n);
  DType dt;
  Value x = f64(L, finput(L, a[1], &dt));
  if (n == 0) return one(L.g.convert(un(L, OpCode::Digamma, x), dt));
  double fact = std::exp(std::lgamma(n + 1.0)) * ((n % 2) ? 1.0 : -1.0);
  pjrt_reject_negative_q(L, x);
  Value z = bin(L, OpCode::Zeta, L.cst_like(static_cast<double>(n + 1), x), x);
  return one(L.g.convert(mulc(L, z, fact), dt));
}

#define V3(name, fn) {name, fn}, {name ".out", fn}, {name "_", fn}
#define V2(name, fn) {name, fn}, {name ".out", fn}
#define POLY(name, op)                                                                                     \
  {name, binary<OpCode::op>}, {name ".out", binary<OpCode::op>}, {name ".x_scalar", binary<OpCode::op>},     \
      {name ".x_scalar_out", binary<OpCode::op>}, {name ".n_scalar", binary<OpCode::op>},                   \
      {name ".n_scalar_out", binary<OpCode::op>}
#define BPOLY(name, op)                                                                                    \
  {name, bounded_poly<OpCode::op>}, {name ".out", bounded_poly<OpCode::op>},                                 \
      {name ".x_scalar", bounded_poly<OpCode::op>}, {name ".x_scalar_out", bounded_poly<OpCode::op>},       \
      {name ".n_scalar", bounded_poly<OpCode::op>}, {name ".n_scalar_out", bounded_poly<OpCode::op>}
#define BIN3(name, op) {name, binary<OpCode::op>}, {name ".out", binary<OpCode::op>}, {name "_", binary<OpCode::op>}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      V3("asin", unary<OpCode::Asin>), V3("acos", unary<OpCode::Acos>), V3("atan", unary<OpCode::Atan>),
      V3("sinh", unary<OpCode::Sinh>), V3("cosh", unary<OpCode::Cosh>), V3("asinh", unary<OpCode::Asinh>),
      V3("acosh", unary<OpCode::Acosh>), V3("atanh", unary<OpCode::Atanh>), V3("erfc", unary<OpCode::Erfc>),
      V3("erfinv", unary<OpCode::ErfInv>), V3("lgamma", unary<OpCode::Lgamma>),
      V3("digamma", unary<OpCode::Digamma>), V3("i0", unary<OpCode::BesselI0>),
      V2("special_i1", unary<OpCode::BesselI1>), V2("special_erfcx", unary<OpCode::Erfcx>),
      V2("special_bessel_j0", unary<OpCode::BesselJ0>), V2("special_bessel_j1", unary<OpCode::BesselJ1>),
      V2("special_bessel_y0", unary<OpCode::BesselY0>), V2("special_bessel_y1", unary<OpCode::BesselY1>),
      V2("special_modified_bessel_i0", unary<OpCode::BesselI0>),
      V2("special_modified_bessel_i1", unary<OpCode::BesselI1>),
      V2("special_modified_bessel_k0", unary<OpCode::BesselK0>),
      V2("special_modified_bessel_k1", unary<OpCode::BesselK1>),
      V2("special_i0e", unary64<i0e>), V2("special_i1e", unary64<i1e>),
      V2("special_scaled_modified_bessel_k0", unary64<k0e>), V2("special_scaled_modified_bessel_k1", unary64<k1e>),
      V2("special_ndtri", unary64<ndtri>), V2("special_log_ndtr", unary64<log_ndtr>),
      V2("special_entr", unary64<entr>), V2("special_spherical_bessel_j0", unary64<sph_j0>),
      V3("sinc", unary64<sinc>), V3("exp2", unary64<exp2>), V3("frac", frac), V3("logit", logit),
      {"logit_backward", logit_backward}, {"logit_backward.grad_input", logit_backward},
      BIN3("nextafter", NextAfter), BIN3("hypot", Hypot),
      V2("special_zeta", zeta), {"special_zeta.self_scalar", zeta}, {"special_zeta.other_scalar", zeta},
      {"special_zeta.self_scalar_out", zeta}, {"special_zeta.other_scalar_out", zeta},
      {"xlogy.Tensor", xlogy<false>}, {"xlogy.Scalar_Self", xlogy<false>}, {"xlogy.Scalar_Other", xlogy<false>},
      {"xlogy.OutTensor", xlogy<false>}, {"xlogy.OutScalar_Self", xlogy<false>},
      {"xlogy.OutScalar_Other", xlogy<false>}, {"xlogy_.Tensor", xlogy<false>}, {"xlogy_.Scalar_Other", xlogy<false>},
      {"special_xlog1py", xlogy<true>}, {"special_xlog1py.self_scalar", xlogy<true>},
      {"special_xlog1py.other_scalar", xlogy<true>}, {"special_xlog1py.out", xlogy<true>},
      {"special_xlog1py.self_scalar_out", xlogy<true>}, {"special_xlog1py.other_scalar_out", xlogy<true>},
      {"polygamma", polygamma}, {"polygamma.out", polygamma},
      V2("special_airy_ai", unary<OpCode::AiryAi>),
      POLY("special_chebyshev_polynomial_t", ChebyshevT), POLY("special_chebyshev_polynomial_u", ChebyshevU),
      POLY("special_chebyshev_polynomial_v", ChebyshevV), POLY("special_chebyshev_polynomial_w", ChebyshevW),
      POLY("special_shifted_chebyshev_polynomial_t", ShiftedChebyshevT),
      POLY("special_shifted_chebyshev_polynomial_u", ShiftedChebyshevU),
      POLY("special_shifted_chebyshev_polynomial_v", ShiftedChebyshevV),
      POLY("special_shifted_chebyshev_polynomial_w", ShiftedChebyshevW),
      POLY("special_hermite_polynomial_h", HermiteH), POLY("special_hermite_polynomial_he", HermiteHe),
      BPOLY("special_laguerre_polynomial_l", LaguerreL), BPOLY("special_legendre_polynomial_p", LegendreP),
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
