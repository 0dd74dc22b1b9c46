// Orthogonal polynomials p(x, n) and the Airy function Ai of torch.special, for the scalar
// functors of scalar_ops.h. Same algorithms, branch points and evaluation type T as PyTorch
// CPU (ATen/native/Math.h: trigonometric forms for large n inside (-1, 1), three-term
// recurrences otherwise, stopping at NaN), so float results match CPU's float results.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace torch_tpu::host::special {

// n as PyTorch CPU casts it (toward zero). NaN, inf and values outside int64 convert to
// INT64_MIN on x86 (so the polynomial is 0); we return -1 for them, with the same result.
template <class T>
int64_t poly_degree(T n) {
  if (!(n > T(-9.2e18) && n < T(9.2e18))) return -1;
  return static_cast<int64_t>(n);
}

// The Chebyshev recurrence r_k = 2y r_{k-1} - r_{k-2} from (p0 = 1, q = first), k = 2..n.
template <class T>
T chebyshev_recurrence(T two_y, T first, int64_t n) {
  if (n == 0) return T(1);
  if (n == 1) return first;
  T p = T(1), q = first, r = first;
  for (int64_t k = 2; k <= n && !std::isnan(q); ++k) {
    r = two_y * q - p;
    p = q;
    q = r;
  }
  return r;
}

// Chebyshev T/U/V/W (kind 0..3) at y with CPU's endpoint values and trigonometric branch
// (taken when n > big and |y| < 1). The shifted variants call this with y = 2x - 1 and
// their own thresholds; `at_one` / `at_minus_one` are y == 1 / y == -1 as each variant tests.
template <class T>
T chebyshev(int kind, T y, int64_t n, int64_t big, bool at_one, bool at_minus_one) {
  if (n < 0) return T(0);
  T odd = T(n + n + 1), n1 = T(n + 1);
  bool even = n % 2 == 0;
  if (at_one) return kind == 0 || kind == 2 ? T(1) : (kind == 1 ? n1 : odd);
  if (at_minus_one) {
    if (kind == 0 || kind == 3) return even ? T(1) : T(-1);
    if (kind == 1) return even ? n1 : -n1;
    return even ? odd : -odd;
  }
  if (n > big && std::abs(y) < T(1)) {
    T t = std::acos(y);
    switch (kind) {
      case 0: return std::cos(T(n) * t);
      case 1:
        if (std::sin(t) != T(0)) return std::sin(n1 * t) / std::sin(t);
        return n1 * std::cos(n1 * t) / y;
      case 2:
        if (std::sin(t / T(2)) != T(1)) return std::cos((T(n) + T(0.5)) * t) / std::cos(t / T(2));
        return even ? odd : -odd;
      default:
        if (std::cos(t / T(2)) != T(1)) return std::sin((T(n) + T(0.5)) * t) / std::sin(t / T(2));
        if (y > T(0)) return odd;  // unreachable for |y| < 1 but kept as CPU has it
        return even ? T(1) : T(-1);
    }
  }
  T first = kind == 0 ? y : (kind == 1 ? y + y : (kind == 2 ? y + y - T(1) : y + y + T(1)));
  return chebyshev_recurrence(y + y, first, n);
}

template <class T>
T chebyshev_poly(int kind, T x, T nf) {
  int64_t n = poly_degree(nf);
  bool unit = std::abs(x) == T(1);
  return chebyshev(kind, x, n, kind == 0 ? 6 : 8, unit && x > T(0), unit && !(x > T(0)));
}

template <class T>
T shifted_chebyshev_poly(int kind, T x, T nf) {
  int64_t n = poly_degree(nf);
  T y = x + x - T(1);
  if (n < 0) return T(0);
  // CPU's shifted W ignores the trigonometric branch's x > 0 endpoint; its big-n threshold is 4.
  if (kind == 3 && n > 4 && std::abs(y) < T(1) && !(x == T(1)) && !(x == T(0)) &&
      std::cos(std::acos(y) / T(2)) == T(1))
    return n % 2 == 0 ? T(1) : T(-1);
  // CPU's shifted forms add 2y as y + y with y = x + x - 1 (same value), and the first term
  // of V/W as 2y -/+ 1.
  return chebyshev(kind, y, n, kind == 3 ? 4 : 6, x == T(1), x == T(0));
}

template <class T>
constexpr int64_t hermite_limit() {
  if constexpr (std::is_same_v<T, float>) return 128;
  else if constexpr (std::is_same_v<T, double>) return 512;
  else return 1024;
}

// Physicists' Hermite H_n (he = false) or probabilists' He_n (he = true).
template <class T>
T hermite_poly(bool he, T x, T nf) {
  int64_t n = poly_degree(nf);
  if (n < 0) return T(0);
  if (n == 0) return T(1);
  if (n == 1) return he ? x : x + x;
  if (n > hermite_limit<T>()) return std::numeric_limits<T>::quiet_NaN();
  T p = T(1), q = he ? x : x + x, r = T(0);
  if (he) {
    for (int64_t k = 1; k < n; ++k) {
      r = x * q - T(k) * p;
      p = q;
      q = r;
    }
  } else {
    for (int64_t k = 2; k < n + n; k += 2) {
      r = (x + x) * q - T(k) * p;
      p = q;
      q = r;
    }
  }
  return r;
}

template <class T>
T laguerre_poly(T x, T nf) {
  int64_t n = poly_degree(nf);
  if (n < 0) return T(0);
  if (std::abs(x) == T(0) || n == 0) return T(1);
  if (n == 1) return T(1) - x;
  T p = T(1), q = T(1) - x, r = q;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    r = ((T(k + k) + (T(1) - x)) * q - T(k) * p) / T(k + 1);
    p = q;
    q = r;
  }
  return r;
}

template <class T>
T legendre_poly(T x, T nf) {
  int64_t n = poly_degree(nf);
  if (n < 0) return T(0);
  if (std::abs(x) == T(1)) return (x > T(0) || n % 2 == 0) ? T(1) : T(-1);
  if (n == 0) return T(1);
  if (n == 1) return x;
  T p = T(1), q = x, r = q;
  for (int64_t k = 1; k < n && !std::isnan(q); ++k) {
    r = (T(k + k + 1) * x * q - T(k) * p) / T(k + 1);
    p = q;
    q = r;
  }
  return r;
}

template <class T, int N>
T horner(const double (&c)[N], T z, int terms) {
  T r = T(0);
  for (int i = 0; i < terms; ++i) r = r * z + T(c[i]);
  return r;
}

// Airy Ai (Cephes, as PyTorch CPU): asymptotic forms for x < -2.09 and x >= 2.09, the Maclaurin
// series in between (and, as CPU, also evaluated but unused for 2.09 <= x <= 8.32).
template <class T>
T airy_ai(T x) {
  static const double AN[] = {3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
                              1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
                              1.40264691163389668864e+01, 9.99999999999999995305e-01};
  static const double AD[] = {5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
                              1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
                              1.40959135607834029598e+01, 1.00000000000000000470e+00};
  static const double AFN[] = {-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
                               -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
                               -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08};
  static const double AFD[] = {1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
                               9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
                               4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07};
  static const double AGN[] = {1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
                               9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
                               5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
                               8.11789239554389293311e-08, 3.41551784765923618484e-10};
  static const double AGD[] = {9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
                               5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
                               4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
                               4.91834570062930015649e-09};
  if (std::isinf(x)) return std::numeric_limits<T>::quiet_NaN();
  if (x > T(103.892)) return T(0);
  if (x < T(-2.09)) {
    T z = T(1) / (T(-2) * x * std::sqrt(-x) / T(3));
    T zz = z * z;
    T afn = horner(AFN, zz, 9), afd = horner(AFD, zz, 9), agn = horner(AGN, zz, 11), agd = horner(AGD, zz, 10);
    T t = T(-2) * x * std::sqrt(-x) / T(3) + T(0.25) * T(3.14159265358979323846);
    return T(5.64189583547756286948e-01) / std::sqrt(std::sqrt(-x)) *
           (std::sin(t) * (T(1) + zz * afn / afd) - std::cos(t) * (z * agn / agd));
  }
  if (x >= T(2.09)) {
    T zeta = T(2) * x * std::sqrt(x) / T(3);
    T an = horner(AN, T(1) / zeta, 8), ad = horner(AD, T(1) / zeta, 8);
    return T(5.64189583547756286948e-01) * (an / ad) / (T(2) * std::sqrt(std::sqrt(x)) * std::exp(zeta));
  }
  T f = T(1), g = x, k = T(1), m = T(1), n = x, t = T(1), z = x * x * x;
  while (t > std::numeric_limits<T>::epsilon()) {
    m *= z;
    k += T(1);
    m /= k;
    n *= z;
    k += T(1);
    n /= k;
    m /= k;
    f += m;
    k += T(1);
    n /= k;
    g += n;
    t = std::abs(m / f);
  }
  return T(0.355028053887817239260) * f - T(0.258819403792806798405) * g;
}

}  // namespace torch_tpu::host::special
