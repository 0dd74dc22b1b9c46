// Deferred window: recording (inlining each op's graph), view/alias tracking, flushing.
#include "exec/window.h"

#include <mutex>
#include <numeric>
#include <unordered_map>

#include "exec/stream.h"
#include "runtime/compile_cache.h"

namespace torch_tpu::exec {
namespace {

constexpr size_t kMaxNodes = 4096;  // flush heuristic: bounds compile time and memory
constexpr int kMaxDevices = 16;

struct Meta {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  ir::DType dtype = ir::DType::F32;
  bool operator==(const Meta& o) const {
    return sizes == o.sizes && strides == o.strides && offset == o.offset && dtype == o.dtype;
  }
  bool contiguous() const {
    int64_t s = 1;
    for (size_t i = sizes.size(); i-- > 0;) {
      if (sizes[i] != 1 && strides[i] != s) return false;
      s *= sizes[i];
    }
    return true;
  }
  int64_t numel() const { return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>()); }
};

Meta meta_of(const at::Tensor& t, ir::DType dt) {
  return {t.sizes().vec(), t.strides().vec(), t.storage_offset(), dt};
}

struct Tracked {
  c10::weak_intrusive_ptr<c10::StorageImpl> weak{c10::intrusive_ptr<c10::StorageImpl>()};
  Meta meta;
  ir::Value v;
  int64_t seq = 0;  // recording order: outputs are listed in it, so equal windows hash equal
};

struct Param {
  at::Tensor tensor;   // keeps the storage alive (tpu or cpu)
  Meta meta;           // the view read, as recorded
  uint64_t bits = 0;   // scalar
  ir::DType dtype;
  bool scalar = false;
};

struct Window {
  std::mutex mu;
  ir::Graph g;
  std::vector<Param> params;
  std::unordered_map<c10::StorageImpl*, Tracked> tracked;
  std::unordered_map<c10::StorageImpl*, std::vector<std::pair<Meta, ir::Value>>> reads;
  int64_t ops = 0;
  int64_t seq = 0;
};

Window g_windows[kMaxDevices];
std::mutex g_stats_mu;
WindowStats g_stats;

c10::StorageImpl* storage_key(const at::Tensor& t) { return t.storage().unsafeGetStorageImpl(); }

// A strided view `m` of the contiguous tracked value `t` (of meta `tm`) as IR ops, when the
// view is a box inside the tracked range; returns an invalid Value otherwise.
ir::Value derive(ir::Graph& g, const Tracked& t, const Meta& m) {
  const Meta& tm = t.meta;
  if (!tm.contiguous() || tm.dtype != m.dtype) return {};
  int64_t total = tm.numel(), rel = m.offset - tm.offset;
  if (rel < 0) return {};
  struct D { int64_t stride, size, dim; };
  std::vector<D> ds;
  std::vector<int64_t> bcast;
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    if (m.sizes[i] == 0) return {};
    if (m.sizes[i] == 1) continue;
    if (m.strides[i] == 0) bcast.push_back(static_cast<int64_t>(i));
    else if (m.strides[i] < 0) return {};
    else ds.push_back({m.strides[i], m.sizes[i], static_cast<int64_t>(i)});
  }
  std::sort(ds.begin(), ds.end(), [](const D& a, const D& b) { return a.stride > b.stride; });
  ir::Shape box;
  int64_t span = 1;
  if (!ds.empty()) {
    box.push_back(ds[0].size);
    for (size_t j = 0; j + 1 < ds.size(); ++j) {
      if (ds[j].stride % ds[j + 1].stride || ds[j].stride / ds[j + 1].stride < ds[j + 1].size) return {};
      box.push_back(ds[j].stride / ds[j + 1].stride);
    }
    box.push_back(ds.back().stride);
    span = ds[0].size * ds[0].stride;
  }
  if (rel + span > total) return {};
  ir::Value flat = g.reshape(t.v, {total});
  ir::Value v = g.slice(flat, {rel}, {rel + span}, {1});
  if (!ds.empty()) {
    v = g.reshape(v, box);
    std::vector<int64_t> lim(box.size()), zero(box.size(), 0), one(box.size(), 1);
    for (size_t j = 0; j < ds.size(); ++j) lim[j] = ds[j].size;
    lim.back() = 1;
    v = g.slice(v, zero, lim, one);
    ir::Shape sorted;
    for (const D& d : ds) sorted.push_back(d.size);
    v = g.reshape(v, sorted);
    // sorted position -> original dim order among the strided dims
    std::vector<int64_t> order(ds.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ds[a].dim < ds[b].dim; });
    v = g.transpose(v, order);
  }
  // Insert size-1 and broadcast dims.
  ir::Shape kept;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < m.sizes.size(); ++i)
    if (m.sizes[i] != 1 && m.strides[i] != 0) {
      kept.push_back(m.sizes[i]);
      dims.push_back(static_cast<int64_t>(i));
    }
  v = g.reshape(v, kept);
  return g.broadcast(v, m.sizes, dims);
}

bool live(const Tracked& t) { return !t.weak.expired(); }

bool needs_flush(Window& w, const OpRecord& r) {
  if (w.ops == 0) return false;
  for (const auto& b : r.binds) {
    if (!b.tensor.defined() || !b.tensor.is_privateuseone()) continue;
    auto it = w.tracked.find(storage_key(b.tensor));
    if (it == w.tracked.end() || !live(it->second)) continue;
    Meta m = meta_of(b.tensor, b.dtype);
    if (!(m == it->second.meta) && !derive(w.g, it->second, m).valid()) return true;
  }
  const auto& outs = r.graph->outputs();
  for (size_t k = 0; k < r.dsts.size(); ++k) {
    auto it = w.tracked.find(storage_key(r.dsts[k]));
    if (it == w.tracked.end() || !live(it->second)) continue;
    if (!(meta_of(r.dsts[k], r.graph->dtype(outs[k])) == it->second.meta)) return true;  // partial update
  }
  return false;
}

ir::Value read(Window& w, const at::Tensor& t, ir::DType dt) {
  if (t.is_privateuseone()) {
    Meta m = meta_of(t, dt);
    c10::StorageImpl* key = storage_key(t);
    auto it = w.tracked.find(key);
    if (it != w.tracked.end() && live(it->second)) {
      if (m == it->second.meta) return it->second.v;
      ir::Value v = derive(w.g, it->second, m);
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

struct Payload {
  std::shared_ptr<runtime::Executable> exe;
  std::vector<runtime::View> inputs, outputs;
  std::vector<c10::Storage> keep;
  std::vector<uint64_t> scalars;
  std::vector<int> scalar_param;
};

runtime::View view_from(const c10::Storage& st, const Meta& m) {
  runtime::View v;
  v.dtype = m.dtype;
  v.shape.assign(m.sizes.begin(), m.sizes.end());
  size_t item = ir::dtype_size(m.dtype);
  bool empty = false;
  for (int64_t s : m.sizes) empty |= s == 0;
  v.data = empty ? nullptr : static_cast<char*>(st.mutable_data()) + m.offset * item;
  if (!m.contiguous()) v.strides = m.strides;
  return v;
}

void reset(Window& w) {
  w.g = ir::Graph();
  w.params.clear();
  w.tracked.clear();
  w.reads.clear();
  w.ops = 0;
  w.seq = 0;
}

void flush_locked(Window& w, int dev, const char* reason) {
  if (w.ops == 0) return;
  auto p = std::make_shared<Payload>();
  std::vector<ir::Value> outs;
  int64_t skipped = 0;
  std::vector<Tracked*> order;
  order.reserve(w.tracked.size());
  for (auto& [key, t] : w.tracked) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const Tracked* a, const Tracked* b) { return a->seq < b->seq; });
  for (Tracked* tp : order) {
    Tracked& t = *tp;
    c10::intrusive_ptr<c10::StorageImpl> strong = t.weak.lock();
    if (!strong) {
      ++skipped;  // no tensor owns it any more: never written to memory
      continue;
    }
    outs.push_back(t.v);
    c10::Storage st(std::move(strong));
    p->outputs.push_back(view_from(st, t.meta));
    p->keep.push_back(std::move(st));
  }
  {
    std::lock_guard<std::mutex> lk(g_stats_mu);
    ++g_stats.flushes;
    g_stats.skipped_outputs += skipped;
    g_stats.last_flush_reason = reason;
  }
  if (outs.empty()) {
    reset(w);
    return;
  }
  w.g.set_outputs(outs);
  auto& cache = runtime::CompileCache::global();
  uint64_t key = w.g.hash();
  auto exe = cache.find(key);
  if (!exe) {
    try {
      exe = cache.insert(key, w.g, runtime::host_runtime());
    } catch (const std::exception& e) {
      reset(w);
      TORCH_CHECK(false, "[fused window] compiling the deferred graph failed: ", e.what());
    }
  }
  p->exe = std::move(exe);
  for (size_t i = 0; i < w.params.size(); ++i) {
    Param& pr = w.params[i];
    if (pr.scalar) {
      runtime::View v;
      v.dtype = pr.dtype;
      p->inputs.push_back(v);
      p->scalars.push_back(pr.bits);
      p->scalar_param.push_back(static_cast<int>(i));
    } else {
      p->inputs.push_back(view_from(pr.tensor.storage(), pr.meta));
      p->keep.push_back(pr.tensor.storage());
    }
  }
  reset(w);
  enqueue(dev, "fused_window", [p = std::move(p)]() {
    for (size_t k = 0; k < p->scalars.size(); ++k) p->inputs[p->scalar_param[k]].data = &p->scalars[k];
    p->exe->run(p->inputs, p->outputs);
  });
}

void flush_hook(int dev) { flush(dev); }
const bool g_hook_installed = [] {
  set_flush_hook(&flush_hook);
  return true;
}();

}  // namespace

void defer(int dev, OpRecord& r) {
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  if (needs_flush(w, r)) flush_locked(w, dev, "aliasing view");
  inline_op(w, r);
  {
    std::lock_guard<std::mutex> s(g_stats_mu);
    ++g_stats.deferred_ops;
  }
  if (w.g.nodes().size() > kMaxNodes) flush_locked(w, dev, "window size");
}

void flush(int dev) {
  if (dev < 0) {
    for (int d = 0; d < kMaxDevices; ++d) flush(d);
    return;
  }
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  flush_locked(w, dev, "sync point");
}

bool has_pending(int dev) {
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  return w.ops > 0;
}

WindowStats window_stats() {
  std::lock_guard<std::mutex> lk(g_stats_mu);
  return g_stats;
}

ir::Graph pending_graph(int dev, const std::vector<at::Tensor>& tensors) {
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  ir::Graph g = w.g;
  std::vector<ir::Value> outs;
  if (tensors.empty()) {
    std::vector<const Tracked*> order;
    for (auto& [k, t] : w.tracked)
      if (live(t)) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const Tracked* a, const Tracked* b) { return a->seq < b->seq; });
    for (const Tracked* t : order) outs.push_back(t->v);
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
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  return {w.ops, static_cast<int64_t>(w.g.nodes().size())};
}

}  // namespace torch_tpu::exec
