// The host thread pool behind parallel_for (csrc/runtime/host/parallel.cpp): every index runs
// once, chunks are the documented contiguous split, exceptions reach the caller, nested and
// concurrent loops run (serially / on OpenMP) instead of deadlocking, and GEMMs split across
// the pool equal the unsplit product.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/host/gemm.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

TEST(ParallelFor, EveryIndexOnceInContiguousChunks) {
  for (int64_t n : {1, 7, 4096, 300001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> chunks{0};
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      ASSERT_LT(b, e);
      chunks++;
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
    EXPECT_LE(chunks.load(), std::max(1, loop_threads()));
  }
}

TEST(ParallelFor, ManyLoopsInARow) {
  // Hand-offs back to back (the helpers spinning) and after a pause (asleep on the futex).
  std::vector<float> v(1 << 16, 1.0f);
  for (int round = 0; round < 2000; ++round) {
    parallel_for(static_cast<int64_t>(v.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) v[static_cast<size_t>(i)] += 1.0f;
    });
    if (round == 1000) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (float x : v) ASSERT_EQ(x, 2001.0f);
}

TEST(ParallelFor, ExceptionReachesTheCaller) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    std::atomic<int64_t> ran{0};
    EXPECT_THROW(parallel_for(1000, 1,
                              [&](int64_t b, int64_t e) {
                                ran += e - b;
                                if (e == 1000) throw std::runtime_error("last chunk");
                              }),
                 std::runtime_error);
    EXPECT_EQ(ran.load(), 1000);  // the other chunks ran to the end before the rethrow
  }
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(1000, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 1000);
}

TEST(ParallelFor, NestedLoopsRunSerially) {
  std::atomic<int64_t> sum{0};
  parallel_for(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(100, 1, [&](int64_t ib, int64_t ie) {
        EXPECT_TRUE(pool::in_task() || omp_in_parallel() || loop_threads() == 1);
        sum += ie - ib;
      });
  });
  EXPECT_EQ(sum.load(), 6400);
}

TEST(ParallelFor, ConcurrentCallersBothFinish) {
  // One caller holds the pool; the other falls back to an OpenMP team.
  std::vector<std::thread> ts;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 3; ++t)
    ts.emplace_back([&] {
      for (int r = 0; r < 300; ++r) {
        std::atomic<int64_t> s{0};
        parallel_for(10000, 1, [&](int64_t b, int64_t e) { s += e - b; });
        total += s.load();
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(total.load(), int64_t{3} * 300 * 10000);
}

// A GEMM large enough to be split across the pool (by batch, rows or columns) equals a plain
// f32 loop; transposed operands too.
TEST(ParallelFor, SplitGemmMatchesReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Case {
    int64_t batch, m, n, k;
    bool ta, tb;
  };
  for (Case c : {Case{1, 512, 256, 64, false, false}, Case{1, 512, 256, 64, true, true}, Case{4, 64, 128, 256, false, true},
                 Case{1, 40, 1024, 64, false, false}, Case{1, 40, 1024, 64, true, true}}) {
    std::vector<float> a(static_cast<size_t>(c.batch * c.m * c.k)), b(static_cast<size_t>(c.batch * c.k * c.n));
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    std::vector<float> out(static_cast<size_t>(c.batch * c.m * c.n));
    gemm({c.batch, c.m, c.n, c.k, c.ta, c.tb}, GemmType::F32, a.data(), b.data(), out.data());
    for (int64_t bi = 0; bi < c.batch; ++bi)
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double ref = 0;
          for (int64_t kk = 0; kk < c.k; ++kk) {
            float av = c.ta ? a[static_cast<size_t>(bi * c.m * c.k + kk * c.m + i)] : a[static_cast<size_t>(bi * c.m * c.k + i * c.k + kk)];
            float bv = c.tb ? b[static_cast<size_t>(bi * c.k * c.n + j * c.k + kk)] : b[static_cast<size_t>(bi * c.k * c.n + kk * c.n + j)];
            ref += static_cast<double>(av) * bv;
          }
          ASSERT_NEAR(out[static_cast<size_t>((bi * c.m + i) * c.n + j)], ref, 1e-3)
              << "case " << c.batch << "x" << c.m << "x" << c.n << "x" << c.k << " at " << bi << "," << i << "," << j;
        }
  }
}

}  // namespace
}  // namespace torch_tpu::host
