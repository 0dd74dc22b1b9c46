// The accuracy contract of vec_math.h: each f32 function against the double-precision
// <cmath> function over a strided sweep of all 2^32 bit patterns (every sign, exponent,
// subnormals, inf, NaN), special values against <cmath> bit for bit (NaN class, infinities,
// signed zeros), and results independent of where an array starts or ends.
// An exhaustive run: tpu_cpp_tests --gtest_also_run_disabled_tests --gtest_filter='*Exhaustive*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hwy/targets.h"
#include "runtime/host/vec_math.h"

namespace torch_tpu::host::vec {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// |got - exact| in units of the f32 ulp at `exact` (subnormal ulp below FLT_MIN). A wrong
// class (NaN vs number, a wrong infinity) is reported as 1e9.
double ulp_error(float got, double exact) {
  if (std::isnan(exact) || std::isnan(got)) return std::isnan(exact) && std::isnan(got) ? 0 : 1e9;
  float rounded = static_cast<float>(exact);
  if (std::isinf(got) || std::isinf(rounded)) {
    if (got == rounded) return 0;
    if (std::isinf(exact) || std::isinf(static_cast<double>(got))) return 1e9;
  }
  if (exact == 0) return got == 0 ? 0 : 1e9;
  int e;
  std::frexp(exact, &e);
  return std::fabs(static_cast<double>(got) - exact) / std::ldexp(1.0, std::max(e - 24, -149));
}

double logistic_ref(double x) {
  // The f32 formula 1 / (1 + exp(-x)) gives 0 once exp(-x) overflows (as PyTorch CPU and
  // the scalar definition); the contract holds above that.
  return x < -88.72283172607421875 ? 0.0 : 1.0 / (1.0 + std::exp(-x));
}

struct Fn {
  const char* name;
  F32Fn f;
  double (*ref)(double);
  double max_ulp;  // the bound documented in vec_math.h
};

const std::vector<Fn>& fns() {
  static const std::vector<Fn> v = {
      {"exp", &exp_f32, [](double x) { return std::exp(x); }, 1.5},
      {"expm1", &expm1_f32, [](double x) { return std::expm1(x); }, 4.0},
      {"log", &log_f32, [](double x) { return std::log(x); }, 2.0},
      {"log1p", &log1p_f32, [](double x) { return std::log1p(x); }, 3.0},
      {"tanh", &tanh_f32, [](double x) { return std::tanh(x); }, 4.0},
      {"logistic", &logistic_f32, &logistic_ref, 3.0},
      {"erf", &erf_f32, [](double x) { return std::erf(x); }, 2.0},
      {"sin", &sin_f32, [](double x) { return std::sin(x); }, 3.0},
      {"cos", &cos_f32, [](double x) { return std::cos(x); }, 3.0},
  };
  return v;
}

// Max ulp error of f over bit patterns 0, stride, 2*stride, ... (< 2^32).
double sweep(const Fn& f, uint64_t stride, float* worst) {
  constexpr size_t kBatch = 1 << 14;
  std::vector<float> x(kBatch), y(kBatch);
  double mx = 0;
  for (uint64_t u = 0; u < (uint64_t{1} << 32);) {
    size_t n = 0;
    for (; n < kBatch && u < (uint64_t{1} << 32); ++n, u += stride) x[n] = from_bits(static_cast<uint32_t>(u));
    f.f(x.data(), y.data(), static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      double e = ulp_error(y[i], f.ref(x[i]));
      if (e > mx) mx = e, *worst = x[i];
    }
  }
  return mx;
}

TEST(VecMath, UlpBoundsOverStridedSweep) {
  std::printf("[vec_math] target %s\n", target_name());
  for (const Fn& f : fns()) {
    float worst = 0;
    double mx = sweep(f, 1021, &worst);  // ~4.2M inputs per function
    std::printf("[vec_math] %-9s max %.3f ulp (at %a)\n", f.name, mx, worst);
    EXPECT_LE(mx, f.max_ulp) << f.name << " at x=" << worst;
  }
}

// Every compiled target this CPU runs (SSE2 / SSE4 without FMA, AVX2, AVX-512) keeps the
// bounds and the special values: the fallback for CPUs without AVX2 is exercised here.
TEST(VecMath, EveryDispatchTargetKeepsBounds) {
  const int64_t supported = hwy::SupportedTargets();
  int ran = 0;
  for (int64_t t : {int64_t{HWY_SSE2}, int64_t{HWY_SSE4}, int64_t{HWY_AVX2}, int64_t{HWY_AVX3}}) {
    if (!(supported & t)) continue;
    hwy::SetSupportedTargetsForTest(t);
    ASSERT_STREQ(target_name(), hwy::TargetName(t));
    for (const Fn& f : fns()) {
      float worst = 0;
      double mx = sweep(f, 8191, &worst);
      EXPECT_LE(mx, f.max_ulp) << f.name << " on " << hwy::TargetName(t) << " at x=" << worst;
      const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
      float y[5];
      f.f(sp, y, 5);
      for (int i = 0; i < 5; ++i) {
        double e = ulp_error(y[i], f.ref(sp[i]));
        EXPECT_LT(e, 1e9) << f.name << "(" << sp[i] << ") on " << hwy::TargetName(t);
      }
    }
    ++ran;
  }
  hwy::SetSupportedTargetsForTest(0);  // back to the CPU's own targets
  EXPECT_GE(ran, 2);
}

TEST(VecMath, DISABLED_ExhaustiveUlp) {  // VEC_FN=erf: that function only
  const char* only = std::getenv("VEC_FN");
  for (const Fn& f : fns()) {
    if (only && std::strcmp(only, f.name) != 0) continue;
    float worst = 0;
    double mx = sweep(f, 1, &worst);
    std::printf("[vec_math] exhaustive %-9s max %.3f ulp (at %a)\n", f.name, mx, worst);
    EXPECT_LE(mx, f.max_ulp) << f.name << " at x=" << worst;
  }
}

// Dense sweeps where the functions are used most (activations, softmax, GELU).
TEST(VecMath, UlpBoundsDenseNearZero) {
  for (const Fn& f : fns()) {
    std::vector<float> x, y;
    for (float v = -20.0f; v <= 20.0f; v += 1.0f / 4096) x.push_back(v);
    y.resize(x.size());
    f.f(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double mx = 0;
    for (size_t i = 0; i < x.size(); ++i) mx = std::max(mx, ulp_error(y[i], f.ref(x[i])));
    EXPECT_LE(mx, f.max_ulp) << f.name;
  }
}

// Special values: the <cmath> f32 result, NaN for NaN (any payload), equal bits otherwise
// when that result is inf, 0 or +-1; finite results within the bound.
TEST(VecMath, SpecialValuesMatchCmath) {
  const float inf = INFINITY, fmax = 3.40282347e38f, fmin = 1.17549435e-38f, den = 1e-45f;
  const std::vector<float> xs = {0.0f, -0.0f, inf, -inf, NAN, -NAN, den, -den, fmin, -fmin, 1e-30f,
                                 -1e-30f, fmax, -fmax, 88.72283172607421875f, 88.72283935546875f, 89.0f,
                                 103.0f, 200.0f, -87.33654f, -87.5f, -103.9f, -104.0f, -110.0f, -1.0f,
                                 -1.0000001f, -0.99999994f, -2.0f, 39000.0f, 39001.0f, -1e6f, 1e30f,
                                 0.927734375f, 0.92773443f, 3.92f, 10.0f, -10.0f, 1.0f, 0.5f};
  for (const Fn& f : fns()) {
    std::vector<float> y(xs.size());
    f.f(xs.data(), y.data(), static_cast<int64_t>(xs.size()));
    for (size_t i = 0; i < xs.size(); ++i) {
      float want = static_cast<float>(f.ref(xs[i]));
      if (std::string(f.name) != "logistic" && std::string(f.name) != "erf") {
        // <cmath>'s own f32 function: the class and the exact values it returns
        float (*cm)(float) = nullptr;
        std::string n = f.name;
        if (n == "exp") cm = [](float v) { return std::exp(v); };
        if (n == "expm1") cm = [](float v) { return std::expm1(v); };
        if (n == "log") cm = [](float v) { return std::log(v); };
        if (n == "log1p") cm = [](float v) { return std::log1p(v); };
        if (n == "tanh") cm = [](float v) { return std::tanh(v); };
        if (n == "sin") cm = [](float v) { return std::sin(v); };
        if (n == "cos") cm = [](float v) { return std::cos(v); };
        want = cm(xs[i]);
      }
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y[i])) << f.name << "(" << xs[i] << ") = " << y[i];
      } else if (std::isinf(want) || want == 0 || std::fabs(want) == 1) {
        EXPECT_EQ(bits(y[i]), bits(want)) << f.name << "(" << xs[i] << ") = " << y[i] << ", want " << want;
      } else {
        EXPECT_LE(ulp_error(y[i], f.ref(xs[i])), f.max_ulp) << f.name << "(" << xs[i] << ")";
      }
    }
  }
}

// An element's result does not depend on the array's start or length (vector vs tail
// lanes, in place or not), so tiles and thread chunks of any size give the same bits.
TEST(VecMath, ResultIndependentOfPosition) {
  std::vector<float> x(257);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.37f - 47.0f + (i % 7 == 0 ? 5e4f : 0.0f);
  for (const Fn& f : fns()) {
    std::vector<float> ref(x.size());
    f.f(x.data(), ref.data(), static_cast<int64_t>(x.size()));
    for (size_t off : {1, 3, 8, 13})
      for (size_t len : {1, 5, 8, 17, 100}) {
        std::vector<float> y(x.begin() + off, x.begin() + off + len);
        f.f(y.data(), y.data(), static_cast<int64_t>(len));  // in place
        for (size_t i = 0; i < len; ++i) ASSERT_EQ(bits(y[i]), bits(ref[off + i])) << f.name << " off " << off;
      }
  }
}

}  // namespace
}  // namespace torch_tpu::host::vec
