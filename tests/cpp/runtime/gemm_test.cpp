// host::gemm's f32 kernels (gemm.cpp): oneDNN's matmul primitive and oneDNN's sgemm, each on
// every operand layout against a double reference; the per-shape choice between them (timed
// on first use) gives the same bits on every later call; a product large enough for the
// OpenMP team path, and the split path, agree with the reference.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/host/gemm.h"

namespace torch_tpu::host {
namespace {

struct Problem {
  GemmShape s;
  std::vector<float> a, b;
};

Problem make(int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Problem p{{batch, m, n, k, ta, tb}, std::vector<float>(static_cast<size_t>(batch * m * k)),
            std::vector<float>(static_cast<size_t>(batch * k * n))};
  for (float& x : p.a) x = u(rng);
  for (float& x : p.b) x = u(rng);
  return p;
}

// Max |C - C64| over the problem, against sum |a||b| as the scale.
void expect_matches(const Problem& p, const std::vector<float>& c, const char* what) {
  const GemmShape& s = p.s;
  for (int64_t bi = 0; bi < s.batch; ++bi)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t kk = 0; kk < s.k; ++kk) {
          double av = s.trans_a ? p.a[static_cast<size_t>(bi * s.m * s.k + kk * s.m + i)]
                                : p.a[static_cast<size_t>(bi * s.m * s.k + i * s.k + kk)];
          double bv = s.trans_b ? p.b[static_cast<size_t>(bi * s.k * s.n + j * s.k + kk)]
                                : p.b[static_cast<size_t>(bi * s.k * s.n + kk * s.n + j)];
          ref += av * bv, mag += std::fabs(av * bv);
        }
        float got = c[static_cast<size_t>((bi * s.m + i) * s.n + j)];
        ASSERT_LE(std::fabs(got - ref), 1e-5 * mag + 1e-30)
            << what << " " << s.batch << "x" << s.m << "x" << s.n << "x" << s.k << " ta " << s.trans_a << " tb "
            << s.trans_b << " at " << bi << "," << i << "," << j << ": got " << got << ", expected " << ref;
      }
}

TEST(HostGemm, EachF32KernelOnEveryLayout) {
  unsigned seed = 1;
  for (auto k : {GemmKernel::Matmul, GemmKernel::Sgemm, GemmKernel::Auto})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [batch, m, n, kk] : {std::array<int64_t, 4>{1, 37, 29, 65}, {3, 16, 48, 33}, {1, 1, 70, 40},
                                       {2, 70, 1, 19}, {1, 130, 90, 200}}) {
          Problem p = make(batch, m, n, kk, ta, tb, seed++);
          // The result is overwritten, never read: NaN in it must not leak into the sums.
          std::vector<float> c(static_cast<size_t>(batch * m * n), std::numeric_limits<float>::quiet_NaN());
          gemm_f32_with(p.s, k, p.a.data(), p.b.data(), c.data());
          expect_matches(p, c, k == GemmKernel::Matmul ? "matmul" : k == GemmKernel::Sgemm ? "sgemm" : "auto");
        }
}

// TORCH_TPU_GEMM=tune: the first call of a shape times both kernels and keeps the faster;
// every call, the first included, gives the bits of the kernel kept. And gemm's own calls of a
// shape give the same bits every time.
TEST(HostGemm, ChoiceIsStableFromTheFirstCall) {
  for (auto [m, n, kk, ta] : {std::array<int64_t, 4>{96, 160, 72, 0}, {200, 64, 128, 1}, {41, 300, 50, 0}}) {
    Problem p = make(1, m, n, kk, ta != 0, false, 7);
    std::vector<float> first(static_cast<size_t>(m * n)), later(first.size());
    gemm_f32_with(p.s, GemmKernel::Tune, p.a.data(), p.b.data(), first.data());
    expect_matches(p, first, "tuned");
    for (int r = 0; r < 3; ++r) {
      gemm_f32_with(p.s, GemmKernel::Auto, p.a.data(), p.b.data(), later.data());
      ASSERT_EQ(std::memcmp(first.data(), later.data(), first.size() * sizeof(float)), 0) << "call " << r + 2;
    }
    Problem q = make(1, m + 1, n, kk, ta != 0, true, 8);
    std::vector<float> g1(static_cast<size_t>((m + 1) * n)), g2(g1.size());
    gemm(q.s, GemmType::F32, q.a.data(), q.b.data(), g1.data());
    gemm(q.s, GemmType::F32, q.a.data(), q.b.data(), g2.data());
    expect_matches(q, g1, "gemm");
    ASSERT_EQ(std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)), 0);
  }
}

// 512 x 512 x 512 (2^27 multiply-adds: one call on the OpenMP team), and products split across
// the pool by rows and by columns, transposed operands included.
TEST(HostGemm, LargeProductsMatchReference) {
  for (auto [m, n, kk, t] : {std::array<int64_t, 4>{512, 512, 512, 0}, {512, 512, 512, 3}, {300, 200, 96, 1},
                             {40, 2048, 64, 2}}) {
    Problem p = make(1, m, n, kk, t & 1, t & 2, 11);
    std::vector<float> c(static_cast<size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
    gemm(p.s, GemmType::F32, p.a.data(), p.b.data(), c.data());
    expect_matches(p, c, "gemm");
  }
}

}  // namespace
}  // namespace torch_tpu::host
