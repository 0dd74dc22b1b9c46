// parallel_for: OpenMP for large loops, a plain call for small ones (so small ops pay no
// thread start-up). Work is split into contiguous chunks; kernels whose result could
// depend on the split (floating-point sums) split by a fixed block size instead.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace torch_tpu::host {

// Below this many elements (scaled by per-element cost) a loop runs on the calling thread.
constexpr int64_t kParallelGrain = 32768;

// Calls f(begin, end) over [0, n) in chunks of at least `grain` iterations.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n <= grain || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
  int64_t max_chunks = (n + grain - 1) / grain;
  int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), max_chunks));
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t b = n * t / nt, e = n * (t + 1) / nt;
    if (b < e) f(b, e);
  }
}

}  // namespace torch_tpu::host
