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
thread_local int t_mode = -1;
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
    {
      std::lock_guard<std::mutex> lk(mu_);
      q_.push_back({name, std::move(fn)});
      ++enqueued_;
    }
    cv_.notify_one();
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
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return completed_ >= m; });
    if (!error_.empty()) {
      std::string e = std::move(error_);
      error_.clear();
      bool ni = error_ni_;
      error_ni_ = false;
      lk.unlock();
      if (ni) throw NotImplemented(e);
      throw Error(e);
    }
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
      if (q_.empty() && stop_) return;
      Command c = std::move(q_.front());
      q_.pop_front();
      bool skip = !error_.empty();  // after a failure, later commands are dropped until sync
      lk.unlock();
      std::string err;
      bool ni = false;
      if (!skip) {
        try {
          c.fn();
        } catch (const NotImplemented& e) {
          err = std::string("[") + c.name + "] " + e.what();
          ni = true;
        } catch (const std::exception& e) {
          err = std::string("[") + c.name + "] asynchronous op failed: " + e.what();
        }
      }
      c.fn = nullptr;  // release captured buffers on this thread
      lk.lock();
      if (!err.empty() && error_.empty()) {
        error_ = std::move(err);
        error_ni_ = ni;
      }
      ++completed_;
      done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Command> q_;
  uint64_t enqueued_ = 0, completed_ = 0;
  std::string error_;
  bool error_ni_ = false;
  bool stop_ = false;
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

Mode mode() { return static_cast<Mode>(t_mode >= 0 ? t_mode : g_mode.load(std::memory_order_relaxed)); }
void set_global_mode(Mode m) { g_mode = static_cast<int>(m); }
Mode global_mode() { return static_cast<Mode>(g_mode.load()); }
int set_thread_mode(int m) {
  int old = t_mode;
  t_mode = m;
  return old;
}

void enqueue(int dev, const char* name, std::function<void()> fn) {
  Stream& s = stream(dev);
  Mode m = mode();
  s.push(name, std::move(fn));
  if (m == Mode::Debug) {
    ++n_debug;
    s.wait(s.mark());
  } else if (m == Mode::Fused) {
    ++n_fused;
  } else {
    ++n_strict;
  }
}

void synchronize(int dev) {
  Stream& s = stream(dev);
  s.wait(s.mark());
}

void synchronize_all() {
  for (int d = 0; d < kMaxDevices; ++d) {
    Stream* s;
    {
      std::lock_guard<std::mutex> lk(g_streams_mu);
      s = g_streams[d];
    }
    if (s) s->wait(s->mark());
  }
}

uint64_t mark(int dev) { return stream(dev).mark(); }
bool done(int dev, uint64_t m) { return stream(dev).done(m); }
void wait(int dev, uint64_t m) { stream(dev).wait(m); }

StreamCounters counters() { return {n_strict.load(), n_debug.load(), n_fused.load()}; }

}  // namespace torch_tpu::exec
