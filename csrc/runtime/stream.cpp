// Command stream implementation: a mutex-protected queue and one worker thread per device.
#include "runtime/stream.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/error.h"

namespace torch_tpu::runtime::stream {
namespace {

thread_local bool t_worker = false;
// The stream whose worker this thread is (null on user threads).
thread_local const std::atomic<int>* t_waiters = nullptr;
std::atomic<Thrower> g_thrower{nullptr};

constexpr size_t kBatch = 64;
// Commands a user thread may queue ahead of the worker (env TORCH_TPU_MAX_QUEUED_OPS).
uint64_t max_queued() {
  static const uint64_t n = [] {
    const char* s = std::getenv("TORCH_TPU_MAX_QUEUED_OPS");
    long v = s && *s ? std::atol(s) : 0;
    return v >= 4 ? static_cast<uint64_t>(v) : uint64_t{1024};
  }();
  return n;
}

std::atomic<const Observer*> g_observer{nullptr};

// Pause iterations an idle worker spins before sleeping. Spinning saves a futex wake per op
// when the producer has a core of its own; on a machine with 2 cores or fewer (counted from
// the affinity mask, which containers restrict) the spinning worker takes the core the
// producing Python thread needs, so it sleeps at once.
int spin_iterations() {
  static const int n = [] {
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                             : static_cast<int>(std::thread::hardware_concurrency());
    return cores > 2 ? 2000 : 0;
  }();
  return n;
}

// A cheap monotonic tick: the timestamp counter on x86-64 (constant-rate on the CPUs we run
// on; Stream::busy_ns converts it against steady_clock), else steady_clock's nanoseconds.
inline uint64_t ticks() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

int64_t epoch_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Command {
  const char* name;
  std::function<void()> fn;
  const Observer* observer;  // set when a profiler watched the enqueue
  uint64_t tag;
};

class Stream {
 public:
  explicit Stream(int dev) : dev_(dev), worker_([this] { loop(); }) {}

  void push(const char* name, std::function<void()> fn) {
    const Observer* obs = g_observer.load(std::memory_order_acquire);
    uint64_t tag = obs ? obs->on_enqueue(dev_, name) : 0;
    std::unique_lock<std::mutex> lk(mu_);
    push_locked(lk, name, std::move(fn), obs, tag);
  }

  // Runs `f` on the calling thread as the stream's next command when the stream is idle (see
  // run_or_enqueue) and returns true; false (nothing run, nothing queued) otherwise.
  // Lock-free in the usual case (no waiter, nothing queued meanwhile): the claim is a CAS of
  // inline_ and one of enqueued_ from completed_ (so no command can take a position before
  // this one while it runs first); waiters and a worker sleeping on queued commands are woken
  // under mu_, found through waiters_ and pending_ (seq_cst on both sides, so either this
  // thread sees them or they see inline_ cleared / completed_ advanced).
  template <class F>
  bool try_run(const char* name, F&& f) {
    // A command running (on the worker or inline) that queues a follow-up queues it.
    if (t_worker) return false;
    bool idle = false;
    if (!inline_.compare_exchange_strong(idle, true)) return false;
    uint64_t c = completed_.load();
    uint64_t e = c;
    if (!enqueued_.compare_exchange_strong(e, c + 1)) {  // commands queued or running
      end_inline();
      return false;
    }
    const Observer* obs = g_observer.load(std::memory_order_acquire);
    uint64_t tag = obs ? obs->on_enqueue(dev_, name) : 0;
    t_worker = true;  // the command must not wait on a stream, as on the worker
    uint64_t t0 = ticks();
    run_one(name, f, obs, tag);
    // Only the inline runner (one at a time, by the claim above) writes busy_ticks_.
    busy_ticks_.store(busy_ticks_.load(std::memory_order_relaxed) + (ticks() - t0), std::memory_order_relaxed);
    t_worker = false;
    completed_.fetch_add(1);
    if (waiters_.load() > 0) {
      std::lock_guard<std::mutex> lk(mu_);
      done_cv_.notify_all();
    }
    end_inline();
    return true;
  }

  // Clears inline_; wakes a sleeping worker when commands were queued meanwhile (push_locked
  // left that to the inline runner).
  void end_inline() {
    inline_.store(false);
    if (!pending_.load()) return;
    bool wake;
    {
      std::lock_guard<std::mutex> lk(mu_);
      wake = sleeping_ && !q_.empty();
    }
    if (wake) cv_.notify_one();
  }

  void push_or_run(const char* name, std::function<void()> fn) {
    if (try_run(name, fn)) {
      fn = nullptr;  // releases what the command captured, outside the lock
      return;
    }
    push(name, std::move(fn));
  }

  void push_locked(std::unique_lock<std::mutex>& lk, const char* name, std::function<void()> fn,
                   const Observer* obs, uint64_t tag) {
    // Backpressure: a user thread that runs ahead by kMaxQueued commands waits until the
    // worker is back within 3/4 of it (as CUDA's launch queue blocks), so host memory held
    // by queued commands stays bounded. A worker never waits (it may enqueue follow-ups).
    if (enqueued_ - completed_ >= max_queued() && !t_worker) {
      if (sleeping_) cv_.notify_one();
      wait_done(lk, [&] { return enqueued_ - completed_ < max_queued() * 3 / 4; });
    }
    q_.push_back({name, std::move(fn), obs, tag});
    enqueued_.fetch_add(1);
    pending_.store(true);
    bool wake = sleeping_ && !inline_.load();  // an inline runner wakes the worker when it is done
    lk.unlock();
    if (wake) cv_.notify_one();  // a busy or spinning worker needs no syscall
  }

  // Lock-free reads: the counters only grow, under mu_ (a free in the allocator asks for the
  // position once per tensor).
  uint64_t mark() { return enqueued_.load(std::memory_order_acquire); }
  bool done(uint64_t m) { return completed_.load(std::memory_order_acquire) >= m; }
  void drain(uint64_t m) {
    TPU_CHECK(!t_worker, "[stream] a stream command waited on a stream; got a wait from a worker thread, "
              "expected waits only from user threads");
    std::unique_lock<std::mutex> lk(mu_);
    wait_done(lk, [&] { return completed_ >= m; });
  }
  // done_cv_.wait, counted in waiters_ (an inline runner notifies only when there are some).
  template <class P>
  void wait_done(std::unique_lock<std::mutex>& lk, P pred) {
    waiters_.fetch_add(1);
    done_cv_.wait(lk, pred);
    waiters_.fetch_sub(1);
  }
  // The worker's time plus the inline runs' ticks, converted at the rate the ticks advanced
  // against steady_clock since the stream started.
  int64_t busy_ns() const {
    int64_t ns = busy_ns_.load(std::memory_order_relaxed);
    uint64_t bt = busy_ticks_.load(std::memory_order_relaxed);
    if (bt == 0) return ns;
    uint64_t dt = ticks() - start_ticks_;
    int64_t dns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
    if (dt == 0 || dns <= 0) return ns;
    return ns + static_cast<int64_t>(static_cast<double>(bt) * static_cast<double>(dns) / static_cast<double>(dt));
  }

  void wait(uint64_t m, bool at_call) {
    drain(m);
    std::string e;
    ErrorKind kind;
    {
      std::lock_guard<std::mutex> g(err_mu_);
      if (error_.empty()) return;
      e = std::move(error_);
      error_.clear();
      kind = error_kind_;
      error_kind_ = ErrorKind::Runtime;
      if (later_errors_ > 0) e += " (and " + std::to_string(later_errors_) + " later asynchronous error(s))";
      later_errors_ = 0;
    }
    if (!at_call)
      e += ". Raised at a sync point: tpu ops run asynchronously, so the Python stack is not the "
           "issuing call's; TORCH_TPU_LAUNCH_BLOCKING=1 raises it at the call";
    if (Thrower t = g_thrower.load()) t(kind, e);
    if (kind == ErrorKind::NotImplemented) throw NotImplemented(e);
    if (kind == ErrorKind::Index) throw IndexError(e);
    throw Error(e);
  }

 private:
  void loop() {
    t_worker = true;
    t_waiters = &waiters_;
    std::deque<Command> batch;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      if (q_.empty() || inline_) {
        // Spin briefly before sleeping (where cores allow): ops usually arrive microseconds
        // apart, and a futex wake per op costs more than the op.
        lk.unlock();
        const int spins = spin_iterations();
        for (int i = 0; i < spins && !pending_.load(std::memory_order_relaxed); ++i) __builtin_ia32_pause();
        lk.lock();
        if (q_.empty() || inline_) {
          // Commands queued while a user thread runs one inline wait for it: one at a time.
          sleeping_ = true;
          cv_.wait(lk, [&] { return !q_.empty() && !inline_; });
          sleeping_ = false;
        }
      }
      // At most kBatch commands at a time, so completed_ (and waiting producers) advance
      // while a long queue runs.
      if (q_.size() <= kBatch) {
        batch.swap(q_);
      } else {
        for (size_t i = 0; i < kBatch; ++i) {
          batch.push_back(std::move(q_.front()));
          q_.pop_front();
        }
      }
      pending_.store(!q_.empty(), std::memory_order_relaxed);
      lk.unlock();
      int64_t ran = 0;
      auto t0 = std::chrono::steady_clock::now();
      for (Command& c : batch) {
        run_one(c.name, c.fn, c.observer, c.tag);
        ++ran;
      }
      busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
                             .count(),
                         std::memory_order_relaxed);
      batch.clear();  // releases what the commands captured, on this thread
      lk.lock();
      completed_.fetch_add(ran, std::memory_order_release);
      done_cv_.notify_all();
    }
  }

  // A failed command leaves its outputs unspecified; the commands after it still run (those
  // that do not read those outputs compute correct values), and the first error waits for
  // the next wait(). Dropping them would silently leave later tensors unwritten.
  template <class F>
  void run_one(const char* name, F& fn, const Observer* observer, uint64_t tag) {
    std::string err;
    ErrorKind kind = ErrorKind::Runtime;
    // The message names the command once: a check's message already starts with "[op]".
    auto named = [&](const char* what, const char* middle) {
      std::string t = std::string("[") + name + "]";
      return std::string(what).rfind(t, 0) == 0 ? std::string(what) : t + middle + what;
    };
    int64_t start = observer ? epoch_ns() : 0;
    try {
      fn();
    } catch (const NotImplemented& e) {
      err = named(e.what(), " ");
      kind = ErrorKind::NotImplemented;
    } catch (const IndexError& e) {
      err = named(e.what(), " ");
      kind = ErrorKind::Index;
    } catch (const std::exception& e) {
      err = named(e.what(), " asynchronous op failed: ");
    } catch (...) {
      err = named("unknown exception", " asynchronous op failed: ");
    }
    if (observer) observer->on_run(dev_, name, tag, start, epoch_ns());
    if (!err.empty()) {
      std::lock_guard<std::mutex> g(err_mu_);
      if (error_.empty()) {
        error_ = std::move(err);
        error_kind_ = kind;
      } else {
        ++later_errors_;
      }
    }
  }

  const int dev_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Command> q_;
  std::atomic<uint64_t> enqueued_{0}, completed_{0};  // written under mu_, or by the inline runner's CAS
  std::mutex err_mu_;  // guards error_ (taken inside and outside mu_)
  std::string error_;
  ErrorKind error_kind_ = ErrorKind::Runtime;
  int64_t later_errors_ = 0;  // failures after the first one, before the wait that reports it
  bool sleeping_ = false;
  std::atomic<bool> inline_{false};  // a user thread is running a command (run_or_enqueue)
  std::atomic<bool> pending_{false};  // q_ is not empty (written under mu_)
  std::atomic<int> waiters_{0};       // threads in wait_done

  std::atomic<int64_t> busy_ns_{0};  // time the worker spent running commands
  // Time inline runs spent, in ticks(): two clock reads per small op cost more than the
  // timestamp counter's.
  std::atomic<uint64_t> busy_ticks_{0};
  const uint64_t start_ticks_ = ticks();
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::thread worker_;  // last: started once every other member is constructed
};

std::mutex g_streams_mu;
std::atomic<Stream*> g_streams[kMaxDevices] = {};

// Set in a forked child when the parent had started streams: their workers are gone.
std::atomic<bool> g_bad_fork{false};

void after_fork_in_child() {
  for (auto& s : g_streams)
    if (s.load(std::memory_order_relaxed)) g_bad_fork.store(true);
}
[[maybe_unused]] const int g_atfork = pthread_atfork(nullptr, nullptr, &after_fork_in_child);

void check_fork() {
  TPU_CHECK(!g_bad_fork.load(std::memory_order_relaxed),
            "[tpu] cannot use tpu in a forked subprocess: the parent process had started its tpu "
            "command streams, whose threads a fork does not copy. To use tpu with multiprocessing "
            "(DataLoader workers included), use the 'spawn' or 'forkserver' start method, or create "
            "tpu tensors only in the parent");
}

Stream& get(int dev) {
  check_fork();
  TPU_CHECK(dev >= 0 && dev < kMaxDevices, "[stream] device index out of range; got ", dev, ", expected 0..",
            kMaxDevices - 1);
  if (Stream* s = g_streams[dev].load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lk(g_streams_mu);
  // Leaked on purpose: worker threads must outlive static destruction order games.
  if (!g_streams[dev].load()) g_streams[dev].store(new Stream(dev), std::memory_order_release);
  return *g_streams[dev].load();
}

std::atomic<FlushHook> g_flush_hook{nullptr};

}  // namespace

void set_thrower(Thrower t) { g_thrower.store(t); }

void enqueue(int dev, const char* name, std::function<void()> fn) { get(dev).push(name, std::move(fn)); }
void run_or_enqueue(int dev, const char* name, std::function<void()> fn) {
  get(dev).push_or_run(name, std::move(fn));
}
bool try_run_inline(int dev, const char* name, void (*fn)(void*), void* ctx) {
  return get(dev).try_run(name, [fn, ctx] { fn(ctx); });
}

void set_flush_hook(FlushHook hook) { g_flush_hook = hook; }
void flush_deferred(int dev) {
  if (FlushHook h = g_flush_hook.load()) h(dev);
}

uint64_t mark(int dev) {
  check_fork();
  flush_deferred(dev);
  return get(dev).mark();
}
uint64_t queued(int dev) { return g_bad_fork ? 0 : get(dev).mark(); }
bool done(int dev, uint64_t m) { return g_bad_fork || get(dev).done(m); }
void wait(int dev, uint64_t m) { get(dev).wait(m, /*at_call=*/false); }
void wait_at_call(int dev, uint64_t m) { get(dev).wait(m, /*at_call=*/true); }
void drain(int dev, uint64_t m) {
  if (!g_bad_fork) get(dev).drain(m);
}

void synchronize(int dev) {
  check_fork();
  flush_deferred(dev);
  Stream& s = get(dev);
  s.wait(s.mark(), false);
}

void synchronize_all() {
  check_fork();
  flush_deferred(-1);
  for (int d = 0; d < kMaxDevices; ++d)
    if (Stream* s = g_streams[d].load(std::memory_order_acquire)) s->wait(s->mark(), false);
}

bool on_worker() { return t_worker; }

bool worker_beside_running_user() { return t_waiters && t_waiters->load(std::memory_order_relaxed) == 0; }

bool in_bad_fork() { return g_bad_fork.load(); }

int64_t busy_ns(int dev) {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  Stream* s = g_streams[dev].load(std::memory_order_acquire);
  return s ? s->busy_ns() : 0;
}

void set_observer(const Observer* observer) { g_observer.store(observer, std::memory_order_release); }

}  // namespace torch_tpu::runtime::stream
