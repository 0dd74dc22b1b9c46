// Eager modes: the global mode, the per-thread override, and the counted enqueue.
#include "exec/stream.h"

#include <atomic>
#include <cstdlib>
#include <memory>

#include <c10/util/ThreadLocalDebugInfo.h>

#include "runtime/runtime.h"

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

}  // namespace

Mode mode() {
  if (auto* info = c10::ThreadLocalDebugInfo::get(kModeKind)) return static_cast<Mode>(static_cast<ModeInfo*>(info)->mode);
  return static_cast<Mode>(g_mode.load(std::memory_order_relaxed));
}
void set_global_mode(Mode m) { g_mode = static_cast<int>(m); }
Mode global_mode() { return static_cast<Mode>(g_mode.load()); }
void push_thread_mode(Mode m) { c10::ThreadLocalDebugInfo::_push(kModeKind, std::make_shared<ModeInfo>(static_cast<int>(m))); }
void pop_thread_mode() { (void)c10::ThreadLocalDebugInfo::_pop(kModeKind); }

namespace {
// Inline only on the host runtime: a pjrt command hands work to the plugin, whose
// asynchrony the worker thread hides.
bool on_host_runtime() {
  static const bool host = &runtime::current() == &runtime::host_runtime();
  return host;
}
void count(Mode m) {
  (m == Mode::Debug ? n_debug : m == Mode::Fused ? n_fused : n_strict).fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

bool try_inline(int dev, const char* name, void (*fn)(void*), void* ctx, bool for_wait) {
  Mode m = mode();
  if ((m != Mode::Strict && !for_wait) || !on_host_runtime()) return false;
  if (!runtime::stream::try_run_inline(dev, name, fn, ctx)) return false;
  count(m);
  return true;
}

void run_for_wait(int dev, const char* name, std::function<void()> fn) {
  if (on_host_runtime()) runtime::stream::run_or_enqueue(dev, name, std::move(fn));
  else runtime::stream::enqueue(dev, name, std::move(fn));
}

void enqueue(int dev, const char* name, std::function<void()> fn, bool small) {
  Mode m = mode();
  if (small && m == Mode::Strict && on_host_runtime())
    runtime::stream::run_or_enqueue(dev, name, std::move(fn));
  else
    runtime::stream::enqueue(dev, name, std::move(fn));
  count(m);  // fused: one window (or an op issued while fused mode is on)
  if (m == Mode::Debug) runtime::stream::wait_at_call(dev, runtime::stream::queued(dev));
}

StreamCounters counters() { return {n_strict.load(), n_debug.load(), n_fused.load()}; }

}  // namespace torch_tpu::exec
