// torch.compile capture: a fused-window recording turned into a Program that replays as
// one launch per call, without per-op dispatch.
#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "device/device.h"
#include "exec/launch.h"
#include "exec/stream.h"
#include "exec/window.h"
#include "exec/window_internal.h"

namespace torch_tpu::exec {
using namespace detail;

struct Program {
  int dev = 0;
  ir::Graph graph;
  std::shared_ptr<runtime::Executable> exe;
  std::vector<Meta> input_metas;  // sizes, strides, offsets (dtype unused)
  std::vector<at::ScalarType> input_types;
  // Per input, the first input viewing the same storage (itself if none): the program may
  // read one input's elements through another's (end_capture), so a replay needs those
  // inputs to share a storage again.
  std::vector<int> input_shares;
  // Per input, the bytes its storage must hold: a read may span whole rows of its view's
  // storage beyond the view (read_strided_views_in_place).
  std::vector<int64_t> input_min_bytes;
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

at::Tensor rng_state(const Program::In& in, int dev) {
  auto [seed, offset] = device::philox_reserve(in.gen, dev, in.rng_n);
  at::Tensor st = at::empty({2}, at::TensorOptions().dtype(at::kLong));
  st.data_ptr<int64_t>()[0] = static_cast<int64_t>(seed);
  st.data_ptr<int64_t>()[1] = static_cast<int64_t>(offset);
  return st;
}

// Binds the program's operands and queues one launch; `storage_of` maps storage ids to
// storages (inputs first, then new).
void bind_and_enqueue(const Program& p, const std::function<c10::Storage(int)>& storage_of) {
  Launch l("compiled_graph", p.exe);
  for (const Program::In& in : p.ins) {
    switch (in.kind) {
      case Program::In::Input: l.read(storage_of(in.storage), in.meta); break;
      case Program::In::Const: l.read(in.constant.storage(), in.meta); break;
      case Program::In::Rng: {
        at::Tensor st = rng_state(in, p.dev);
        l.read(st, ir::DType::U64);
        break;
      }
      case Program::In::Scalar: l.scalar(in.bits, in.dtype); break;
    }
  }
  for (const auto& [sid, m] : p.writes) l.write(storage_of(sid), m);
  l.submit(p.dev);
}

// Strided views the graph reads (q, k and v saved as views of one projection, a weight's
// transpose) were gathered into dense copies before every run. Each such read is bound
// instead as the flat run of storage elements its view spans, and the view is derived in the
// graph (reshape / slice / transpose: exec::derive), where fused loops read it in place and a
// transpose folds into a dot. Reads whose view does not derive keep their binding.
void read_strided_views_in_place(Program& p, const std::vector<at::Tensor>& inputs) {
  const auto& nodes = p.graph.nodes();
  std::vector<int> params;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].is_param) params.push_back(static_cast<int>(i));
  if (params.size() != p.ins.size()) return;
  std::vector<Meta> flat(p.ins.size());
  std::vector<char> change(p.ins.size(), 0);
  bool any = false;
  for (size_t k = 0; k < p.ins.size(); ++k) {
    const Program::In& in = p.ins[k];
    if ((in.kind != Program::In::Input && in.kind != Program::In::Const) || in.meta.contiguous() ||
        in.meta.numel() == 0)
      continue;
    const c10::Storage& st = in.kind == Program::In::Input ? inputs[in.storage].storage() : in.constant.storage();
    const int64_t elems = static_cast<int64_t>(st.nbytes() / ir::dtype_size(in.meta.dtype));
    change[k] = flat_run(in.meta, elems, FlatRun::kWholeRows, &flat[k]) && ir::Shape(in.meta.sizes.begin(), in.meta.sizes.end()) == nodes[params[k]].shape;
    any |= change[k] != 0;
  }
  // Writes into a permuted dense view (attention's output in the query's dim order): the
  // value in storage order, written as a flat run (no transpose and copy after the steps).
  std::vector<char> flat_out(p.writes.size(), 0);
  for (size_t i = 0; i < p.writes.size(); ++i) {
    const Meta& m = p.writes[i].second;
    if (m.contiguous() || m.numel() == 0) continue;
    auto [lo, hi] = span(m);
    ir::Graph trial;
    flat_out[i] = hi - lo + 1 == m.numel() && storage_order(trial, trial.param(m.dtype, m.sizes), m).valid();
    any |= flat_out[i] != 0;
  }
  if (!any) return;
  ir::Graph out;
  std::vector<ir::Value> map(nodes.size());
  size_t k = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    if (n.is_param) {
      if (change[k]) {
        map[i] = derive(out, out.param(n.dtype, flat[k].sizes), flat[k], p.ins[k].meta);
        p.ins[k].meta = flat[k];
        if (p.ins[k].kind == Program::In::Input) {
          int64_t bytes = (flat[k].offset + flat[k].sizes[0]) * static_cast<int64_t>(ir::dtype_size(flat[k].dtype));
          int64_t& need = p.input_min_bytes[static_cast<size_t>(p.ins[k].storage)];
          need = std::max(need, bytes);
        }
      } else {
        map[i] = out.param(n.dtype, n.shape);
      }
      ++k;
      continue;
    }
    std::vector<ir::Value> ops;
    for (int o : n.operands) ops.push_back(map[o]);
    map[i] = out.op(n.op, std::move(ops), n.attrs, n.shape, n.dtype);
  }
  std::vector<ir::Value> outs;
  for (ir::Value v : p.graph.outputs()) outs.push_back(map[v.id]);
  for (size_t i = 0; i < outs.size() && i < p.writes.size(); ++i) {
    if (!flat_out[i]) continue;
    Meta& m = p.writes[i].second;
    outs[i] = storage_order(out, outs[i], m);
    m = Meta{{m.numel()}, {1}, span(m).first, m.dtype};
  }
  out.set_outputs(std::move(outs));
  p.graph = std::move(out);
}

}  // namespace

void begin_capture(int dev, const std::vector<at::Tensor>& inputs) {
  (void)inputs;
  Window& w = window(dev);
  std::lock_guard<std::mutex> lk(w.mu);
  flush_locked(w, dev, "capture start");
  w.capturing = true;
  w.broken.clear();
}

std::shared_ptr<Program> end_capture(int dev, const std::vector<at::Tensor>& inputs,
                                     const std::vector<at::Tensor>& outputs, std::string* why) {
  Window& w = window(dev);
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
  // Inputs that are views of one storage (q, k and v sliced from one projection): a read,
  // write or output view belongs to whichever of them contains it. compile.py's layout key
  // includes which inputs share a storage, so a replay has the same sharing.
  std::unordered_map<c10::StorageImpl*, std::vector<int>> sharing;
  std::vector<c10::Storage> now;                   // id -> this call's storage (new ids offset)
  for (size_t k = 0; k < inputs.size(); ++k) {
    const at::Tensor& t = inputs[k];
    if (!t.is_privateuseone()) return fail("an input is not a tpu tensor");
    p->input_metas.push_back(meta_of(t, ir::DType::F32));
    p->input_types.push_back(t.scalar_type());
    sid.emplace(storage_key(t), static_cast<int>(k));
    auto& sh = sharing[storage_key(t)];
    p->input_shares.push_back(sh.empty() ? static_cast<int>(k) : sh.front());
    sh.push_back(static_cast<int>(k));
  }
  p->input_min_bytes.assign(inputs.size(), 0);  // raised where inputs are read as storage runs
  // The first input viewing storage `key` whose view contains m (elements of `esize` bytes:
  // only an input of that element size can); -1 if none.
  auto containing = [&](c10::StorageImpl* key, const Meta& m, size_t esize) {
    auto sh = sharing.find(key);
    if (sh == sharing.end()) return -1;
    for (int k : sh->second) {
      const at::Tensor& in = inputs[k];
      if (static_cast<size_t>(in.element_size()) == esize && inside(m, meta_of(in, m.dtype))) return k;
      // A complex input read or written through its real pairs (the complex lowerings work
      // on view_as_real views): contained in the pairs view of the input.
      if (in.is_complex() && !in.is_conj() && static_cast<size_t>(in.element_size()) == 2 * esize &&
          inside(m, meta_of(at::view_as_real(in), m.dtype)))
        return k;
    }
    return -1;
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
  for (size_t oi = 0; oi < outputs.size(); ++oi) {
    const at::Tensor& o = outputs[oi];
    if (!o.is_privateuseone()) return fail("an output is not a tpu tensor");
    auto it = sid.find(storage_key(o));
    if (it != sid.end() && it->second >= 0) {
      int k = containing(storage_key(o), meta_of(o, ir::DType::F32), o.element_size());
      if (k < 0) return fail("an output aliases memory outside its input");
      p->outs.push_back({k, meta_of(o, ir::DType::F32), o.scalar_type()});
      continue;
    }
    auto tr = w.tracked.find(storage_key(o));
    if (tr == w.tracked.end() || !live(tr->second)) {
      std::ostringstream os;
      os << "output " << oi << " (" << o.sizes() << ", " << o.scalar_type() << ") was not computed by the graph";
      return fail(os.str());
    }
    p->outs.push_back({new_storage(o), meta_of(o, ir::DType::F32), o.scalar_type()});
  }
  // Writes, in recording order: into outputs' storages, inputs' storages (mutation), flags.
  std::unordered_map<c10::StorageImpl*, int> flag_index;
  for (size_t k = 0; k < w.check_flags.size(); ++k) flag_index.emplace(storage_key(w.check_flags[k]), static_cast<int>(k));
  std::vector<ir::Value> outs;
  std::vector<c10::Storage> write_now;
  for (Tracked* tp : in_order(w)) {
    c10::intrusive_ptr<c10::StorageImpl> strong = tp->weak.lock();
    if (!strong) continue;
    c10::Storage st(std::move(strong));
    c10::StorageImpl* key = st.unsafeGetStorageImpl();
    int id;
    auto it = sid.find(key);
    if (it != sid.end()) {
      id = it->second;
      if (id >= 0) {  // an input's storage: the input whose view holds the write
        id = containing(key, tp->meta, ir::dtype_size(tp->meta.dtype));
        if (id < 0) return fail("the graph writes outside an input");
      }
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
      int k = containing(storage_key(pr.tensor), pr.meta, ir::dtype_size(pr.meta.dtype));
      if (k < 0) return fail("the graph reads outside an input");
      in.kind = Program::In::Input;
      in.storage = k;
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
  read_strided_views_in_place(*p, inputs);
  try {
    p->exe = compiled(p->graph.hash(), p->graph, "torch.compile");
  } catch (const std::exception& e) {
    reset(w);
    TORCH_CHECK(false, "[torch.compile] compiling the captured graph failed: ", e.what());
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
  submit_checks(dev, "range check", live_flags, std::move(msgs));
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
    if (static_cast<int64_t>(t.storage().nbytes()) < p.input_min_bytes[k]) return false;
    const int first = p.input_shares[k];
    if (first != static_cast<int>(k) && !t.storage().is_alias_of(inputs[first].storage())) return false;
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
      Window& w = window(p.dev);
      std::lock_guard<std::mutex> lk(w.mu);
      flush_locked(w, p.dev, "compiled graph");  // eager work it may read comes first
    }
    bind_and_enqueue(p, storage_of);
    std::vector<at::Tensor> flags;
    for (int id : p.check_storage) flags.push_back(make_view(storage_of(id), at::kBool, Meta{{}, {}, 0, ir::DType::Bool}));
    submit_checks(p.dev, "range check", flags, p.check_msgs);
  }
  std::vector<at::Tensor> res;
  res.reserve(p.outs.size());
  for (const Program::Out& o : p.outs) res.push_back(make_view(storage_of(o.storage), o.st, o.meta));
  return res;
}

std::string program_stablehlo(const Program& p) { return p.exe ? p.graph.to_stablehlo() : std::string(); }
int64_t program_nodes(const Program& p) { return static_cast<int64_t>(p.graph.nodes().size()); }

}  // namespace torch_tpu::exec
