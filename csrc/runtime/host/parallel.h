// parallel_for: the host runtime's own thread pool for large loops, a plain call for small
// ones (so small ops pay no hand-off). Work is split into contiguous chunks; kernels whose
// result could depend on the split (floating-point sums) split by a fixed block size instead.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace torch_tpu::host {

// Below this many elements (scaled by per-element cost) a loop runs on the calling thread.
// 128K, not PyTorch's 32K: chosen when a parallel region cost 20-40 us (OpenMP, see
// parallel.cpp); with the pool a hand-off costs ~1-3 us, but the tiles of smaller loops are
// too few to split evenly anyway.
constexpr int64_t kParallelGrain = 131072;

// Threads a loop may use now: OpenMP's maximum (OMP_NUM_THREADS, torch.set_num_threads), less
// one core while the calling thread is a stream worker and the user thread that feeds it is
// running (not waiting on the stream). On a 2-core machine the user's Python thread and a
// 2-thread loop would share 2 cores: a loop then waits for a thread the scheduler has not run
// yet (a 131K-element add took 40 us with 2 threads, 8 us with 1, while Python dispatched).
int loop_threads();

namespace pool {
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
// Runs fn(ctx, n*t/T, n*(t+1)/T) for t in [0, T) on the calling thread (t = 0) and T - 1
// pool threads; returns false (running nothing) when the pool is taken by another thread or
// has fewer threads. The first exception thrown by a chunk is rethrown here, after all ran.
bool run(int64_t n, int threads, ChunkFn fn, void* ctx);
// Whether this thread is running a chunk of a pool loop (nested loops run serially).
bool in_task();
}  // namespace pool

// Calls f(begin, end) on `threads` threads (fewer if the pool has fewer), thread t taking
// [n*t/T, n*(t+1)/T): on the pool, or an OpenMP team when another thread holds it.
template <class F>
void parallel_chunks(int64_t n, int threads, F&& f) {
  if (n <= 0) return;
  if (threads <= 1 || pool::in_task() || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  void* ctx = const_cast<void*>(static_cast<const void*>(std::addressof(f)));
  pool::ChunkFn call = [](void* c, int64_t b, int64_t e) { (*static_cast<Fn*>(c))(b, e); };
  if (pool::run(n, threads, call, ctx)) return;
  // The pool is busy (another thread's loop): an OpenMP team, as before the pool.
#pragma omp parallel num_threads(threads)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t b = n * t / nt, e = n * (t + 1) / nt;
    if (b < e) f(b, e);
  }
}

// Calls f(begin, end) over [0, n) in chunks of at least `grain` iterations, on up to
// `threads` threads.
template <class F>
void parallel_for_on(int threads, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (n <= grain || pool::in_task() || omp_in_parallel()) {
    f(int64_t{0}, n);
    return;
  }
  int64_t max_chunks = (n + grain - 1) / grain;
  parallel_chunks(n, static_cast<int>(std::min<int64_t>(threads, max_chunks)), f);
}

// parallel_for_on(loop_threads(), ...): the loops of elementwise ops, reductions, fused tiles
// (loop_threads() is asked only when the loop splits).
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  parallel_for_on(n > grain ? loop_threads() : 1, n, grain, f);
}

// parallel_for_on(all of OpenMP's threads, ...): products (gemm_split, gemm_small), whose work
// per call dwarfs a wait for a thread the scheduler has not run yet; with loop_threads() a
// decode-shaped product ran on one core whenever the user thread was still dispatching.
template <class F>
void parallel_for_all(int64_t n, int64_t grain, F&& f) {
  parallel_for_on(omp_get_max_threads(), n, grain, f);
}

}  // namespace torch_tpu::host
