// Double-precision special functions used by the scalar functors of scalar_ops.h (the ones
// <cmath> lacks or where C++17's special math throws on arguments PyTorch maps to NaN/inf).
// Algorithms follow PyTorch CPU (ATen/native/Math.h: Cephes digamma and Hurwitz zeta, the
// erfinv rational approximation with two Newton steps) so results agree with CPU.
#pragma once
#include <cmath>
#include <limits>

namespace torch_tpu::host::special {

constexpr double kPi = 3.14159265358979323846;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

inline double digamma(double x) {
  if (x == 0) return std::copysign(kInf, -x);
  if (x < 0) {
    if (x == std::trunc(x)) return kNaN;
    double q, r = std::modf(x, &q);
    return digamma(1 - x) - kPi / std::tan(kPi * r);
  }
  double result = 0;
  while (x < 10) {
    result -= 1 / x;
    x += 1;
  }
  if (x == 10) return result + 2.25175258906672110764;
  static const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
                             -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                             8.33333333333333333333E-2};
  double y = 0;
  if (x < 1.0e17) {
    double z = 1.0 / (x * x), p = A[0];
    for (int i = 1; i < 7; ++i) p = p * z + A[i];
    y = z * p;
  }
  return result + std::log(x) - 0.5 / x - y;
}

// Hurwitz zeta(x, q) (Cephes, as ATen's zeta).
inline double zeta(double x, double q) {
  constexpr double kMachEp = 1.11022302462515654042E-16;
  static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                             7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                             -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
  if (x == 1) return kInf;
  if (x < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (x != std::floor(x)) return kNaN;
  }
  double s = std::pow(q, -x), a = q, b = 0;
  int i = 0;
  while (i < 9 || a <= 9.0) {
    i += 1;
    a += 1.0;
    b = std::pow(a, -x);
    s += b;
    if (-kMachEp * s < b && b < kMachEp * s) return s;
  }
  double w = a, k = 0.0;
  s += b * w / (x - 1);
  s -= 0.5 * b;
  a = 1.0;
  for (int j = 0; j < 12; ++j) {
    a *= x + k;
    b /= w;
    double t = a * b / A[j];
    s += t;
    if (std::fabs(t / s) < kMachEp) return s;
    k += 1.0;
    a *= x + k;
    b /= w;
    k += 1.0;
  }
  return s;
}

inline double erfinv(double y) {
  static const double a[4] = {0.886226899, -1.645349621, 0.914624893, -0.140543331};
  static const double b[4] = {-2.118377725, 1.442710462, -0.329097515, 0.012229801};
  static const double c[4] = {-1.970840454, -1.624906493, 3.429567803, 1.641345311};
  static const double d[2] = {3.543889200, 1.637067800};
  double ya = std::fabs(y);
  if (!(ya <= 1)) return kNaN;
  if (ya == 1) return std::copysign(kInf, y);
  double x;
  if (ya <= 0.7) {
    double z = y * y;
    double num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
    double den = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1;
    x = y * num / den;
  } else {
    double z = std::sqrt(-std::log((1 - ya) / 2));
    double num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
    double den = (d[1] * z + d[0]) * z + 1;
    x = std::copysign(num, y) / den;
  }
  const double k = 2.0 / std::sqrt(kPi);
  x -= (std::erf(x) - y) / (k * std::exp(-x * x));
  x -= (std::erf(x) - y) / (k * std::exp(-x * x));
  return x;
}

// exp(x^2) * erfc(x), with the asymptotic series where exp(x^2) overflows.
inline double erfcx(double x) {
  if (x != x) return x;
  if (x < 26) return std::exp(x * x) * std::erfc(x);
  double r = 1 / (x * x);
  return (1 - r / 2 + 3 * r * r / 4 - 15 * r * r * r / 8) / (x * std::sqrt(kPi));
}

// Bessel functions of integer order 0/1 with PyTorch's values outside C++17's domains.
inline double bessel_j(int n, double x) {
  if (x != x) return x;
  double v = std::cyl_bessel_j(n, std::fabs(x));
  return (n == 1 && x < 0) ? -v : v;
}
inline double bessel_y(int n, double x) {
  if (x != x) return x;
  if (x < 0) return kNaN;
  if (x == 0) return -kInf;
  return std::cyl_neumann(n, x);
}
// libstdc++'s cyl_bessel_i/k throw std::domain_error past x ~ 1e8 ("try asymptotic
// expansion"); I_n overflows and K_n underflows from x ~ 720, so those are inf and 0 there
// (and at +-inf, as PyTorch CPU: I_n is NaN, K_n(inf) is 0).
constexpr double kBesselIKLimit = 800;
inline double bessel_i(int n, double x) {
  if (x != x || std::isinf(x)) return kNaN;  // PyTorch's Cephes kernels give NaN at +-inf
  double v = std::fabs(x) > kBesselIKLimit ? kInf : std::cyl_bessel_i(n, std::fabs(x));
  return (n == 1 && x < 0) ? -v : v;
}
inline double bessel_k(int n, double x) {
  if (x != x) return x;
  if (x < 0) return kNaN;
  if (x == 0) return kInf;
  if (x > kBesselIKLimit) return 0;
  return std::cyl_bessel_k(n, x);
}

}  // namespace torch_tpu::host::special
