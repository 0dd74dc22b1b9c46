// parallel_for: OpenMP for large loops, a plain call for small ones (so small ops pay no
// thread start-up). Work is split into contiguous chunks; kernels whose result could
// depend on the split (floating-point sums) split by a fixed block size instead.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace torch_tpu::host {

// Below this many elements (scaled by per-element cost) a loop runs on the calling thread.
// 128K, not PyTorch's 32K: an OpenMP region costs ~20-40 us here (2 vCPUs; libgomp throttles
// its spin-wait once the process has more OpenMP threads than cores, so each region wakes
// its helper with a futex); the compiled GPT step ran 32.5 ms with 32K, 29 ms with 128K.
constexpr int64_t kParallelGrain = 131072;

// Threads a loop may use now: OpenMP's maximum, less one core while the calling thread is a
// stream worker and the user thread that feeds it is running (not waiting on the stream).
// On a 2-core machine the user's Python thread and a 2-thread team would share 2 cores: a
// region then waits for a thread the scheduler has not run yet (a 131K-element add took
// 40 us with 2 threads, 8 us with 1, while Python dispatched the next ops).
int loop_threads();

// Calls f(begin, end) over [0, n) in chunks of at least `grain` iterations.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n <= grain || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
  int64_t max_chunks = (n + grain - 1) / grain;
  int threads = static_cast<int>(std::min<int64_t>(loop_threads(), max_chunks));
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
