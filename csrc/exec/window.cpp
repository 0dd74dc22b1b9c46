// Deferred window: recording (inlining each op's graph), view/alias tracking, flushing.
#include "exec/window.h"

#include <mutex>
#include <numeric>
#include <unordered_map>

#include "base/config.h"
#include "base/error.h"
#include "device/device.h"
#include "exec/stream.h"
#include "runtime/compile_cache.h"

namespace torch_tpu::exec {
namespace {

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
  uint64_t rng_n = 0;  // Philox state: counters reserved (re-reserved when a program replays)
  std::optional<at::Generator> gen;
};

struct Window {
  std::mutex mu;
  ir::Graph g;
  std::vector<Param> params;
  std::unordered_map<c10::StorageImpl*, Tracked> tracked;
  std::unordered_map<c10::StorageImpl*, std::vector<std::pair<Meta, ir::Value>>> reads;
  int64_t ops = 0;
  int64_t seq = 0;
  std::vector<at::Tensor> check_flags;  // tested after the window runs
  std::vector<std::string> check_msgs;
  bool capturing = false;
  std::string broken;  // why the capture cannot be replayed ("" = fine)
};

Window g_windows[kMaxDevices];
std::mutex g_stats_mu;
WindowStats g_stats;

c10::StorageImpl* storage_key(const at::Tensor& t) { return t.storage().unsafeGetStorageImpl(); }

// A strided view `m` of the contiguous tracked value `t` (of meta `tm`) as IR ops, when the
// view's strides nest (each divides the next larger one, dims don't overlap) and every
// element it reads lies inside the tracked range; returns an invalid Value otherwise.
// The flat value is seen as a mixed-radix box (rows, s0/s1, ..., s_last) and the view is a
// slice of it starting at the coordinates of its offset.
ir::Value derive(ir::Graph& g, const Tracked& t, const Meta& m) {
  const Meta& tm = t.meta;
  if (!tm.contiguous() || tm.dtype != m.dtype) return {};
  int64_t total = tm.numel(), rel = m.offset - tm.offset;
  if (rel < 0) return {};
  struct D { int64_t stride, size, dim; };
  std::vector<D> ds;
  int64_t last = rel;  // the highest element index read
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    if (m.sizes[i] == 0) return {};
    if (m.sizes[i] == 1 || m.strides[i] == 0) continue;
    if (m.strides[i] < 0) return {};
    ds.push_back({m.strides[i], m.sizes[i], static_cast<int64_t>(i)});
    last += (m.sizes[i] - 1) * m.strides[i];
  }
  if (last >= total) return {};
  std::sort(ds.begin(), ds.end(), [](const D& a, const D& b) { return a.stride > b.stride; });
  for (size_t j = 0; j + 1 < ds.size(); ++j)
    if (ds[j].stride % ds[j + 1].stride || ds[j].stride / ds[j + 1].stride < ds[j + 1].size) return {};
  ir::Value flat = g.reshape(t.v, {total});
  ir::Value v;
  if (ds.empty()) {
    v = g.slice(flat, {rel}, {rel + 1}, {1});
  } else {
    int64_t s0 = ds[0].stride, rows = (total + s0 - 1) / s0;
    ir::Shape box{rows}, start, limit;
    for (size_t j = 0; j + 1 < ds.size(); ++j) box.push_back(ds[j].stride / ds[j + 1].stride);
    box.push_back(ds.back().stride);
    int64_t r = rel;
    for (size_t j = 0; j < ds.size(); ++j) {
      start.push_back(r / ds[j].stride);
      r %= ds[j].stride;
      limit.push_back(start.back() + ds[j].size);
      if (limit.back() > box[j]) return {};
    }
    start.push_back(r);
    limit.push_back(r + 1);
    if (rows * s0 > total) flat = g.concat({flat, g.constant(0, tm.dtype, {rows * s0 - total})}, 0);
    v = g.reshape(flat, box);
    v = g.slice(v, start, limit, std::vector<int64_t>(box.size(), 1));
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

void enqueue_checks(int dev, std::vector<at::Tensor> flags, std::vector<std::string> msgs) {
  if (flags.empty()) return;
  enqueue(dev, "range check", [flags = std::move(flags), msgs = std::move(msgs)]() {
    for (size_t k = 0; k < flags.size(); ++k)
      if (*static_cast<const bool*>(flags[k].const_data_ptr())) throw torch_tpu::Error(msgs[k]);
  });
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

void flush_locked(Window& w, int dev, const std::string& reason) {
  if (w.ops == 0) return;
  if (w.capturing && w.broken.empty()) w.broken = "a sync point inside the graph (" + reason + ")";
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
  std::vector<at::Tensor> flags = std::move(w.check_flags);
  std::vector<std::string> msgs = std::move(w.check_msgs);
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
  enqueue_checks(dev, std::move(flags), std::move(msgs));
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
  if (needs_flush(w, r)) flush_locked(w, dev, std::string("aliasing view at ") + r.name);
  inline_op(w, r);
  {
    std::lock_guard<std::mutex> s(g_stats_mu);
    ++g_stats.deferred_ops;
  }
  if (w.g.nodes().size() > config().fused_window_nodes && !w.capturing) flush_locked(w, dev, "window size");
}

void defer_checks(int dev, std::vector<at::Tensor> flags, std::vector<std::string> messages) {
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  for (auto& f : flags) w.check_flags.push_back(std::move(f));
  for (auto& m : messages) w.check_msgs.push_back(std::move(m));
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


// ---- Capture ----------------------------------------------------------------------------

struct Program {
  int dev = 0;
  ir::Graph graph;
  std::shared_ptr<runtime::Executable> exe;
  std::vector<Meta> input_metas;  // sizes, strides, offsets (dtype unused)
  std::vector<at::ScalarType> input_types;
  // A storage the program reads or writes: input k's (k >= 0) or new storage -k-1.
  struct In {
    int storage = 0;       // kind Input
    Meta meta;
    at::Tensor constant;   // kind Const (a tensor the graph read that is not an input)
    uint64_t bits = 0;     // kind Scalar
    ir::DType dtype = ir::DType::F32;
    uint64_t rng_n = 0;    // kind Rng
    std::optional<at::Generator> gen;
    enum Kind { Input, Const, Scalar, Rng } kind = Input;
  };
  std::vector<In> ins;
  std::vector<int64_t> new_nbytes;        // sizes of the storages a call allocates
  std::vector<std::pair<int, Meta>> writes;  // graph output k -> (storage, view)
  struct Out {
    int storage;
    Meta meta;
    at::ScalarType st;
  };
  std::vector<Out> outs;
  std::vector<int> check_storage;  // new storages holding range-check flags
  std::vector<std::string> check_msgs;
};

namespace {

// Lowest and highest element offsets a view touches (numel > 0).
std::pair<int64_t, int64_t> span(const Meta& m) {
  int64_t lo = m.offset, hi = m.offset;
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    int64_t e = (m.sizes[i] - 1) * m.strides[i];
    (e < 0 ? lo : hi) += e;
  }
  return {lo, hi};
}

// Whether view `m` lies within the elements of view `in` (same element size).
bool inside(const Meta& m, const Meta& in) {
  if (m.numel() == 0) return true;
  if (in.numel() == 0) return false;
  auto [lo, hi] = span(m);
  auto [ilo, ihi] = span(in);
  return lo >= ilo && hi <= ihi;
}

at::Tensor make_view(const c10::Storage& st, at::ScalarType dt, const Meta& m) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(st), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::scalarTypeToTypeMeta(dt));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes, m.strides, m.offset);
  return t;
}

at::Tensor rng_state(const Program::In& in, int dev) {
  auto [seed, offset] = device::philox_reserve(in.gen, dev, in.rng_n);
  at::Tensor st = at::empty({2}, at::TensorOptions().dtype(at::kLong));
  st.data_ptr<int64_t>()[0] = static_cast<int64_t>(seed);
  st.data_ptr<int64_t>()[1] = static_cast<int64_t>(offset);
  return st;
}

// Binds the program's inputs; `storages` maps storage ids to storages (inputs first, then new).
void bind_and_enqueue(const Program& p, const std::function<c10::Storage(int)>& storage_of) {
  auto pl = std::make_shared<Payload>();
  pl->exe = p.exe;
  for (size_t i = 0; i < p.ins.size(); ++i) {
    const Program::In& in = p.ins[i];
    switch (in.kind) {
      case Program::In::Input: {
        c10::Storage st = storage_of(in.storage);
        pl->inputs.push_back(view_from(st, in.meta));
        pl->keep.push_back(std::move(st));
        break;
      }
      case Program::In::Const:
        pl->inputs.push_back(view_from(in.constant.storage(), in.meta));
        pl->keep.push_back(in.constant.storage());
        break;
      case Program::In::Rng: {
        at::Tensor st = rng_state(in, p.dev);
        pl->inputs.push_back(view_from(st.storage(), meta_of(st, ir::DType::U64)));
        pl->keep.push_back(st.storage());
        break;
      }
      case Program::In::Scalar: {
        runtime::View v;
        v.dtype = in.dtype;
        pl->inputs.push_back(v);
        pl->scalars.push_back(in.bits);
        pl->scalar_param.push_back(static_cast<int>(i));
        break;
      }
    }
  }
  for (const auto& [sid, m] : p.writes) {
    c10::Storage st = storage_of(sid);
    pl->outputs.push_back(view_from(st, m));
    pl->keep.push_back(std::move(st));
  }
  enqueue(p.dev, "compiled_graph", [pl = std::move(pl)]() {
    for (size_t k = 0; k < pl->scalars.size(); ++k) pl->inputs[pl->scalar_param[k]].data = &pl->scalars[k];
    pl->exe->run(pl->inputs, pl->outputs);
  });
}

}  // namespace

void begin_capture(int dev, const std::vector<at::Tensor>& inputs) {
  (void)inputs;
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  flush_locked(w, dev, "capture start");
  w.capturing = true;
  w.broken.clear();
}

std::shared_ptr<Program> end_capture(int dev, const std::vector<at::Tensor>& inputs,
                                     const std::vector<at::Tensor>& outputs, std::string* why) {
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  auto fail = [&](std::string reason) -> std::shared_ptr<Program> {
    w.capturing = false;
    flush_locked(w, dev, "capture end");
    *why = std::move(reason);
    return nullptr;
  };
  if (!w.broken.empty()) return fail(w.broken);
  w.capturing = false;
  auto p = std::make_shared<Program>();
  p->dev = dev;
  std::unordered_map<c10::StorageImpl*, int> sid;  // storage -> id
  std::vector<c10::Storage> now;                   // id -> this call's storage (new ids offset)
  for (size_t k = 0; k < inputs.size(); ++k) {
    const at::Tensor& t = inputs[k];
    if (!t.is_privateuseone()) return fail("an input is not a tpu tensor");
    p->input_metas.push_back(meta_of(t, ir::DType::F32));
    p->input_types.push_back(t.scalar_type());
    sid.emplace(storage_key(t), static_cast<int>(k));
  }
  // Input k's view, or an empty one (nothing fits) when `dt` has another element size.
  auto input_meta = [&](int k, ir::DType dt) {
    if (static_cast<size_t>(inputs[k].element_size()) != ir::dtype_size(dt)) return Meta{{0}, {1}, 0, dt};
    return meta_of(inputs[k], dt);
  };
  std::vector<c10::Storage> fresh;
  auto new_storage = [&](const at::Tensor& t) {
    auto it = sid.find(storage_key(t));
    if (it != sid.end()) return it->second;
    int id = -static_cast<int>(fresh.size()) - 1;
    sid.emplace(storage_key(t), id);
    fresh.push_back(t.storage());
    p->new_nbytes.push_back(static_cast<int64_t>(t.storage().nbytes()));
    return id;
  };
  // Outputs: computed by the recording (tracked), or views of inputs.
  for (const at::Tensor& o : outputs) {
    if (!o.is_privateuseone()) return fail("an output is not a tpu tensor");
    auto it = sid.find(storage_key(o));
    if (it != sid.end() && it->second >= 0) {
      if (o.element_size() != inputs[it->second].element_size() ||
          !inside(meta_of(o, ir::DType::F32), meta_of(inputs[it->second], ir::DType::F32)))
        return fail("an output aliases memory outside its input");
      p->outs.push_back({it->second, meta_of(o, ir::DType::F32), o.scalar_type()});
      continue;
    }
    auto tr = w.tracked.find(storage_key(o));
    if (tr == w.tracked.end() || !live(tr->second)) return fail("an output was not computed by the graph");
    p->outs.push_back({new_storage(o), meta_of(o, ir::DType::F32), o.scalar_type()});
  }
  // Writes, in recording order: into outputs' storages, inputs' storages (mutation), flags.
  std::unordered_map<c10::StorageImpl*, int> flag_index;
  for (size_t k = 0; k < w.check_flags.size(); ++k) flag_index.emplace(storage_key(w.check_flags[k]), static_cast<int>(k));
  std::vector<Tracked*> order;
  for (auto& [key, t] : w.tracked) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const Tracked* a, const Tracked* b) { return a->seq < b->seq; });
  std::vector<ir::Value> outs;
  std::vector<c10::Storage> write_now;
  for (Tracked* tp : order) {
    c10::intrusive_ptr<c10::StorageImpl> strong = tp->weak.lock();
    if (!strong) continue;
    c10::Storage st(std::move(strong));
    c10::StorageImpl* key = st.unsafeGetStorageImpl();
    int id;
    auto it = sid.find(key);
    if (it != sid.end()) {
      id = it->second;
      if (id >= 0 && !inside(tp->meta, input_meta(id, tp->meta.dtype))) return fail("the graph writes outside an input");
    } else if (auto f = flag_index.find(key); f != flag_index.end()) {
      id = new_storage(w.check_flags[f->second]);
      p->check_storage.push_back(id);
      p->check_msgs.push_back(w.check_msgs[f->second]);
    } else {
      return fail("the graph keeps a tensor alive that is not one of its outputs");
    }
    outs.push_back(tp->v);
    p->writes.push_back({id, tp->meta});
    write_now.push_back(std::move(st));
  }
  // Reads: the inputs' storages, constants, scalars, rng states.
  for (Param& pr : w.params) {
    Program::In in;
    in.dtype = pr.dtype;
    in.meta = pr.meta;
    if (pr.scalar) {
      in.kind = Program::In::Scalar;
      in.bits = pr.bits;
    } else if (pr.rng_n) {
      in.kind = Program::In::Rng;
      in.rng_n = pr.rng_n;
      in.gen = pr.gen;
      in.constant = pr.tensor;  // this call's state (already reserved at record time)
    } else if (auto it = pr.tensor.is_privateuseone() ? sid.find(storage_key(pr.tensor)) : sid.end();
               it != sid.end() && it->second >= 0) {
      if (!inside(pr.meta, input_meta(it->second, pr.meta.dtype))) return fail("the graph reads outside an input");
      in.kind = Program::In::Input;
      in.storage = it->second;
    } else {
      if (pr.tensor.is_privateuseone() && sid.count(storage_key(pr.tensor)))
        return fail("the graph reads a tensor it computed before a sync point");
      in.kind = Program::In::Const;
      in.constant = pr.tensor;
    }
    p->ins.push_back(std::move(in));
  }
  if (outs.empty()) {
    // Nothing to compute (outputs are views of inputs): an empty program.
    reset(w);
    return p;
  }
  w.g.set_outputs(outs);
  p->graph = w.g;
  auto& cache = runtime::CompileCache::global();
  uint64_t key = p->graph.hash();
  p->exe = cache.find(key);
  if (!p->exe) {
    try {
      p->exe = cache.insert(key, p->graph, runtime::host_runtime());
    } catch (const std::exception& e) {
      reset(w);
      TORCH_CHECK(false, "[torch.compile] compiling the captured graph failed: ", e.what());
    }
  }
  // Run this call: the recording's own storages; rng states reserved at record time.
  std::vector<at::Tensor> flags = std::move(w.check_flags);
  reset(w);
  {
    Program first = *p;
    for (auto& in : first.ins)
      if (in.kind == Program::In::Rng) in.kind = Program::In::Const;
    bind_and_enqueue(first, [&](int id) { return id >= 0 ? inputs[id].storage() : fresh[-id - 1]; });
  }
  std::vector<std::string> msgs = p->check_msgs;
  std::vector<at::Tensor> live_flags;
  for (int id : p->check_storage) live_flags.push_back(make_view(fresh[-id - 1], at::kBool, Meta{{}, {}, 0, ir::DType::Bool}));
  enqueue_checks(dev, std::move(live_flags), std::move(msgs));
  return p;
}

bool program_matches(const Program& p, const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != p.input_metas.size()) return false;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Meta& m = p.input_metas[k];
    const at::Tensor& t = inputs[k];
    if (!t.is_privateuseone() || t.scalar_type() != p.input_types[k] || t.storage_offset() != m.offset || t.sizes() != c10::IntArrayRef(m.sizes) ||
        t.strides() != c10::IntArrayRef(m.strides))
      return false;
  }
  return true;
}

std::vector<at::Tensor> run_program(const Program& p, const std::vector<at::Tensor>& inputs) {
  TORCH_CHECK(program_matches(p, inputs), "[torch.compile] inputs don't match the captured graph's sizes/strides");
  std::vector<c10::Storage> fresh;
  fresh.reserve(p.new_nbytes.size());
  for (int64_t n : p.new_nbytes)
    fresh.emplace_back(c10::Storage::use_byte_size_t(), n, device::allocator(), /*resizable=*/true);
  auto storage_of = [&](int id) { return id >= 0 ? inputs[id].storage() : fresh[-id - 1]; };
  if (p.exe) {
    {
      Window& w = g_windows[p.dev];
      std::lock_guard<std::mutex> lk(w.mu);
      flush_locked(w, p.dev, "compiled graph");  // eager work it may read comes first
    }
    bind_and_enqueue(p, storage_of);
    std::vector<at::Tensor> flags;
    for (int id : p.check_storage) flags.push_back(make_view(storage_of(id), at::kBool, Meta{{}, {}, 0, ir::DType::Bool}));
    if (!flags.empty()) enqueue_checks(p.dev, std::move(flags), p.check_msgs);
  }
  std::vector<at::Tensor> res;
  res.reserve(p.outs.size());
  for (const Program::Out& o : p.outs) res.push_back(make_view(storage_of(o.storage), o.st, o.meta));
  return res;
}

std::string program_stablehlo(const Program& p) { return p.exe ? p.graph.to_stablehlo() : std::string(); }
int64_t program_nodes(const Program& p) { return static_cast<int64_t>(p.graph.nodes().size()); }

std::pair<int64_t, int64_t> pending_size(int dev) {
  Window& w = g_windows[dev];
  std::lock_guard<std::mutex> lk(w.mu);
  return {w.ops, static_cast<int64_t>(w.g.nodes().size())};
}

}  // namespace torch_tpu::exec
