// Vectorized float math for the elementwise kernels (Highway; vec_math.cpp): array
// functions y[i] = f(x[i]) over f32. The unary loops of elementwise.cpp call these for f32
// and for bf16/f16 (computed in f32, rounded once to the storage type), so the eager and
// the fused kernels (which run the same loops) produce the same bits.
//
// Accuracy contract (f32, measured against the double-precision <cmath> function rounded
// to f32, over a strided sweep of all 2^32 inputs: tests/cpp/runtime/vec_math_test.cpp).
// "ulp" = |result - exact| / ulp(exact); the test asserts these bounds:
//
//   function   max error   algorithm
//   exp        1.5 ulp     reduction + degree-7 polynomial on [-86.5, 88.5]; hwy::Exp for
//                          lanes outside (overflow, subnormal results, inf, NaN)
//   expm1      4 ulp       hwy::Expm1
//   log        2 ulp       hwy::Log
//   log1p      3 ulp       hwy::Log1p
//   tanh       4 ulp       hwy::Tanh
//   logistic   3 ulp       1 / (1 + exp(-x)) in f32 with the exp above (0 for x < -88.72,
//                          where exp(-x) overflows: the f32 formula, as PyTorch CPU)
//   erf        2 ulp       N. Juffa's faithfully rounded erff polynomials (two branches,
//                          blended), 1 - exp(p(|x|)) on |x| > 0.9277 (a reduced exp for
//                          arguments <= 0: no overflow or subnormal paths)
//   sin, cos   3 ulp       hwy::Sin / hwy::Cos for |x| <= 39000; <cmath> sinf / cosf
//                          per lane beyond (Highway's reduction is valid only there)
//
// (The bounds measured at the time of writing are recorded in
// docs/decisions/host-vector-math.md; PyTorch CPU uses SLEEF's 1-ulp functions.)
// Special values follow <cmath>: NaN in gives NaN out; exp/expm1 overflow to +inf above
// 88.72 and exp underflows to 0 / subnormals; log(0) = -inf, log(x < 0) = NaN,
// log(inf) = inf; log1p(-1) = -inf, log1p(x < -1) = NaN; tanh/erf(+-inf) = +-1;
// sin/cos(+-inf) = NaN; signed zeros are kept where <cmath> keeps them (exp of -0 is 1).
//
// Each result depends only on its own input (no lane-crossing work), so the result for
// an element does not depend on where a loop's range starts: tiles and thread chunks of
// any size give the same bits.
//
// Dispatch: vec_math.cpp is compiled once per Highway target (SSE2/SSE4, AVX2, AVX-512)
// and picks the best one the CPU supports at the first call (HWY_DYNAMIC_DISPATCH); all
// calls in a process use the same target. Thread-safe; no state beyond that choice.
#pragma once
#include <cstdint>

namespace torch_tpu::host::vec {

// y[i] = f(x[i]) for i in [0, n). y may equal x (in place); otherwise no overlap.
using F32Fn = void (*)(const float* x, float* y, int64_t n);

void exp_f32(const float* x, float* y, int64_t n);
void expm1_f32(const float* x, float* y, int64_t n);
void log_f32(const float* x, float* y, int64_t n);
void log1p_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);
void logistic_f32(const float* x, float* y, int64_t n);
void erf_f32(const float* x, float* y, int64_t n);
void sin_f32(const float* x, float* y, int64_t n);
void cos_f32(const float* x, float* y, int64_t n);

// The Highway target chosen for this CPU (e.g. "AVX2"), for logs and benchmarks.
const char* target_name();

}  // namespace torch_tpu::host::vec
