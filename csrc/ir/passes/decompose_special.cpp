// Decompositions of the Bessel functions J0, J1, Y0, Y1, I0, I1, K0, K1 (Cephes' piecewise
// rational / Chebyshev approximations, PyTorch CPU's branch points) and of Airy Ai (the
// host's special_poly.h algorithm). Every range is computed and `select` picks one, so a
// NaN or inf of an unused branch never reaches the result (select does not propagate it).
#include <cmath>
#include <limits>

#include "ir/passes/decompose_internal.h"
#include "ir/passes/decompose_tables.h"

namespace torch_tpu::ir::decomp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kSqrt2OverPi = 0.797884560802865355879892119868763737;
constexpr double kTwoOverPi = 0.636619772367581343075535053490057448;
template <size_t N>
constexpr size_t len(const double (&)[N]) { return N; }

// The x > 5 form shared by J and Y: sqrt(2/(pi x)) (P cos(x - ph) - 5/x Q sin(x - ph)) for
// J (sin/cos swapped and + for Y), P = PP/PQ and Q = QP/QQ in w = 25/x^2.
struct Tables { const double *pp, *pq, *qp, *qq; };
Value asymptotic(const Ew& e, Value x, const Tables& t, double phase, bool y_kind, bool w_as_j1) {
  // J1/Y1 form w as (5/x)(5/x), J0/Y0 as 25/(x x): the host's roundings.
  Value w = w_as_j1 ? e.mul(e.div(e.c(5), x), e.div(e.c(5), x)) : e.div(e.c(25), e.mul(x, x));
  Value p = e.div(e.horner(t.pp, 7, w), e.horner(t.pq, 7, w));
  Value q = e.div(e.horner(t.qp, 8, w), e.horner(t.qq, 7, w, true));
  // sin / cos(x - pi/4 or 3pi/4) from sin x and cos x: x - phase would round away the
  // phase for large x (in f32 at x = 1e5 its ulp is 0.008).
  Value sx = e.sin(x), cx = e.cos(x), r2 = e.c(0.70710678118654752440);
  Value c = phase < 1 ? e.mul(e.add(cx, sx), r2) : e.mul(e.sub(sx, cx), r2);
  Value s = phase < 1 ? e.mul(e.sub(sx, cx), r2) : e.mul(e.neg(e.add(sx, cx)), r2);
  Value q5 = e.mul(e.div(e.c(5), x), q);
  Value v = y_kind ? e.add(e.mul(p, s), e.mul(q5, c)) : e.sub(e.mul(p, c), e.mul(q5, s));
  return e.div(e.mul(v, e.c(kSqrt2OverPi)), e.sqrt(x));
}

const Tables kJ0{kJ0_PP, kJ0_PQ, kJ0_QP, kJ0_QQ};
const Tables kJ1{kJ1_PP, kJ1_PQ, kJ1_QP, kJ1_QQ};
constexpr double kPiOver4 = 0.785398163397448309615660845819875721;
constexpr double k3PiOver4 = 2.356194490192344928846982537459627163;

// J0 for x >= 0 below 5 (both x < 1e-5 and the rational form); `ax` = |x|.
Value j0_small(const Ew& e, Value ax) {
  Value z = e.mul(ax, ax);
  Value r = e.mul(e.mul(e.sub(z, e.c(5.78318596294678452118e+00)), e.sub(z, e.c(3.04712623436620863991e+01))),
                  e.horner(kJ0_RP, 4, z));
  r = e.div(r, e.horner(kJ0_RQ, 8, z, true));
  Value tiny = e.sub(e.c(1), e.div(z, e.c(4)));
  return e.sel(e.lt(ax, e.c(1e-5)), tiny, r);
}

Value j0(const Ew& e, Value x) {
  Value ax = e.abs(x);
  return e.sel(e.le(ax, e.c(5)), j0_small(e, ax), asymptotic(e, ax, kJ0, kPiOver4, false, false));
}

Value j1_small(const Ew& e, Value ax) {
  Value z = e.mul(ax, ax);
  Value r = e.mul(e.div(e.horner(kJ1_RP, 4, z), e.horner(kJ1_RQ, 8, z, true)), ax);
  return e.mul(e.mul(r, e.sub(z, e.c(1.46819706421238932572e+01))), e.sub(z, e.c(4.92184563216946036703e+01)));
}

Value j1(const Ew& e, Value x) {
  Value ax = e.abs(x);
  Value v = e.sel(e.le(ax, e.c(5)), j1_small(e, ax), asymptotic(e, ax, kJ1, k3PiOver4, false, true));
  return e.sel(e.lt(x, e.c(0)), e.neg(v), v);
}

// Y0 / Y1: -inf at 0, NaN below; the rational form plus (2/pi) log(x) J(x) up to 5.
Value y01(const Ew& e, Value x, bool one) {
  Value z = e.mul(x, x);
  Value small;
  if (!one) {
    Value w = e.div(e.horner(kY0_YP, 8, z), e.horner(kY0_YQ, 7, z, true));
    small = e.add(w, e.mul(e.mul(e.c(kTwoOverPi), e.log(x)), j0_small(e, x)));
  } else {
    Value w = e.mul(x, e.div(e.horner(kY1_YP, 6, z), e.horner(kY1_YQ, 8, z, true)));
    Value l = e.sub(e.mul(j1_small(e, x), e.log(x)), e.div(e.c(1), x));
    small = e.add(w, e.mul(e.c(kTwoOverPi), l));
  }
  Value big = one ? asymptotic(e, x, kJ1, k3PiOver4, true, true) : asymptotic(e, x, kJ0, kPiOver4, true, false);
  Value v = e.sel(e.le(x, e.c(5)), small, big);
  v = e.sel(e.lt(x, e.c(0)), e.c(kNaN), v);
  return e.sel(e.eq(x, e.c(0)), e.c(-kInf), v);
}

// exp(ax) * s without overflowing before the product does: exp(ax/2) * (s * exp(ax/2)).
Value exp_times(const Ew& e, Value ax, Value s) {
  Value h = e.exp(e.mul(ax, e.c(0.5)));
  return e.mul(h, e.mul(s, h));
}

// I0 / I1 (i1: odd): Chebyshev series in |x|/2 - 2 up to 8, in 32/|x| - 2 above; NaN at
// +-inf, as PyTorch's Cephes kernels (and the host runtime: special_math.h).
Value i01(const Ew& e, Value x, bool one) {
  Value ax = e.abs(x);
  Value a = one ? e.chbevl(e.sub(e.div(ax, e.c(2)), e.c(2)), kI1_A, len(kI1_A))
                : e.chbevl(e.sub(e.div(ax, e.c(2)), e.c(2)), kI0_A, len(kI0_A));
  Value small = one ? e.mul(e.mul(a, ax), e.exp(ax)) : e.mul(e.exp(ax), a);
  Value w = e.sub(e.div(e.c(32), ax), e.c(2));
  Value b = one ? e.chbevl(w, kI1_B, len(kI1_B)) : e.chbevl(w, kI0_B, len(kI0_B));
  Value big = exp_times(e, ax, e.div(b, e.sqrt(ax)));
  Value v = e.sel(e.le(ax, e.c(8)), small, big);
  v = e.sel(e.eq(ax, e.c(kInf)), e.c(kNaN), v);
  return one ? e.sel(e.lt(x, e.c(0)), e.neg(v), v) : v;
}

// K0 / K1: inf at 0, NaN below; series plus log(x/2) I(x) up to 2, exp(-x) series above.
Value k01(const Ew& e, Value x, bool one) {
  Value s = e.sub(e.mul(x, x), e.c(2));
  Value l = e.log(e.mul(e.c(0.5), x));
  Value small;
  if (!one) {
    small = e.sub(e.chbevl(s, kK0_A, len(kK0_A)), e.mul(l, i01(e, x, false)));
  } else {
    small = e.add(e.mul(l, i01(e, x, true)), e.div(e.chbevl(s, kK1_A, len(kK1_A)), x));
  }
  Value w = e.sub(e.div(e.c(8), x), e.c(2));
  Value b = one ? e.chbevl(w, kK1_B, len(kK1_B)) : e.chbevl(w, kK0_B, len(kK0_B));
  Value big = e.div(e.mul(e.exp(e.neg(x)), b), e.sqrt(x));
  Value v = e.sel(e.le(x, e.c(2)), small, big);
  v = e.sel(e.lt(x, e.c(0)), e.c(kNaN), v);
  return e.sel(e.eq(x, e.c(0)), e.c(kInf), v);
}

// Airy Ai's Cephes tables (special_poly.h, as PyTorch CPU).
constexpr double kAN[] = {3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
                          1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
                          1.40264691163389668864e+01, 9.99999999999999995305e-01};
constexpr double kAD[] = {5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
                          1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
                          1.40959135607834029598e+01, 1.00000000000000000470e+00};
constexpr double kAFN[] = {-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
                           -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
                           -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08};
constexpr double kAFD[] = {1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
                           9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
                           4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07};
constexpr double kAGN[] = {1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
                           9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
                           5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
                           8.11789239554389293311e-08, 3.41551784765923618484e-10};
constexpr double kAGD[] = {9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
                           5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
                           4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
                           4.91834570062930015649e-09};
constexpr double kInvSqrtPi = 5.64189583547756286948e-01;

// x < -2.09: the oscillating asymptotic form.
Value airy_negative(const Ew& e, Value x) {
  Value nx = e.neg(x), snx = e.sqrt(nx);
  Value zeta = e.div(e.mul(e.mul(e.c(-2), x), snx), e.c(3));
  Value z = e.div(e.c(1), zeta), zz = e.mul(z, z);
  Value f = e.div(e.mul(zz, e.horner(kAFN, 9, zz)), e.horner(kAFD, 9, zz));
  Value g = e.div(e.mul(z, e.horner(kAGN, 11, zz)), e.horner(kAGD, 10, zz));
  Value t = e.add(zeta, e.c(0.25 * 3.14159265358979323846));
  Value v = e.sub(e.mul(e.sin(t), e.add(e.c(1), f)), e.mul(e.cos(t), g));
  return e.mul(e.div(e.c(kInvSqrtPi), e.sqrt(snx)), v);
}

// x >= 2.09: the decaying asymptotic form.
Value airy_positive(const Ew& e, Value x) {
  Value sx = e.sqrt(x);
  Value zeta = e.div(e.mul(e.mul(e.c(2), x), sx), e.c(3));
  Value iz = e.div(e.c(1), zeta);
  Value r = e.mul(e.c(kInvSqrtPi), e.div(e.horner(kAN, 8, iz), e.horner(kAD, 8, iz)));
  return e.div(r, e.mul(e.mul(e.c(2), e.sqrt(sx)), e.exp(zeta)));
}

// |x| < 2.09: the host's Maclaurin loop, unrolled with its stopping test (t > epsilon,
// checked before each iteration): an iteration past the stop leaves f, g, t unchanged, so
// the result is the host's bit for bit. 10 iterations reach the stop in f32, 14 in f64.
Value airy_series(const Ew& e, Value x) {
  bool f64 = e.t == DType::F64;
  int iters = f64 ? 16 : 12;
  double eps = f64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
  Value f = e.c(1), g = x, m = e.c(1), n = x, t = e.c(1), z = e.mul(e.mul(x, x), x);
  for (int i = 0; i < iters; ++i) {
    Value active = e.gt(t, e.c(eps));
    double k = 1 + 3 * i;  // the host's k before this iteration
    m = e.div(e.div(e.mul(m, z), e.c(k + 1)), e.c(k + 2));
    n = e.div(e.mul(n, z), e.c(k + 2));
    Value f2 = e.add(f, m);
    n = e.div(n, e.c(k + 3));
    Value g2 = e.add(g, n);
    Value t2 = e.abs(e.div(m, f2));
    f = e.sel(active, f2, f);
    g = e.sel(active, g2, g);
    t = e.sel(active, t2, t);
  }
  return e.sub(e.mul(e.c(0.355028053887817239260), f), e.mul(e.c(0.258819403792806798405), g));
}

}  // namespace

Value airy_ai(Ew& e, Value x) {
  // The series on [-2.09, 2.09) and NaN (the host's fall-through), 0 elsewhere.
  Value outer = e.lor(e.lt(x, e.c(-2.09)), e.ge(x, e.c(2.09)));
  Value series = airy_series(e, e.sel(outer, e.c(0), x));
  // The asymptotic forms on arguments clamped into their ranges (values outside unused).
  Value v = e.sel(e.ge(x, e.c(2.09)), airy_positive(e, e.bin(OpCode::Max, x, e.c(2.09))), series);
  v = e.sel(e.lt(x, e.c(-2.09)), airy_negative(e, e.bin(OpCode::Min, x, e.c(-2.09))), v);
  v = e.sel(e.gt(x, e.c(103.892)), e.c(0), v);
  return e.sel(e.is_inf(x), e.c(kNaN), v);
}

Value bessel(Ew& e, OpCode op, Value x) {
  switch (op) {
    case OpCode::BesselJ0: return j0(e, x);
    case OpCode::BesselJ1: return j1(e, x);
    case OpCode::BesselY0: return y01(e, x, false);
    case OpCode::BesselY1: return y01(e, x, true);
    case OpCode::BesselI0: return i01(e, x, false);
    case OpCode::BesselI1: return i01(e, x, true);
    case OpCode::BesselK0: return k01(e, x, false);
    default: return k01(e, x, true);
  }
}

}  // namespace torch_tpu::ir::decomp
