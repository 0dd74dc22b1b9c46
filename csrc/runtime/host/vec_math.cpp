// Vectorized f32 math (vec_math.h): Highway's contrib/math functions with the special
// values <cmath> defines patched in by masks, plus a vectorized erf. Compiled once per
// Highway target by foreach_target.h; the array entry points dispatch at run time.
// Built without -march (CMakeLists.txt), so the baseline target runs on any x86-64.
#include <cmath>
#include <cstdint>

#include "runtime/host/vec_math.h"

// Targets: the x86-64 baseline, SSE4, AVX2 and AVX-512 (the AVX-512 flavours beyond the
// base one add nothing to this code and only cost compile time).
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SSSE3 | HWY_AVX3_DL | HWY_AVX3_ZEN4 | HWY_AVX3_SPR | HWY_AVX10_2)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "runtime/host/vec_math.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace torch_tpu::host::vec {
namespace HWY_NAMESPACE {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

// exp(x) overflows f32 above this (the largest float whose exp is finite).
constexpr float kExpOverflow = 88.72283172607421875f;
// exp(x) rounds to 0 below this (exp(-103.97...) is half the smallest subnormal).
constexpr float kExpUnderflow = -104.0f;

// NaN inputs give a (quiet) NaN result, as <cmath>.
HWY_INLINE V keep_nan(V x, V y) { return hn::IfThenElse(hn::IsNaN(x), hn::Add(x, x), y); }
// f(+-0) = +-0 for the functions that are odd at 0 (Highway may lose the sign of -0).
HWY_INLINE V keep_zero(D d, V x, V y) { return hn::IfThenElse(hn::Eq(x, hn::Zero(d)), x, y); }

// exp on [kCoreLo, kCoreHi], where the result and the scale 2^n are normal floats: one
// Cody-Waite reduction by ln 2, a degree-7 polynomial (Cephes' expf coefficients, ~1 ulp) and
// n added to the exponent bits. ~12 vector ops; Highway's Exp (~20) also handles subnormal
// results, and is used for lanes outside this range.
constexpr float kCoreLo = -86.5f, kCoreHi = 88.5f;
HWY_INLINE V exp_core(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), x);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  V p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  p = hn::Add(hn::MulAdd(p, hn::Mul(r, r), r), hn::Set(d, 1.0f));
  const auto e = hn::ShiftLeft<23>(hn::ConvertTo(di, n));
  return hn::BitCast(d, hn::Add(hn::BitCast(di, p), e));
}

// Lanes in the core range by exp_core; a vector with any other lane (overflow, subnormal
// results, +-inf, NaN) also computes Highway's Exp with the special cases and takes it for
// those lanes only, so each lane's result depends on its own input alone.
HWY_INLINE V exp_v(D d, V x) {
  const auto core = hn::And(hn::Ge(x, hn::Set(d, kCoreLo)), hn::Le(x, hn::Set(d, kCoreHi)));
  V y = exp_core(d, hn::IfThenElseZero(core, x));
  if (HWY_UNLIKELY(!hn::AllTrue(d, core))) {
    V z = hn::Exp(d, x);
    z = hn::IfThenElse(hn::Gt(x, hn::Set(d, kExpOverflow)), hn::Inf(d), z);
    z = hn::IfThenElse(hn::Lt(x, hn::Set(d, kExpUnderflow)), hn::Zero(d), z);
    y = hn::IfThenElse(core, y, keep_nan(x, z));
  }
  return y;
}

HWY_INLINE V expm1_v(D d, V x) {
  V y = hn::Expm1(d, x);
  y = hn::IfThenElse(hn::Gt(x, hn::Set(d, kExpOverflow)), hn::Inf(d), y);
  y = hn::IfThenElse(hn::Lt(x, hn::Set(d, kExpUnderflow)), hn::Set(d, -1.0f), y);
  return keep_nan(x, keep_zero(d, x, y));
}

HWY_INLINE V log_v(D d, V x) {
  V y = hn::Log(d, x);
  y = hn::IfThenElse(hn::Eq(x, hn::Inf(d)), x, y);
  y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Neg(hn::Inf(d)), y);  // +-0
  y = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::NaN(d), y);
  return keep_nan(x, y);
}

HWY_INLINE V log1p_v(D d, V x) {
  const V m1 = hn::Set(d, -1.0f);
  V y = hn::Log1p(d, x);
  y = hn::IfThenElse(hn::Eq(x, hn::Inf(d)), x, y);
  y = hn::IfThenElse(hn::Eq(x, m1), hn::Neg(hn::Inf(d)), y);
  y = hn::IfThenElse(hn::Lt(x, m1), hn::NaN(d), y);
  return keep_nan(x, y);
}

HWY_INLINE V tanh_v(D d, V x) { return keep_nan(x, hn::Tanh(d, x)); }

HWY_INLINE V logistic_v(D d, V x) {
  const V one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, exp_v(d, hn::Neg(x))));
}

// exp(x) for erf's x = q(|a|) <= 0 (-inf too): inputs clamped to -86 (exp(-86) ~ 4e-38, below
// half an ulp of 1, so 1 - exp is exactly 1 either way); no NaN handling (a NaN lane's erf
// comes from the other branch).
HWY_INLINE V exp_neg_v(D d, V x) { return exp_core(d, hn::Max(x, hn::Set(d, -86.0f))); }

// erf after N. Juffa, "Efficient, faithfully rounded implementation of erff"
// (stackoverflow.com/a/35148199; the polynomial MLX and PyTorch's MPS backend use):
//   |x| <= 0.927734375: x + x * p(x^2), degree-5 p (0.98929 ulp with fma)
//   |x| >  0.927734375: sign(x) * (1 - exp(q(|x|))), degree-7 q (0.99527 ulp with a
//                       correctly rounded expf; ours adds at most ~0.2 ulp, as exp(q) < 0.2)
// Both branches are evaluated and blended. NaN stays NaN (first branch); +-inf and large
// |x| give q = -inf, exp = 0, so +-1. Signed zero: erf(-0) = -0 (fma(p, -0, -0)).
HWY_INLINE V erf_v(D d, V a) {
  const V t = hn::Abs(a), s = hn::Mul(a, a);
  V r = hn::MulAdd(hn::Set(d, -1.72853470e-5f), t, hn::Set(d, 3.83197126e-4f));
  V u = hn::MulAdd(hn::Set(d, -3.88396438e-3f), t, hn::Set(d, 2.42546219e-2f));
  r = hn::MulAdd(r, s, u);
  r = hn::MulAdd(r, t, hn::Set(d, -1.06777877e-1f));
  r = hn::MulAdd(r, t, hn::Set(d, -6.34846687e-1f));
  r = hn::MulAdd(r, t, hn::Set(d, -1.28717512e-1f));
  r = hn::MulSub(r, t, t);
  V big = hn::CopySign(hn::Sub(hn::Set(d, 1.0f), exp_neg_v(d, r)), a);
  V p = hn::Set(d, -5.96761703e-4f);
  p = hn::MulAdd(p, s, hn::Set(d, 4.99119423e-3f));
  p = hn::MulAdd(p, s, hn::Set(d, -2.67681349e-2f));
  p = hn::MulAdd(p, s, hn::Set(d, 1.12819925e-1f));
  p = hn::MulAdd(p, s, hn::Set(d, -3.76125336e-1f));
  p = hn::MulAdd(p, s, hn::Set(d, 1.28379166e-1f));
  V small = hn::MulAdd(p, a, a);
  return hn::IfThenElse(hn::Gt(t, hn::Set(d, 0.927734375f)), big, small);
}

// Highway's sin/cos reduce the argument accurately only for |x| <= 39000.
constexpr float kTrigLimit = 39000.0f;
HWY_INLINE V sin_v(D d, V x) { return keep_zero(d, x, hn::Sin(d, x)); }
HWY_INLINE V cos_v(D d, V x) { return hn::Cos(d, x); }

// y[i] = f(x[i]); the tail is one partial vector (LoadN zero-fills, StoreN writes only
// the valid lanes), so every element goes through the same vector code.
template <class F>
HWY_INLINE void map(const float* x, float* y, int64_t n, F f) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    size_t rem = static_cast<size_t>(n - i);
    hn::StoreN(f(d, hn::LoadN(d, x + i, rem)), d, y + i, rem);
  }
}

// As map, but lanes with !(|x| <= limit) (also NaN / inf) are recomputed by the scalar
// function: per lane, so a result never depends on its neighbours.
template <class F>
HWY_INLINE void map_limited(const float* x, float* y, int64_t n, F f, float limit, float (*scalar)(float)) {
  const D d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const V lim = hn::Set(d, limit);
  for (int64_t i = 0; i < n; i += N) {
    size_t cnt = static_cast<size_t>(n - i < N ? n - i : N);
    V v = hn::LoadN(d, x + i, cnt);
    hn::StoreN(f(d, v), d, y + i, cnt);
    if (HWY_UNLIKELY(!hn::AllTrue(d, hn::Le(hn::Abs(v), lim)))) {
      HWY_ALIGN float xs[HWY_MAX_BYTES / sizeof(float)];
      hn::Store(v, d, xs);
      for (size_t j = 0; j < cnt; ++j)
        if (!(std::fabs(xs[j]) <= limit)) y[i + j] = scalar(xs[j]);
    }
  }
}

float sin_scalar(float x) { return std::sin(x); }
float cos_scalar(float x) { return std::cos(x); }

}  // namespace

#define TPU_VEC_ARRAY(name)                                     \
  void name##_array(const float* x, float* y, int64_t n) {      \
    map(x, y, n, [](D d, V v) HWY_ATTR { return name##_v(d, v); }); \
  }
TPU_VEC_ARRAY(exp)
TPU_VEC_ARRAY(expm1)
TPU_VEC_ARRAY(log)
TPU_VEC_ARRAY(log1p)
TPU_VEC_ARRAY(tanh)
TPU_VEC_ARRAY(logistic)
TPU_VEC_ARRAY(erf)
#undef TPU_VEC_ARRAY
void sin_array(const float* x, float* y, int64_t n) {
  map_limited(x, y, n, [](D d, V v) HWY_ATTR { return sin_v(d, v); }, kTrigLimit, &sin_scalar);
}
void cos_array(const float* x, float* y, int64_t n) {
  map_limited(x, y, n, [](D d, V v) HWY_ATTR { return cos_v(d, v); }, kTrigLimit, &cos_scalar);
}
const char* target_name_here() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace torch_tpu::host::vec
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace torch_tpu::host::vec {

HWY_EXPORT(exp_array);
HWY_EXPORT(expm1_array);
HWY_EXPORT(log_array);
HWY_EXPORT(log1p_array);
HWY_EXPORT(tanh_array);
HWY_EXPORT(logistic_array);
HWY_EXPORT(erf_array);
HWY_EXPORT(sin_array);
HWY_EXPORT(cos_array);
HWY_EXPORT(target_name_here);

void exp_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(exp_array)(x, y, n); }
void expm1_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(expm1_array)(x, y, n); }
void log_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(log_array)(x, y, n); }
void log1p_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(log1p_array)(x, y, n); }
void tanh_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(tanh_array)(x, y, n); }
void logistic_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(logistic_array)(x, y, n); }
void erf_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(erf_array)(x, y, n); }
void sin_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(sin_array)(x, y, n); }
void cos_f32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(cos_array)(x, y, n); }
const char* target_name() { return HWY_DYNAMIC_DISPATCH(target_name_here)(); }

}  // namespace torch_tpu::host::vec
#endif  // HWY_ONCE
