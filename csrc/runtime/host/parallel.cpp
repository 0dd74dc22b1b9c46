// The host kernels' thread pool (docs/decisions/host-thread-pool.md).
//
// Why not OpenMP: libgomp lets a helper spin only ~100 iterations once the process has more
// OpenMP threads than cores, and a PyTorch process always does (the Python thread's team for
// CPU ops plus the stream worker's team). Every region then wakes its helper with a futex; on
// a 2-vCPU VM that costs 15-35 us per region (measured: a 32K-element loop 27 us with 2
// threads alone, 55 us once another team exists, 51 us serial). With ~150 large loops per
// compiled GPT step, two threads ran no faster than one.
//
// The pool: `cores - 1` helper threads. A loop publishes its job and bumps `epoch_`; helpers
// spin on it (pause, then sched_yield so a runnable thread on that core is not starved) for
// TORCH_TPU_POOL_SPIN_US after their last chunk (default 50), then sleep on the futex. The
// caller runs chunk 0 and spins until the helpers' chunks are done. One loop at a time: a
// caller that finds the pool taken gets `false` and uses OpenMP. Chunks are the same
// contiguous split as before, so no result depends on the pool.
#include "runtime/host/parallel.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TPU_CPU_RELAX() _mm_pause()
#else
#define TPU_CPU_RELAX() ((void)0)
#endif

namespace torch_tpu::host::pool {
namespace {

thread_local bool t_in_task = false;

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  return end && *end == 0 && x >= 0 ? x : dflt;
}

class Pool {
 public:
  explicit Pool(int helpers) : spin_ns_(env_int("TORCH_TPU_POOL_SPIN_US", 1000) * 1000) {
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this, i] { helper(i); });
  }
  // Never destroyed: helpers may sleep in the futex at exit (detached at construction end).
  void detach() {
    for (std::thread& t : threads_) t.detach();
  }
  int size() const { return static_cast<int>(threads_.size()) + 1; }

  bool run(int64_t n, int threads, ChunkFn fn, void* ctx) {
    if (busy_.exchange(true, std::memory_order_acquire)) return false;
    threads = std::min(threads, size());
    error_set_.store(false, std::memory_order_relaxed);
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    error_ = nullptr;
    pending_.store(threads - 1, std::memory_order_relaxed);
    uint32_t e = (epoch_.load(std::memory_order_relaxed) + 0x100u) & ~0xFFu;
    epoch_.store(e | static_cast<uint32_t>(threads), std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) futex(FUTEX_WAKE_PRIVATE, INT32_MAX);
    t_in_task = true;
    std::exception_ptr mine;
    try {
      int64_t b = 0, end = n / threads;
      if (b < end) fn(ctx, b, end);
    } catch (...) {
      mine = std::current_exception();
    }
    t_in_task = false;
    for (int spins = 0; pending_.load(std::memory_order_acquire) > 0; ++spins) {
      if (spins < 4096) TPU_CPU_RELAX();
      else sched_yield();
    }
    std::exception_ptr err = mine ? mine : error_;
    busy_.store(false, std::memory_order_release);
    if (err) std::rethrow_exception(err);
    return true;
  }

 private:
  void helper(int idx) {
    t_in_task = true;  // a chunk's own loops run serially
    uint32_t seen = 0;  // the initial epoch, not a load: a job may be posted before this runs
    for (;;) {
      uint32_t e = wait_past(seen);
      seen = e;
      int threads = static_cast<int>(e & 0xFFu);
      if (idx + 1 >= threads) continue;  // not in this job: never touches its fields
      int64_t t = idx + 1, n = n_;
      int64_t b = n * t / threads, end = n * (t + 1) / threads;
      try {
        if (b < end) fn_(ctx_, b, end);
      } catch (...) {
        bool expected = false;
        if (error_set_.compare_exchange_strong(expected, true)) error_ = std::current_exception();
      }
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  // The epoch word is the futex helpers sleep on (FUTEX_WAIT returns at once if it moved on).
  void futex(int op, uint32_t val) {
    static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&epoch_), op, val, nullptr, nullptr, 0);
  }

  uint32_t wait_past(uint32_t seen) {
    auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      uint32_t e = epoch_.load(std::memory_order_acquire);
      if (e != seen) return e;
      if (spins < 256) {
        TPU_CPU_RELAX();
        continue;
      }
      if (std::chrono::steady_clock::now() - start < std::chrono::nanoseconds(spin_ns_)) {
        sched_yield();
        continue;
      }
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (epoch_.load(std::memory_order_seq_cst) == seen) futex(FUTEX_WAIT_PRIVATE, seen);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      start = std::chrono::steady_clock::now();
      spins = 0;
    }
  }

  const int64_t spin_ns_;
  std::vector<std::thread> threads_;
  alignas(64) std::atomic<bool> busy_{false};
  alignas(64) std::atomic<uint32_t> epoch_{0};  // job counter << 8 | threads in the job
  std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<int> pending_{0};
  // The job: written by the caller before epoch_, read by its helpers after.
  ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0;
  std::atomic<bool> error_set_{false};
  std::exception_ptr error_;
};

std::atomic<Pool*> g_pool{nullptr};
std::atomic<bool> g_creating{false};

void forget_after_fork() {
  // The child has none of the helper threads: leak the parent's pool, build a new one on use.
  g_pool.store(nullptr);
  g_creating.store(false);
  t_in_task = false;
}

Pool* get() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p) return p;
  static const bool enabled = env_int("TORCH_TPU_POOL", 1) != 0;
  if (!enabled || g_creating.exchange(true)) return nullptr;  // another thread builds it
  static const bool registered = [] { return pthread_atfork(nullptr, nullptr, &forget_after_fork) == 0; }();
  (void)registered;
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : omp_get_num_procs();
  int helpers = std::clamp(std::max(cores, omp_get_max_threads()) - 1, 1, 63);
  p = new Pool(helpers);
  p->detach();
  g_pool.store(p, std::memory_order_release);
  return p;
}

}  // namespace

bool run(int64_t n, int threads, ChunkFn fn, void* ctx) {
  Pool* p = get();
  return p != nullptr && p->run(n, threads, fn, ctx);
}

bool in_task() { return t_in_task; }

}  // namespace torch_tpu::host::pool
