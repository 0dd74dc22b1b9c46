// Deferred window: recording (inlining each op's graph), view/alias tracking, flushing.
#include "exec/window.h"

#include <c10/core/impl/COW.h>

#include <algorithm>

#include "base/config.h"
#include "base/error.h"
#include "device/device.h"
#include "exec/launch.h"
#include "exec/stream.h"
#include "exec/window_internal.h"

namespace torch_tpu::exec {
namespace detail {

Window g_windows[kMaxDevices];
std::mutex g_stats_mu;
WindowStats g_stats;

Window& window(int dev) { return g_windows[dev]; }

std::vector<Tracked*> in_order(Window& w) {
  std::vector<Tracked*> order;
  order.reserve(w.tracked.size());
  for (auto& [key, t] : w.tracked) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const Tracked* a, const Tracked* b) { return a->seq < b->seq; });
  return order;
}

void reset(Window& w) {
  w.check_flags.clear();
  w.check_msgs.clear();
  w.g = ir::Graph();
  w.params.clear();
  w.tracked.clear();
  w.reads.clear();
  w.ops = 0;
  w.seq = 0;
}

void flush_locked(Window& w, int dev, const std::string& reason, bool for_wait) {
  if (w.ops == 0) return;
  if (w.capturing && w.broken.empty()) w.broken = "a sync point inside the graph (" + reason + ")";
  std::vector<ir::Value> outs;
  std::vector<std::pair<c10::Storage, const Meta*>> dsts;
  int64_t skipped = 0;
  for (Tracked* tp : in_order(w)) {
    c10::intrusive_ptr<c10::StorageImpl> strong = tp->weak.lock();
    if (!strong) {
      ++skipped;  // no tensor owns it any more: never written to memory
      continue;
    }
    outs.push_back(tp->v);
    dsts.emplace_back(c10::Storage(std::move(strong)), &tp->meta);
  }
  {
    std::lock_guard<std::mutex> lk(g_stats_mu);
    ++g_stats.flushes;
    g_stats.skipped_outputs += skipped;
    g_stats.last_flush_reason = reason;
  }
  std::vector<at::Tensor> flags = std::move(w.check_flags);
  std::vector<std::string> msgs = std::move(w.check_msgs);
  if (outs.empty()) {
    reset(w);
    return;
  }
  w.g.set_outputs(outs);
  const uint64_t hash = w.g.hash();
  note_window_shapes(w.g, hash);
  std::shared_ptr<runtime::Executable> exe;
  try {
    exe = compiled(hash, w.g, "fused_window");
  } catch (const std::exception& e) {
    reset(w);
    TORCH_CHECK(false, "[fused window] compiling the deferred graph failed: ", e.what());
  }
  Launch l("fused_window", std::move(exe));
  for (const Param& pr : w.params) {
    if (pr.scalar) l.scalar(pr.bits, pr.dtype);
    else l.read(pr.tensor.storage(), pr.meta);
  }
  for (const auto& [st, m] : dsts) l.write(st, *m);
  l.submit(dev, for_wait);
  reset(w);
  submit_checks(dev, "range check", flags, std::move(msgs));
}

}  // namespace detail

using namespace detail;

namespace {

bool needs_flush(Window& w, const OpRecord& r) {
  if (w.ops == 0) return false;
  for (const auto& b : r.binds) {
    if (!b.tensor.defined() || !b.tensor.is_privateuseone()) continue;
    auto it = w.tracked.find(storage_key(b.tensor));
    if (it == w.tracked.end() || !live(it->second)) continue;
    Meta m = meta_of(b.tensor, b.dtype);
    if (!(m == it->second.meta) && !derive(w.g, it->second.v, it->second.meta, m).valid()) return true;
  }
  const auto& outs = r.graph->outputs();
  for (size_t k = 0; k < r.dsts.size(); ++k) {
    auto it = w.tracked.find(storage_key(r.dsts[k]));
    if (it == w.tracked.end() || !live(it->second)) continue;
    if (!(meta_of(r.dsts[k], r.graph->dtype(outs[k])) == it->second.meta)) return true;  // partial update
  }
  return false;
}

// A tpu storage over memory that another storage owns (at::from_blob on a tpu pointer, as
// PyTorch's storage file I/O of legacy torch.save / torch.load does). The window tracks
// storages, not memory, so it cannot see that the two alias, and a write into a borrowing
// storage that dies before the flush would never be written: such ops run unfused.
bool borrowed(const at::Tensor& t) {
  if (!t.defined() || !t.is_privateuseone()) return false;
  const c10::DataPtr& p = t.storage().data_ptr();
  if (p.get() == nullptr) return false;
  return p.get_deleter() != device::allocator()->raw_deleter() && !c10::impl::cow::is_cow_data_ptr(p);
}

bool touches_borrowed(const OpRecord& r) {
  for (const auto& b : r.binds)
    if (borrowed(b.tensor)) return true;
  for (const at::Tensor& d : r.dsts)
    if (borrowed(d)) return true;
  return false;
}

ir::Value read(Window& w, const at::Tensor& t, ir::DType dt) {
  if (t.is_privateuseone()) {
    Meta m = meta_of(t, dt);
    c10::StorageImpl* key = storage_key(t);
    auto it = w.tracked.find(key);
    if (it != w.tracked.end() && live(it->second)) {
      if (m == it->second.meta) return it->second.v;
      ir::Value v = derive(w.g, it->second.v, it->second.meta, m);
      TORCH_INTERNAL_ASSERT(v.valid(), "[fused window] view not derivable after the alias check");
      return v;
    }
    auto& rs = w.reads[key];
    for (auto& [rm, rv] : rs)
      if (rm == m) return rv;
    ir::Value v = w.g.param(dt, ir::Shape(m.sizes.begin(), m.sizes.end()));
    w.params.push_back({t, m, 0, dt, false});
    rs.push_back({m, v});
    return v;
  }
  ir::Value v = w.g.param(dt, ir::Shape(t.sizes().begin(), t.sizes().end()));
  w.params.push_back({t, meta_of(t, dt), 0, dt, false});
  return v;
}

void inline_op(Window& w, const OpRecord& r) {
  const auto& nodes = r.graph->nodes();
  std::vector<ir::Value> map(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    if (n.is_param) {
      const auto& b = r.binds[n.param_index];
      if (b.tensor.defined()) {
        map[i] = read(w, b.tensor, b.dtype);
        if (b.rng_n) {
          w.params.back().rng_n = b.rng_n;
          w.params.back().gen = b.gen;
        }
      } else {
        map[i] = w.g.param(b.dtype, {});
        w.params.push_back({at::Tensor(), {}, b.bits, b.dtype, true});
      }
      continue;
    }
    std::vector<ir::Value> ops;
    ops.reserve(n.operands.size());
    for (int o : n.operands) ops.push_back(map[o]);
    map[i] = w.g.op(n.op, std::move(ops), n.attrs, n.shape, n.dtype);
  }
  const auto& outs = r.graph->outputs();
  for (size_t k = 0; k < r.dsts.size(); ++k) {
    const at::Tensor& d = r.dsts[k];
    Tracked t;
    t.weak = c10::weak_intrusive_ptr<c10::StorageImpl>(d.storage().getWeakStorageImpl());
    t.meta = meta_of(d, r.graph->dtype(outs[k]));
    t.v = map[outs[k].id];
    t.seq = w.seq++;
    w.tracked[storage_key(d)] = std::move(t);
  }
  ++w.ops;
}

void flush_hook(int dev) { flush(dev); }
const bool g_hook_installed = [] {
  runtime::stream::set_flush_hook(&flush_hook);
  return true;
}();

}  // namespace

void defer(int dev, OpRecord& r) {
  Window& w = window(dev);
  std::lock_guard<std::mutex> lk(w.mu);
  bool unfused = touches_borrowed(r);  // queued after the pending writes, written at once
  if (unfused) flush_locked(w, dev, std::string("borrowed storage at ") + r.name);
  else if (needs_flush(w, r)) flush_locked(w, dev, std::string("aliasing view at ") + r.name);
  inline_op(w, r);
  for (auto& f : r.check_flags) w.check_flags.push_back(std::move(f));
  for (auto& m : r.check_msgs) w.check_msgs.push_back(std::move(m));
  {
    std::lock_guard<std::mutex> s(g_stats_mu);
    ++g_stats.deferred_ops;
  }
  if (unfused) {
    flush_locked(w, dev, std::string("borrowed storage at ") + r.name);
    return;
  }
  if (w.g.nodes().size() > config().fused_window_nodes && !w.capturing) flush_locked(w, dev, "window size");
}

namespace {
// An empty window takes no lock: every download and sync asks (a download asks twice:
// flush_for_wait, then mark's flush hook).
void flush_one(int dev, bool for_wait) {
  if (!has_pending(dev)) return;
  Window& w = window(dev);
  std::lock_guard<std::mutex> lk(w.mu);
  flush_locked(w, dev, "sync point", for_wait);
}
}  // namespace

void flush(int dev) {
  if (dev < 0) {
    for (int d = 0; d < kMaxDevices; ++d) flush_one(d, false);
    return;
  }
  flush_one(dev, false);
}

void flush_for_wait(int dev) { flush_one(dev, true); }

// Lock-free: every strict op asks. A window another thread is filling meanwhile is as racy
// under the lock as without it.
bool has_pending(int dev) { return window(dev).ops.load(std::memory_order_acquire) > 0; }

bool capturing(int dev) {
  Window& w = window(dev);
  std::lock_guard<std::mutex> lk(w.mu);
  return w.capturing;
}

bool window_uses(int dev, const at::Tensor& t) {
  Window& w = window(dev);
  std::lock_guard<std::mutex> lk(w.mu);
  if (w.capturing) return true;
  if (w.ops.load(std::memory_order_relaxed) == 0) return false;
  c10::StorageImpl* k = storage_key(t);
  return w.tracked.count(k) > 0 || w.reads.count(k) > 0;
}

WindowStats window_stats() {
  std::lock_guard<std::mutex> lk(g_stats_mu);
  return g_stats;
}

ir::Graph pending_graph(int dev, const std::vector<at::Tensor>& tensors) {
  Window& w = window(dev);
  std::lock_guard<std::mutex> lk(w.mu);
  ir::Graph g = w.g;
  std::vector<ir::Value> outs;
  if (tensors.empty()) {
    for (const Tracked* t : in_order(w))
      if (live(*t)) outs.push_back(t->v);
  } else {
    for (const at::Tensor& t : tensors) {
      auto it = w.tracked.find(storage_key(t));
      TORCH_CHECK(it != w.tracked.end() && live(it->second), "[computation_mlir] tensor has no pending computation");
      outs.push_back(it->second.v);
    }
  }
  g.set_outputs(outs);
  return g;
}

std::string pending_stablehlo(int dev, const std::vector<at::Tensor>& tensors) {
  return pending_graph(dev, tensors).to_stablehlo();
}


std::pair<int64_t, int64_t> pending_size(int dev) {
  Window& w = window(dev);
  std::lock_guard<std::mutex> lk(w.mu);
  return {w.ops.load(), static_cast<int64_t>(w.g.nodes().size())};
}

}  // namespace torch_tpu::exec
