// One scalar functor per elementwise IR op (the table of scalar semantics). Each functor
// maps compute-type values (see numeric.h DT<D>::C) to a compute-type result and is
// written branch-light so the contiguous loops that call it vectorize. Semantics follow
// StableHLO and match PyTorch CPU:
// - integer add/sub/mul/neg/abs/pow wrap around (computed in unsigned);
// - integer divide truncates toward zero; x/0 = -1 (all ones for unsigned) and
//   INT_MIN/-1 = INT_MIN, as XLA defines it; remainder has the dividend's sign, x%0 = x;
// - integer pow by squaring; negative exponent: 1 for base 1, +-1 for base -1, else 0;
// - maximum/minimum propagate NaN; sign(NaN) = NaN; round_nearest_even ties to even.
// The name of each functor is the IR op name + "Op"; elementwise.cpp finds them by
// the X-macro over ops.def.
#pragma once
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>

#include "runtime/host/numeric.h"
#include "runtime/host/special_math.h"
#include "runtime/host/special_poly.h"
#include "runtime/host/vec_math.h"

namespace torch_tpu::host::ops {

template <class T>
constexpr bool kFloat = std::is_floating_point_v<T>;
template <class T>
constexpr bool kSigned = kIsInt<T> && std::is_signed_v<T>;

#define TPU_UNARY_OP(Name, expr)      \
  struct Name##Op {                   \
    template <class T>                \
    static T f(T x) {                 \
      return expr;                    \
    }                                 \
  };
// A float op with a vectorized f32 array function (vec_math.h): the elementwise loops run
// f32, bf16 and f16 through kVecF32 (bf16/f16 widened to f32, rounded once); f(x) is the
// f64 definition (and the scalar reference).
#define TPU_UNARY_VEC_OP(Name, expr, vec_fn)               \
  struct Name##Op {                                         \
    static constexpr vec::F32Fn kVecF32 = &vec::vec_fn;     \
    template <class T>                                      \
    static T f(T x) {                                       \
      return expr;                                          \
    }                                                       \
  };
#define TPU_BINARY_OP(Name, expr)     \
  struct Name##Op {                   \
    template <class T>                \
    static T f(T a, T b) {            \
      return expr;                    \
    }                                 \
  };

TPU_UNARY_OP(Sign, x != x ? x : static_cast<T>((T(0) < x) - (x < T(0))))
TPU_UNARY_VEC_OP(Exp, std::exp(x), exp_f32)
TPU_UNARY_VEC_OP(Expm1, std::expm1(x), expm1_f32)
TPU_UNARY_VEC_OP(Log, std::log(x), log_f32)
TPU_UNARY_VEC_OP(Log1p, std::log1p(x), log1p_f32)
TPU_UNARY_OP(Sqrt, std::sqrt(x))
TPU_UNARY_OP(Rsqrt, T(1) / std::sqrt(x))
TPU_UNARY_OP(Cbrt, std::cbrt(x))
TPU_UNARY_VEC_OP(Tanh, std::tanh(x), tanh_f32)
TPU_UNARY_VEC_OP(Logistic, T(1) / (T(1) + std::exp(-x)), logistic_f32)
TPU_UNARY_VEC_OP(Sin, std::sin(x), sin_f32)
TPU_UNARY_VEC_OP(Cos, std::cos(x), cos_f32)
TPU_UNARY_OP(Tan, std::tan(x))
TPU_UNARY_VEC_OP(Erf, std::erf(x), erf_f32)
TPU_UNARY_OP(Floor, std::floor(x))
TPU_UNARY_OP(Ceil, std::ceil(x))
// roundeven in the compute type (the double builtin on floats kept the loop scalar).
template <class T>
T round_even(T x) {
  if constexpr (std::is_same_v<T, float>) return __builtin_roundevenf(x);
  else return static_cast<T>(__builtin_roundeven(static_cast<double>(x)));
}
TPU_UNARY_OP(RoundEven, round_even(x))

struct AbsOp {
  template <class T>
  static T f(T x) {
    if constexpr (kFloat<T>) return std::fabs(x);
    else if constexpr (kSigned<T>) return x < T(0) ? wrap_sub(T(0), x) : x;
    else return x;
  }
};

struct NegateOp {
  template <class T>
  static T f(T x) {
    if constexpr (kFloat<T>) return -x;
    else return wrap_sub(T(0), x);
  }
};

struct NotOp {
  template <class T>
  static T f(T x) {
    if constexpr (std::is_same_v<T, bool>) return !x;
    else return static_cast<T>(~x);
  }
};

TPU_BINARY_OP(Add, wrap_add(a, b))
TPU_BINARY_OP(Sub, wrap_sub(a, b))
TPU_BINARY_OP(Mul, wrap_mul(a, b))
TPU_BINARY_OP(Max, nan_max(a, b))
TPU_BINARY_OP(Min, nan_min(a, b))
TPU_BINARY_OP(Atan2, std::atan2(a, b))
TPU_BINARY_OP(And, static_cast<T>(a & b))
TPU_BINARY_OP(Or, static_cast<T>(a | b))
TPU_BINARY_OP(Xor, static_cast<T>(a ^ b))

struct DivOp {
  template <class T>
  static T f(T a, T b) {
    if constexpr (kFloat<T>) return a / b;
    else if constexpr (!kSigned<T>) return b == 0 ? static_cast<T>(~T(0)) : static_cast<T>(a / b);
    else return b == 0 ? T(-1) : b == T(-1) ? wrap_sub(T(0), a) : static_cast<T>(a / b);
  }
};

struct RemOp {
  template <class T>
  static T f(T a, T b) {
    if constexpr (kFloat<T>) return std::fmod(a, b);
    else if constexpr (!kSigned<T>) return b == 0 ? a : static_cast<T>(a % b);
    else return b == 0 ? a : b == T(-1) ? T(0) : static_cast<T>(a % b);
  }
};

struct PowOp {
  template <class T>
  static T f(T a, T b) {
    if constexpr (kFloat<T>) {
      return std::pow(a, b);
    } else {
      if constexpr (kSigned<T>) {
        if (b < 0) return a == 1 ? T(1) : a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0);
      }
      using W = Wide<T>;
      W r = 1, base = static_cast<W>(a);
      for (std::make_unsigned_t<T> e = static_cast<std::make_unsigned_t<T>>(b); e; e >>= 1) {
        if (e & 1) r *= base;
        base *= base;
      }
      return static_cast<T>(r);
    }
  }
};

// Float special functions: <cmath> where it has them, else special_math.h in double,
// rounded once to T.
TPU_UNARY_OP(Asin, std::asin(x))
TPU_UNARY_OP(Acos, std::acos(x))
TPU_UNARY_OP(Atan, std::atan(x))
TPU_UNARY_OP(Sinh, std::sinh(x))
TPU_UNARY_OP(Cosh, std::cosh(x))
TPU_UNARY_OP(Asinh, std::asinh(x))
TPU_UNARY_OP(Acosh, std::acosh(x))
TPU_UNARY_OP(Atanh, std::atanh(x))
TPU_UNARY_OP(Erfc, std::erfc(x))
TPU_UNARY_OP(ErfInv, static_cast<T>(special::erfinv(x)))
TPU_UNARY_OP(Lgamma, std::lgamma(x))
TPU_UNARY_OP(Digamma, static_cast<T>(special::digamma(x)))
TPU_UNARY_OP(Erfcx, static_cast<T>(special::erfcx(x)))
TPU_UNARY_OP(BesselI0, static_cast<T>(special::bessel_i(0, x)))
TPU_UNARY_OP(BesselI1, static_cast<T>(special::bessel_i(1, x)))
TPU_UNARY_OP(BesselJ0, static_cast<T>(special::bessel_j(0, x)))
TPU_UNARY_OP(BesselJ1, static_cast<T>(special::bessel_j(1, x)))
TPU_UNARY_OP(BesselY0, static_cast<T>(special::bessel_y(0, x)))
TPU_UNARY_OP(BesselY1, static_cast<T>(special::bessel_y(1, x)))
TPU_UNARY_OP(BesselK0, static_cast<T>(special::bessel_k(0, x)))
TPU_UNARY_OP(BesselK1, static_cast<T>(special::bessel_k(1, x)))
TPU_BINARY_OP(NextAfter, std::nextafter(a, b))
TPU_BINARY_OP(Hypot, std::hypot(a, b))
TPU_BINARY_OP(Zeta, static_cast<T>(special::zeta(a, b)))
// Polynomials and Airy Ai in T itself (special_poly.h), as CPU evaluates them.
TPU_UNARY_OP(AiryAi, special::airy_ai(x))
TPU_BINARY_OP(ChebyshevT, special::chebyshev_poly(0, a, b))
TPU_BINARY_OP(ChebyshevU, special::chebyshev_poly(1, a, b))
TPU_BINARY_OP(ChebyshevV, special::chebyshev_poly(2, a, b))
TPU_BINARY_OP(ChebyshevW, special::chebyshev_poly(3, a, b))
TPU_BINARY_OP(ShiftedChebyshevT, special::shifted_chebyshev_poly(0, a, b))
TPU_BINARY_OP(ShiftedChebyshevU, special::shifted_chebyshev_poly(1, a, b))
TPU_BINARY_OP(ShiftedChebyshevV, special::shifted_chebyshev_poly(2, a, b))
TPU_BINARY_OP(ShiftedChebyshevW, special::shifted_chebyshev_poly(3, a, b))
TPU_BINARY_OP(HermiteH, special::hermite_poly(false, a, b))
TPU_BINARY_OP(HermiteHe, special::hermite_poly(true, a, b))
TPU_BINARY_OP(LaguerreL, special::laguerre_poly(a, b))
TPU_BINARY_OP(LegendreP, special::legendre_poly(a, b))

struct GcdOp {
  template <class T>
  static T f(T a, T b) {
    // On magnitudes as uint64: std::gcd(int64) negates INT64_MIN (undefined; UBSan). The
    // result is the same elsewhere, and gcd(INT64_MIN, 0) = 2^63 casts back to INT64_MIN.
    if constexpr (kSigned<T>) {
      auto mag = [](T v) { return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); };
      return static_cast<T>(std::gcd(mag(a), mag(b)));
    } else if constexpr (kIsInt<T>) {
      return static_cast<T>(std::gcd(static_cast<uint64_t>(a), static_cast<uint64_t>(b)));
    } else {
      return a;
    }
  }
};

struct ShiftLeftOp {
  template <class T>
  static T f(T a, T b) {
    if constexpr (kIsInt<T>) {
      using U = std::make_unsigned_t<T>;
      if (static_cast<std::make_signed_t<T>>(b) < 0 || static_cast<U>(b) >= sizeof(T) * 8) return T(0);
      return static_cast<T>(static_cast<U>(static_cast<U>(a) << static_cast<U>(b)));
    } else {
      return a;
    }
  }
};

struct ShiftRightOp {
  template <class T>
  static T f(T a, T b) {
    if constexpr (kIsInt<T>) {
      using U = std::make_unsigned_t<T>;
      if (static_cast<std::make_signed_t<T>>(b) < 0 || static_cast<U>(b) >= sizeof(T) * 8)
        return (kSigned<T> && a < T(0)) ? static_cast<T>(-1) : T(0);
      return static_cast<T>(a >> static_cast<U>(b));
    } else {
      return a;
    }
  }
};

#undef TPU_UNARY_OP
#undef TPU_UNARY_VEC_OP
#undef TPU_BINARY_OP

}  // namespace torch_tpu::host::ops
