// Command stream implementation: a mutex-protected queue and one worker thread per device.
#include "runtime/stream.h"

#include <atomic>
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

struct Command {
  const char* name;
  std::function<void()> fn;
};

class Stream {
 public:
  Stream() : worker_([this] { loop(); }) {}

  void push(const char* name, std::function<void()> fn) {
    bool wake;
    {
      std::unique_lock<std::mutex> lk(mu_);
      // Backpressure: a user thread that runs ahead by kMaxQueued commands waits until the
      // worker is back within 3/4 of it (as CUDA's launch queue blocks), so host memory held
      // by queued commands stays bounded. A worker never waits (it may enqueue follow-ups).
      if (enqueued_ - completed_ >= max_queued() && !t_worker) {
        wake = sleeping_;
        if (wake) cv_.notify_one();
        done_cv_.wait(lk, [&] { return enqueued_ - completed_ < max_queued() * 3 / 4; });
      }
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
  void drain(uint64_t m) {
    TPU_CHECK(!t_worker, "[stream] a stream command waited on a stream; got a wait from a worker thread, "
              "expected waits only from user threads");
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return completed_ >= m; });
  }
  void wait(uint64_t m) {
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
    }
    if (Thrower t = g_thrower.load()) t(kind, e);
    if (kind == ErrorKind::NotImplemented) throw NotImplemented(e);
    if (kind == ErrorKind::Index) throw IndexError(e);
    throw Error(e);
  }

 private:
  void loop() {
    t_worker = true;
    std::deque<Command> batch;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      if (q_.empty()) {
        // Spin briefly before sleeping: ops usually arrive microseconds apart, and a
        // futex wake per op costs more than the op.
        lk.unlock();
        for (int i = 0; i < 2000 && !pending_.load(std::memory_order_relaxed); ++i) __builtin_ia32_pause();
        lk.lock();
        if (q_.empty()) {
          sleeping_ = true;
          cv_.wait(lk, [&] { return !q_.empty(); });
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
      for (Command& c : batch) {
        run_one(c);
        ++ran;
      }
      batch.clear();  // releases what the commands captured, on this thread
      lk.lock();
      completed_ += ran;
      done_cv_.notify_all();
    }
  }

  void run_one(Command& c) {
    bool skip;
    {
      std::lock_guard<std::mutex> g(err_mu_);
      skip = !error_.empty();  // after a failure, later commands are dropped until the wait
    }
    if (skip) return;
    std::string err;
    ErrorKind kind = ErrorKind::Runtime;
    // The message names the command once: a check's message already starts with "[op]".
    auto named = [&](const char* what, const char* middle) {
      std::string tag = std::string("[") + c.name + "]";
      return std::string(what).rfind(tag, 0) == 0 ? std::string(what) : tag + middle + what;
    };
    try {
      c.fn();
    } catch (const NotImplemented& e) {
      err = named(e.what(), " ");
      kind = ErrorKind::NotImplemented;
    } catch (const IndexError& e) {
      err = named(e.what(), " ");
      kind = ErrorKind::Index;
    } catch (const std::exception& e) {
      err = named(e.what(), " asynchronous op failed: ");
    }
    if (!err.empty()) {
      std::lock_guard<std::mutex> g(err_mu_);
      if (error_.empty()) {
        error_ = std::move(err);
        error_kind_ = kind;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Command> q_;
  uint64_t enqueued_ = 0, completed_ = 0;
  std::mutex err_mu_;  // guards error_ (taken inside and outside mu_)
  std::string error_;
  ErrorKind error_kind_ = ErrorKind::Runtime;
  bool sleeping_ = false;
  std::atomic<bool> pending_{false};
  std::thread worker_;
};

std::mutex g_streams_mu;
std::atomic<Stream*> g_streams[kMaxDevices] = {};

Stream& get(int dev) {
  TPU_CHECK(dev >= 0 && dev < kMaxDevices, "[stream] device index out of range; got ", dev, ", expected 0..",
            kMaxDevices - 1);
  if (Stream* s = g_streams[dev].load(std::memory_order_acquire)) return *s;
  std::lock_guard<std::mutex> lk(g_streams_mu);
  // Leaked on purpose: worker threads must outlive static destruction order games.
  if (!g_streams[dev].load()) g_streams[dev].store(new Stream(), std::memory_order_release);
  return *g_streams[dev].load();
}

std::atomic<FlushHook> g_flush_hook{nullptr};

}  // namespace

void set_thrower(Thrower t) { g_thrower.store(t); }

void enqueue(int dev, const char* name, std::function<void()> fn) { get(dev).push(name, std::move(fn)); }

void set_flush_hook(FlushHook hook) { g_flush_hook = hook; }
void flush_deferred(int dev) {
  if (FlushHook h = g_flush_hook.load()) h(dev);
}

uint64_t mark(int dev) {
  flush_deferred(dev);
  return get(dev).mark();
}
uint64_t queued(int dev) { return get(dev).mark(); }
bool done(int dev, uint64_t m) { return get(dev).done(m); }
void wait(int dev, uint64_t m) { get(dev).wait(m); }
void drain(int dev, uint64_t m) { get(dev).drain(m); }

void synchronize(int dev) {
  flush_deferred(dev);
  Stream& s = get(dev);
  s.wait(s.mark());
}

void synchronize_all() {
  flush_deferred(-1);
  for (int d = 0; d < kMaxDevices; ++d)
    if (Stream* s = g_streams[d].load(std::memory_order_acquire)) s->wait(s->mark());
}

bool on_worker() { return t_worker; }

}  // namespace torch_tpu::runtime::stream
