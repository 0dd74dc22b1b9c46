// Internals shared by the fused window (window.cpp) and torch.compile capture (capture.cpp):
// the per-device window state and its flush. Not for other users.
#pragma once
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/views.h"
#include "exec/window.h"
#include "runtime/stream.h"

namespace torch_tpu::exec::detail {

constexpr int kMaxDevices = runtime::stream::kMaxDevices;

struct Tracked {
  c10::weak_intrusive_ptr<c10::StorageImpl> weak{c10::intrusive_ptr<c10::StorageImpl>()};
  Meta meta;
  ir::Value v;
  int64_t seq = 0;  // recording order: outputs are listed in it, so equal windows hash equal
};

// A value the window reads: a tpu or CPU view, a scalar, or a Philox state.
struct Param {
  at::Tensor tensor;   // keeps the storage alive (tpu or cpu)
  Meta meta;           // the view read, as recorded
  uint64_t bits = 0;   // scalar
  ir::DType dtype;
  bool scalar = false;
  uint64_t rng_n = 0;  // Philox state: counters reserved (re-reserved when a program replays)
  std::optional<at::Generator> gen;
};

struct Window {
  std::mutex mu;
  ir::Graph g;
  std::vector<Param> params;
  std::unordered_map<c10::StorageImpl*, Tracked> tracked;
  std::unordered_map<c10::StorageImpl*, std::vector<std::pair<Meta, ir::Value>>> reads;
  std::atomic<int64_t> ops{0};  // written under mu; has_pending() reads it without the lock
  int64_t seq = 0;
  std::vector<at::Tensor> check_flags;  // tested after the window runs
  std::vector<std::string> check_msgs;
  bool capturing = false;
  std::string broken;  // why the capture cannot be replayed ("" = fine)
};

Window& window(int dev);
inline c10::StorageImpl* storage_key(const at::Tensor& t) { return t.storage().unsafeGetStorageImpl(); }
inline bool live(const Tracked& t) { return !t.weak.expired(); }
// The tracked values in recording order (equal windows list outputs equally, so hash equal).
std::vector<Tracked*> in_order(Window& w);
void reset(Window& w);
// Compiles and queues the window's live values (caller holds w.mu); a no-op when empty.
void flush_locked(Window& w, int dev, const std::string& reason, bool for_wait = false);

// Counts the shape signatures of windows with the same program structure and warns once past
// TORCH_TPU_RECOMPILE_WARN (window_shapes.cpp). `hash` is the graph's full structural hash.
void note_window_shapes(const ir::Graph& g, uint64_t hash);

}  // namespace torch_tpu::exec::detail
