// gemm_small (runtime/host/gemv.cpp): the DEFAULT and HIGH products for few rows, against a
// scalar reference on bf16-rounded inputs (HIGH: hi*hi + hi*lo + lo*hi; double sums; the
// kernel's f32 sums may differ by K 2^-24 sum |a||b|), on every Highway target this CPU runs, both weight layouts,
// transposed A, ragged K and N; NaN/Inf propagation, subnormal flushing, results independent
// of the thread split, and agreement with the packed GEMM path it replaces.
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <vector>

#include "hwy/targets.h"
#include "runtime/host/gemm.h"
#include "runtime/host/numeric.h"

namespace torch_tpu::host {
namespace {

struct Problem {
  GemmShape s;
  std::vector<float> a, b;
};

float value(uint64_t i, uint64_t salt) {  // deterministic, spread over a few binades, both signs
  uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ salt;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<float>(static_cast<int64_t>(h % 20001) - 10000) / 3000.0f;
}

Problem make_problem(int64_t B, int64_t M, int64_t K, int64_t N, bool ta, bool tb) {
  Problem p{{B, M, N, K, ta, tb}, std::vector<float>(B * M * K), std::vector<float>(B * K * N)};
  for (size_t i = 0; i < p.a.size(); ++i) p.a[i] = value(i, 1);
  for (size_t i = 0; i < p.b.size(); ++i) p.b[i] = value(i, 2);
  return p;
}

float ref_round(float x, bool flush) {
  float r = round_bf16(x);
  return flush && (f32_bits(r) & 0x7F800000u) == 0 ? 0.0f : r;
}
float at_a(const Problem& p, int64_t bi, int64_t m, int64_t k) {
  const GemmShape& s = p.s;
  return s.trans_a ? p.a[(bi * s.k + k) * s.m + m] : p.a[(bi * s.m + m) * s.k + k];
}
float at_b(const Problem& p, int64_t bi, int64_t k, int64_t n) {
  const GemmShape& s = p.s;
  return s.trans_b ? p.b[(bi * s.n + n) * s.k + k] : p.b[(bi * s.k + k) * s.n + n];
}

// A value's bf16 parts as the kernel splits them: hi = bf16(x), lo = bf16(x - hi) (from the
// unflushed hi), each flushed to zero when its exponent is zero and `flush`.
std::pair<double, double> parts(float x, bool flush) {
  float h = round_bf16(x);
  return {ref_round(x, flush), ref_round(x - h, flush)};
}

// Exact-product reference in double, and sum |a||b| for the tolerance.
void reference(const Problem& p, bool flush, std::vector<double>& c, std::vector<double>& mag,
               SmallPrecision sp = SmallPrecision::Default) {
  const GemmShape& s = p.s;
  c.assign(s.batch * s.m * s.n, 0.0);
  mag.assign(c.size(), 0.0);
  for (int64_t bi = 0; bi < s.batch; ++bi)
    for (int64_t m = 0; m < s.m; ++m)
      for (int64_t n = 0; n < s.n; ++n) {
        double acc = 0, g = 0;
        for (int64_t k = 0; k < s.k; ++k) {
          auto [xh, xl] = parts(at_a(p, bi, m, k), flush);
          auto [yh, yl] = parts(at_b(p, bi, k, n), flush);
          double t = sp == SmallPrecision::High ? xh * yh + xh * yl + xl * yh : xh * yh;
          acc += t;
          g += sp == SmallPrecision::High ? std::fabs(xh * yh) + std::fabs(xh * yl) + std::fabs(xl * yh) : std::fabs(t);
        }
        c[(bi * s.m + m) * s.n + n] = acc;
        mag[(bi * s.m + m) * s.n + n] = g;
      }
}

std::vector<float> run_small(const Problem& p, bool flush, SmallPrecision sp = SmallPrecision::Default) {
  std::vector<float> c(p.s.batch * p.s.m * p.s.n, -12345.0f);
  EXPECT_TRUE(gemm_small(p.s, sp, p.a.data(), p.b.data(), c.data(), flush));
  return c;
}

void expect_close(const Problem& p, bool flush, const std::string& what, SmallPrecision sp = SmallPrecision::Default) {
  std::vector<double> ref, mag;
  reference(p, flush, ref, mag, sp);
  std::vector<float> got = run_small(p, flush, sp);
  for (size_t i = 0; i < got.size(); ++i) {
    double tol = (sp == SmallPrecision::High ? 2 : 1) * (p.s.k + 1) * std::ldexp(mag[i], -24);
    ASSERT_LE(std::fabs(got[i] - ref[i]), tol) << what << " element " << i << " got " << got[i] << " want " << ref[i];
  }
}

std::string name(const Problem& p, const char* target) {
  const GemmShape& s = p.s;
  return std::string(target) + " B,M,K,N=" + std::to_string(s.batch) + "," + std::to_string(s.m) + "," +
         std::to_string(s.k) + "," + std::to_string(s.n) + (s.trans_a ? " ta" : "") + (s.trans_b ? " tb" : "");
}

// Every compiled target the CPU runs: the AVX2 and SSE fallbacks are exercised here too.
template <class F>
int each_target(F f) {
  const int64_t supported = hwy::SupportedTargets();
  int ran = 0;
  for (int64_t t : {int64_t{HWY_SSE2}, int64_t{HWY_SSE4}, int64_t{HWY_AVX2}, int64_t{HWY_AVX3}}) {
    if (!(supported & t)) continue;
    hwy::SetSupportedTargetsForTest(t);
    f(hwy::TargetName(t));
    ++ran;
  }
  hwy::SetSupportedTargetsForTest(0);
  return ran;
}

TEST(HostGemv, MatchesReferenceOnEveryTarget) {
  int ran = each_target([](const char* target) {
    for (SmallPrecision sp : {SmallPrecision::Default, SmallPrecision::High})
      for (bool tb : {true, false})
        for (bool ta : {false, true}) {
          std::string pn = sp == SmallPrecision::High ? " HIGH" : " DEFAULT";
          for (int64_t M = 1; M <= 16; ++M)  // every row count (register tiles and remainders)
            for (auto [K, N] : {std::pair<int64_t, int64_t>{33, 37}, {7, 100}}) {
              Problem p = make_problem(1, M, K, N, ta, tb);
              expect_close(p, false, name(p, target) + pn, sp);
            }
          for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {3, 1, 7}, {8, 1000, 33},
                                 {5, 1000, 1}, {16, 7, 1000}, {9, 257, 65}, {2, 16, 48}}) {
            Problem p = make_problem(1, M, K, N, ta, tb);
            expect_close(p, false, name(p, target) + pn, sp);
            expect_close(p, true, name(p, target) + pn + " flush", sp);
          }
          Problem p = make_problem(3, 4, 33, 70, ta, tb);  // batched: one weight per batch
          expect_close(p, false, name(p, target) + pn, sp);
        }
  });
  EXPECT_GE(ran, 2);
}

// HIGH keeps what DEFAULT drops: on inputs with low-order bits, its error against the exact
// f32 product is far below DEFAULT's (the parts' products are exact; only f32 sums round).
TEST(HostGemv, HighIsMorePreciseThanDefault) {
  for (bool tb : {true, false}) {
    Problem p = make_problem(1, 8, 512, 40, false, tb);
    std::vector<float> d = run_small(p, false), h = run_small(p, false, SmallPrecision::High);
    double ed = 0, eh = 0;
    for (int64_t m = 0; m < 8; ++m)
      for (int64_t n = 0; n < 40; ++n) {
        double exact = 0, mag = 0;
        for (int64_t k = 0; k < 512; ++k) {
          exact += double(at_a(p, 0, m, k)) * at_b(p, 0, k, n);
          mag += std::fabs(double(at_a(p, 0, m, k)) * at_b(p, 0, k, n));
        }
        ed = std::max(ed, std::fabs(d[m * 40 + n] - exact) / mag);
        eh = std::max(eh, std::fabs(h[m * 40 + n] - exact) / mag);
      }
    EXPECT_LT(eh, std::ldexp(1.0, -15)) << tb;
    EXPECT_GT(ed, 64 * eh) << tb;
  }
}

TEST(HostGemv, DecodeShapeAndThreadSplit) {
  // Large enough to run on every thread; each result must not depend on the split.
  for (bool tb : {true, false}) {
    Problem p = make_problem(1, 8, 1024, 1000, false, tb);
    expect_close(p, true, tb ? "decode [N,K]" : "decode [K,N]");
    std::vector<float> all = run_small(p, true);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    std::vector<float> one = run_small(p, true);
    omp_set_num_threads(threads);
    for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(f32_bits(all[i]), f32_bits(one[i])) << i;
  }
}

// [K,N] weights: each column's sum runs over k in order from +0 (one FMA per product), across
// the kernel's column and weight-row blocks (partial sums kept in C) and every tile shape:
// bit for bit a scalar FMA loop. K and N leave partial blocks and a partial vector.
TEST(HostGemv, KnSumsInOrderAcrossBlocks) {
  each_target([](const char* target) {
    for (int64_t M : {1, 2, 3, 4, 5, 8, 13})
      for (bool flush : {false, true}) {
        Problem p = make_problem(1, M, 1003, 601, false, false);
        std::vector<float> got = run_small(p, flush);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < 601; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < 1003; ++k)
              acc = std::fma(ref_round(at_a(p, 0, m, k), flush), ref_round(at_b(p, 0, k, n), flush), acc);
            ASSERT_EQ(f32_bits(got[m * 601 + n]), f32_bits(acc)) << target << " M=" << M << " m=" << m << " n=" << n;
          }
      }
  });
}

TEST(HostGemv, NanAndInfPropagate) {
  const float inf = std::numeric_limits<float>::infinity();
  each_target([&](const char* target) {
    for (bool tb : {true, false}) {
      const int64_t M = 3, K = 19, N = 21;
      Problem p = make_problem(1, M, K, N, false, tb);
      auto set_b = [&](int64_t k, int64_t n, float v) { p.b[tb ? n * K + k : k * N + n] = v; };
      p.a[0 * K + 5] = std::numeric_limits<float>::quiet_NaN();  // row 0: all NaN
      p.a[1 * K + 18] = bits_f32(0x7F800001u);                     // row 1: a NaN that + 0x7FFF would make inf
      set_b(3, 4, inf);                                           // column 4: +-inf in rows 2
      set_b(4, 7, bits_f32(0x7F7FFFFFu));                         // max finite rounds up to inf
      set_b(6, 9, bits_f32(0xFFFFFFFFu));                         // a NaN that + 0x7FFF would wrap to -0
      std::vector<float> c = run_small(p, false);
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_TRUE(std::isnan(c[0 * N + n])) << target << " row 0 col " << n;
        EXPECT_TRUE(std::isnan(c[1 * N + n])) << target << " row 1 col " << n;
        float v = c[2 * N + n];
        if (n == 9) EXPECT_TRUE(std::isnan(v)) << target << " col 9";
        else if (n == 4 || n == 7) EXPECT_TRUE(std::isinf(v)) << target << " col " << n << " = " << v;
        else EXPECT_TRUE(std::isfinite(v)) << target << " col " << n;
      }
      // inf x 0 is NaN.
      Problem z = make_problem(1, 1, 5, 3, false, tb);
      for (float& x : z.a) x = 0.0f;
      z.b[0] = inf;
      EXPECT_TRUE(std::isnan(run_small(z, false)[0])) << target;
    }
  });
}

TEST(HostGemv, SubnormalsFlushOnlyWhenAsked) {
  each_target([](const char* target) {
    for (bool tb : {true, false}) {
      const int64_t M = 2, K = 40, N = 18;
      Problem p = make_problem(1, M, K, N, false, tb);
      for (float& x : p.a) x = 0.0f;
      for (float& x : p.b) x = 0.0f;
      p.a[0 * K + 3] = 1e-39f;                  // a bf16 subnormal after rounding
      p.a[1 * K + 4] = bits_f32(0x007FFFFFu);   // f32 subnormal that rounds up to the least normal
      for (int64_t n = 0; n < N; ++n) {
        p.b[tb ? n * K + 3 : 3 * N + n] = 0x1p100f;
        p.b[tb ? n * K + 4 : 4 * N + n] = 0x1p100f;
      }
      std::vector<float> keep = run_small(p, false), flush = run_small(p, true);
      for (int64_t n = 0; n < N; ++n) {
        EXPECT_EQ(keep[n], round_bf16(1e-39f) * 0x1p100f) << target;
        EXPECT_EQ(flush[n], 0.0f) << target;
        EXPECT_EQ(keep[N + n], 0x1p-126f * 0x1p100f) << target;
        EXPECT_EQ(flush[N + n], 0x1p-126f * 0x1p100f) << target;  // normal after rounding: kept
      }
    }
  });
}

TEST(HostGemv, RejectsManyRowsAndHandlesEmpty) {
  Problem p = make_problem(1, 17, 8, 8, false, true);
  std::vector<float> c(17 * 8, 7.0f);
  EXPECT_FALSE(gemm_small(p.s, SmallPrecision::Default, p.a.data(), p.b.data(), c.data(), false));
  EXPECT_EQ(c[0], 7.0f);  // untouched
  Problem e = make_problem(2, 3, 0, 5, false, false);
  std::vector<float> z(30, 7.0f);
  EXPECT_TRUE(gemm_small(e.s, SmallPrecision::Default, nullptr, nullptr, z.data(), false));
  for (float v : z) EXPECT_EQ(v, 0.0f);
}

// The numbers of the path this replaces (operands packed, then host::gemm: bf16 with subnormal
// flushing where the CPU has a native bf16 GEMM, f32 otherwise), up to summation order.
TEST(HostGemv, AgreesWithThePackedGemm) {
  const bool native = gemm_has_bf16();
  for (bool tb : {true, false}) {
    Problem p = make_problem(1, 8, 300, 130, false, tb);
    p.a[5] = 3e-39f;  // a subnormal: flushed exactly when the packed path flushes it
    std::vector<float> c(8 * 130);
    if (native) {
      std::vector<uint16_t> pa(p.a.size()), pb(p.b.size());
      for (size_t i = 0; i < pa.size(); ++i) pa[i] = f32_to_bf16(p.a[i]);
      for (size_t i = 0; i < pb.size(); ++i) pb[i] = f32_to_bf16(p.b[i]);
      gemm(p.s, GemmType::BF16, pa.data(), pb.data(), c.data());
    } else {
      std::vector<float> pa(p.a.size()), pb(p.b.size());
      for (size_t i = 0; i < pa.size(); ++i) pa[i] = round_bf16(p.a[i]);
      for (size_t i = 0; i < pb.size(); ++i) pb[i] = round_bf16(p.b[i]);
      gemm(p.s, GemmType::F32, pa.data(), pb.data(), c.data());
    }
    std::vector<float> got = run_small(p, native);
    std::vector<double> ref, mag;
    reference(p, native, ref, mag);
    for (size_t i = 0; i < c.size(); ++i)
      ASSERT_LE(std::fabs(got[i] - c[i]), 2 * (p.s.k + 1) * std::ldexp(mag[i], -24)) << i;
  }
}

}  // namespace
}  // namespace torch_tpu::host

namespace torch_tpu::host {
namespace {
// Micro-benchmark (disabled): tpu_cpp_tests --gtest_also_run_disabled_tests --gtest_filter='HostGemv.DISABLED_Bench'
TEST(HostGemv, DISABLED_Bench) {
  for (SmallPrecision sp : {SmallPrecision::Default, SmallPrecision::High})
    for (int64_t M : {1, 8, 16})
      for (bool tb : {true, false}) {
        Problem p = make_problem(1, M, 1024, 4096, false, tb);
        std::vector<float> c(M * 4096);
        double best = 1e30;
        for (int i = 0; i < 50; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          gemm_small(p.s, sp, p.a.data(), p.b.data(), c.data(), true);
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        double lib = 1e30;  // the f32 library GEMM on the same problem (HIGHEST's kernel)
        for (int i = 0; i < 50; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          gemm(p.s, GemmType::F32, p.a.data(), p.b.data(), c.data());
          lib = std::min(lib, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::printf("[gemv] %d M=%ld K=1024 N=4096 %s %.1f GFLOP/s (f32 library GEMM %.1f)\n", static_cast<int>(sp),
                    static_cast<long>(M), tb ? "[N,K]" : "[K,N]", 2.0 * M * 1024 * 4096 / best / 1e9,
                    2.0 * M * 1024 * 4096 / lib / 1e9);
      }
}
}  // namespace
}  // namespace torch_tpu::host
