// Command stream implementation: a mutex-protected queue and one worker thread per device.
#include "exec/stream.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <c10/util/ThreadLocalDebugInfo.h>

#include "base/error.h"

namespace torch_tpu::exec {
namespace {

std::atomic<int> g_mode{[] {
  const char* b = std::getenv("TORCH_TPU_LAUNCH_BLOCKING");
  if (b && std::string(b) == "1") return static_cast<int>(Mode::Debug);
  const char* f = std::getenv("TORCH_TPU_DEFER_AND_FUSE");
  if (f && std::string(f) == "1") return static_cast<int>(Mode::Fused);
  return static_cast<int>(Mode::Strict);
}()};
// The thread's mode override lives in c10's ThreadLocalDebugInfo stack, which PyTorch copies
// into the threads that work for this one (the autograd engine's device threads run the
// backward of a tpu graph): `with eager_mode(...)` then also covers loss.backward().
inline constexpr std::string_view kModeKindName = "TORCH_TPU_EAGER_MODE";
inline const c10::DebugInfoKind kModeKind(&kModeKindName);
struct ModeInfo final : c10::DebugInfoBase {
  explicit ModeInfo(int m) : mode(m) {}
  int mode;
};
std::atomic<int64_t> n_strict{0}, n_debug{0}, n_fused{0};

struct Command {
  const char* name;
  std::function<void()> fn;
};

class Stream {
 public:
  Stream() : worker_([this] { loop(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  void push(const char* name, std::function<void()> fn) {
    bool wake;
    {
      std::lock_guard<std::mutex> lk(mu_);
      q_.push_back({name, std::move(fn)});
      ++enqueued_;
      wake = sleeping_;
      pending_.store(true, std::memory_order_relaxed);
    }
    if (wake) cv_.notify_one();  // a busy or spinning worker needs no syscall
  }

  uint64_t mark() {
    std::lock_guard<std::mutex> lk(mu_);
    return enqueued_;
  }
  bool done(uint64_t m) {
    std::lock_guard<std::mutex> lk(mu_);
    return completed_ >= m;
  }
  void wait(uint64_t m) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      done_cv_.wait(lk, [&] { return completed_ >= m; });
    }
    std::string e;
    bool ni;
    {
      std::lock_guard<std::mutex> g(err_mu_);
      if (error_.empty()) return;
      e = std::move(error_);
      error_.clear();
      ni = error_ni_;
      error_ni_ = false;
    }
    if (ni) throw NotImplemented(e);
    throw Error(e);
  }

 private:
  void loop() {
    std::deque<Command> batch;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      if (q_.empty() && !stop_) {
        // Spin briefly before sleeping: ops usually arrive microseconds apart, and a
        // futex wake per op costs more than the op.
        lk.unlock();
        for (int i = 0; i < 2000 && !pending_.load(std::memory_order_relaxed); ++i) __builtin_ia32_pause();
        lk.lock();
        if (q_.empty() && !stop_) {
          sleeping_ = true;
          cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
          sleeping_ = false;
        }
      }
      if (q_.empty() && stop_) return;
      batch.swap(q_);
      pending_.store(false, std::memory_order_relaxed);
      lk.unlock();
      int64_t ran = 0;
      for (Command& c : batch) {
        run_one(c);
        ++ran;
      }
      batch.clear();  // releases captured buffers on this thread
      lk.lock();
      completed_ += ran;
      done_cv_.notify_all();
    }
  }

  void run_one(Command& c) {
    bool skip;
    {
      std::lock_guard<std::mutex> g(err_mu_);
      skip = !error_.empty();  // after a failure, later commands are dropped until sync
    }
    if (skip) return;
    std::string err;
    bool ni = false;
    try {
      c.fn();
    } catch (const NotImplemented& e) {
      err = std::string("[") + c.name + "] " + e.what();
      ni = true;
    } catch (const std::exception& e) {
      err = std::string("[") + c.name + "] asynchronous op failed: " + e.what();
    }
    if (!err.empty()) {
      std::lock_guard<std::mutex> g(err_mu_);
      if (error_.empty()) {
        error_ = std::move(err);
        error_ni_ = ni;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Command> q_;
  uint64_t enqueued_ = 0, completed_ = 0;
  std::mutex err_mu_;  // guards error_ (taken inside and outside mu_)
  std::string error_;
  bool error_ni_ = false;
  bool stop_ = false;
  bool sleeping_ = false;
  std::atomic<bool> pending_{false};
  std::thread worker_;
};

constexpr int kMaxDevices = 16;
std::mutex g_streams_mu;
Stream* g_streams[kMaxDevices] = {};

Stream& stream(int dev) {
  TPU_CHECK(dev >= 0 && dev < kMaxDevices, "[stream] device index out of range; got ", dev);
  std::lock_guard<std::mutex> lk(g_streams_mu);
  // Leaked on purpose: worker threads must outlive static destruction order games.
  if (!g_streams[dev]) g_streams[dev] = new Stream();
  return *g_streams[dev];
}

}  // namespace

Mode mode() {
  if (auto* info = c10::ThreadLocalDebugInfo::get(kModeKind)) return static_cast<Mode>(static_cast<ModeInfo*>(info)->mode);
  return static_cast<Mode>(g_mode.load(std::memory_order_relaxed));
}
void set_global_mode(Mode m) { g_mode = static_cast<int>(m); }
Mode global_mode() { return static_cast<Mode>(g_mode.load()); }
void push_thread_mode(Mode m) { c10::ThreadLocalDebugInfo::_push(kModeKind, std::make_shared<ModeInfo>(static_cast<int>(m))); }
void pop_thread_mode() { (void)c10::ThreadLocalDebugInfo::_pop(kModeKind); }

void enqueue(int dev, const char* name, std::function<void()> fn) {
  Stream& s = stream(dev);
  Mode m = mode();
  s.push(name, std::move(fn));
  if (m == Mode::Debug) {
    ++n_debug;
    s.wait(s.mark());
  } else if (m == Mode::Fused) {
    ++n_fused;  // one fused window (or an op issued while fused mode is on)
  } else {
    ++n_strict;
  }
}

namespace {
std::atomic<FlushHook> g_flush_hook{nullptr};
}
void set_flush_hook(FlushHook hook) { g_flush_hook = hook; }
void flush_deferred(int dev) {
  if (FlushHook h = g_flush_hook.load()) h(dev);
}

void synchronize(int dev) {
  flush_deferred(dev);
  Stream& s = stream(dev);
  s.wait(s.mark());
}

void synchronize_all() {
  flush_deferred(-1);
  for (int d = 0; d < kMaxDevices; ++d) {
    Stream* s;
    {
      std::lock_guard<std::mutex> lk(g_streams_mu);
      s = g_streams[d];
    }
    if (s) s->wait(s->mark());
  }
}

uint64_t mark(int dev) {
  flush_deferred(dev);
  return stream(dev).mark();
}
bool done(int dev, uint64_t m) { return stream(dev).done(m); }
void wait(int dev, uint64_t m) { stream(dev).wait(m); }

StreamCounters counters() { return {n_strict.load(), n_debug.load(), n_fused.load()}; }

}  // namespace torch_tpu::exec
