// Compile-time planning: dead-node elimination, reshape aliasing, fusion (one step per
// fused cluster of ir::partition), per-step kernel preparation, constant precomputation,
// and liveness-based arena allocation (first-fit free list; a buffer is released after its
// last reader, so temporaries are reused).
#include "runtime/host/plan.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "base/error.h"
#include "ir/passes/fuse.h"
#include "runtime/host/gemm.h"

namespace torch_tpu::host {

void AlignedFree::operator()(void* p) const { std::free(p); }

AlignedBuffer aligned_buffer(size_t bytes) {
  size_t n = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, n);
  TPU_CHECK(p != nullptr, "[host] out of memory; could not allocate ", n, " bytes");
  return AlignedBuffer(static_cast<std::byte*>(p));
}

namespace {

constexpr int64_t kAlign = 64;
constexpr int64_t kMaxFoldedConstantBytes = 1 << 18;

int64_t round_up(int64_t b) { return (std::max<int64_t>(b, 1) + kAlign - 1) / kAlign * kAlign; }

// First-fit allocator over arena byte offsets.
class ArenaAllocator {
 public:
  int64_t alloc(int64_t bytes) {
    bytes = round_up(bytes);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      int64_t off = it->first, rest = it->second - bytes;
      free_.erase(it);
      if (rest) free_[off + bytes] = rest;
      return off;
    }
    // Grow: extend a free block that ends at the top, else append.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == top_) {
        int64_t off = last->first;
        free_.erase(last);
        top_ = off + bytes;
        return off;
      }
    }
    int64_t off = top_;
    top_ += bytes;
    return off;
  }
  void release(int64_t off, int64_t bytes) {
    bytes = round_up(bytes);
    auto it = free_.emplace(off, bytes).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t top() const { return top_; }

 private:
  std::map<int64_t, int64_t> free_;
  int64_t top_ = 0;
};

void prepare(const ir::Graph& g, Step& s) {
  switch (ir::op_info(s.n->op).kind) {
    case ir::OpKind::kUnary:
    case ir::OpKind::kBinary:
    case ir::OpKind::kElementwise: return prepare_elementwise(g, s);
    case ir::OpKind::kLeaf: return prepare_leaf(g, s);
    case ir::OpKind::kShape: return prepare_shape(g, s);
    case ir::OpKind::kReduce: return prepare_reduce(g, s);
    case ir::OpKind::kDot: return prepare_dot(g, s);
    case ir::OpKind::kRng: return prepare_rng(g, s);
    case ir::OpKind::kIndex: return prepare_index(g, s);
    case ir::OpKind::kSort: return prepare_sort(g, s);
    case ir::OpKind::kScan: return prepare_scan(g, s);
    case ir::OpKind::kLinalg: return prepare_linalg(g, s);
    case ir::OpKind::kWindow: return prepare_window(g, s);
  }
}

// Whether node n is an f32 dot/convolution at DEFAULT precision that rounds its operands.
bool rounds_operands(const ir::Graph& g, const ir::Node& n, bool dots) {
  if (n.is_param || n.attrs.precision != ir::Precision::Default) return false;
  if (n.op != ir::OpCode::Convolution && !(dots && n.op == ir::OpCode::Dot)) return false;
  return g.nodes()[n.operands[0]].dtype == ir::DType::F32 && g.nodes()[n.operands[1]].dtype == ir::DType::F32;
}

// A dot's lhs as [batch, m, k] (m = 0 when k or the batch is empty).
struct DotRows {
  int64_t batch = 1, m = 0, k = 1;
};
DotRows dot_rows(const ir::Graph& g, const ir::Node& n) {
  const ir::Node& l = g.nodes()[n.operands[0]];
  DotRows r;
  for (int64_t d : n.attrs.lhs_batch) r.batch *= l.shape[d];
  for (int64_t d : n.attrs.lhs_contract) r.k *= l.shape[d];
  r.m = r.batch * r.k == 0 ? 0 : ir::numel(l.shape) / (r.batch * r.k);
  return r;
}

// Rebuilds g into `out` node by node: parameters as they are, every other node as
// `node(i, n, ops, map)` returns it (ops: n's operands mapped into `out`; map: the values so
// far), then the outputs. The graph rewrites below differ only in `node`.
template <class F>
void rebuild(const ir::Graph& g, ir::Graph& out, F&& node) {
  const auto& nodes = g.nodes();
  std::vector<ir::Value> map(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    if (n.is_param) {
      map[i] = out.param(n.dtype, n.shape);
      continue;
    }
    std::vector<ir::Value> ops;
    for (int o : n.operands) ops.push_back(map[o]);
    map[i] = node(static_cast<int>(i), n, std::move(ops), map);
  }
  std::vector<ir::Value> outs;
  for (ir::Value v : g.outputs()) outs.push_back(map[v.id]);
  out.set_outputs(std::move(outs));
}

// PlanOptions::round_operands_in_graph: the graph rebuilt with explicit operand rounding.
// Without a native bf16 GEMM: dot(convert(convert(x, bf16), f32), ...) at HIGHEST, so the
// rounding fuses into the loop producing x. With one: dot(convert(x, bf16), ...) with an f32
// result (attrs.ivalue = 1): the producing loop writes the bf16 copy the GEMM reads, in
// place of a separate packing pass per operand. Returns false (and leaves `out` alone) when
// no node needs it.
bool round_operands(const ir::Graph& g, ir::Graph& out) {
  bool native = gemm_has_bf16();
  // Dots of few rows stay DEFAULT either way: gemm_small rounds them while reading.
  auto few_rows = [&](const ir::Node& n) {
    if (n.op != ir::OpCode::Dot) return false;
    DotRows r = dot_rows(g, n);
    return gemm_small_takes(r.batch, r.m, r.k);
  };
  auto mixed = [&](const ir::Node& n) {  // rounds_operands first: it rejects parameters
    return native && rounds_operands(g, n, true) && (n.op == ir::OpCode::Dot ? !few_rows(n) : conv_mixed_takes(n));
  };
  auto rewrite = [&](const ir::Node& n) { return rounds_operands(g, n, !native) && !few_rows(n); };
  bool any = false;
  for (const ir::Node& n : g.nodes()) any |= rewrite(n) || mixed(n);
  if (!any) return false;
  rebuild(g, out, [&](int, const ir::Node& n, std::vector<ir::Value> ops, const std::vector<ir::Value>&) {
    ir::Attrs attrs = n.attrs;
    if (mixed(n)) {
      for (ir::Value& v : ops) v = out.convert(v, ir::DType::BF16);
      attrs.ivalue = 1;
    } else if (rewrite(n)) {
      for (ir::Value& v : ops) v = out.convert(out.convert(v, ir::DType::BF16), ir::DType::F32);
      attrs.precision = ir::Precision::Highest;
    }
    return out.op(n.op, std::move(ops), std::move(attrs), n.shape, n.dtype);
  });
  return true;
}

// A broadcast (kFusedGather) lives in one cluster, the first that absorbed it; fusible readers
// in other clusters then read its whole result from memory, which that cluster must write
// (a constant splat shared by four layers' GELU loops: three 2 MB arrays written and read
// back per layer). A gather reads its operand from memory anyway, so each such reader gets
// its own copy of the broadcast, absorbed into its own loop. Returns false (and leaves
// `out` alone) when no reader needs one.
bool split_shared_gathers(const ir::Graph& g, ir::Graph& out) {
  const auto& nodes = g.nodes();
  int nv = static_cast<int>(nodes.size());
  std::vector<int> cluster(nv, -1);
  std::vector<char> anchor;
  std::vector<ir::Cluster> cs = ir::partition(g);
  for (size_t c = 0; c < cs.size(); ++c) {
    for (int v : cs[c].main) cluster[v] = static_cast<int>(c);
    if (cs[c].sink >= 0) cluster[cs[c].sink] = static_cast<int>(c);
    for (int v : cs[c].post) cluster[v] = static_cast<int>(c);
    anchor.push_back(cs[c].anchor);
  }
  // Readers (node, operand slot) that get their own copy.
  std::vector<std::vector<int>> copy_slots(nv);
  bool any = false;
  for (int u = 0; u < nv; ++u) {
    const ir::Node& n = nodes[u];
    if (n.is_param || cluster[u] < 0 || anchor[cluster[u]] ||
        !(ir::has_trait(n.op, ir::kFusible) || ir::has_trait(n.op, ir::kFusedSink)))
      continue;
    for (size_t j = 0; j < n.operands.size(); ++j) {
      int v = n.operands[j];
      if (nodes[v].is_param || !ir::has_trait(nodes[v].op, ir::kFusedGather) || cluster[v] == cluster[u]) continue;
      copy_slots[u].push_back(static_cast<int>(j));
      any = true;
    }
  }
  if (!any) return false;
  rebuild(g, out, [&](int i, const ir::Node& n, std::vector<ir::Value> ops, const std::vector<ir::Value>& map) {
    for (int j : copy_slots[i]) {
      const ir::Node& b = nodes[n.operands[j]];
      ops[j] = out.copy_of(b, {map[b.operands[0]]});
    }
    return out.op(n.op, std::move(ops), n.attrs, n.shape, n.dtype);
  });
  return true;
}

// A constant of more than one element (lowerings build them for `1 - w`, `|w| < 0.5` over a
// whole tensor) is a leaf: a step fills it in memory on every run (or, up to
// kMaxFoldedConstantBytes, once per plan) and each fused loop reading it streams it back.
// As the broadcast of a 0-d constant it joins its readers' loops instead: a scalar operand
// (kSplat) or a per-tile gather, with no pass over memory. Returns false (and leaves `out`
// alone) when the graph has none.
bool splat_constants(const ir::Graph& g, ir::Graph& out) {
  const auto& nodes = g.nodes();
  auto shaped = [](const ir::Node& n) { return !n.is_param && n.op == ir::OpCode::Constant && ir::numel(n.shape) > 1; };
  if (std::none_of(nodes.begin(), nodes.end(), shaped)) return false;
  rebuild(g, out, [&](int, const ir::Node& n, std::vector<ir::Value> ops, const std::vector<ir::Value>&) {
    if (shaped(n)) return out.broadcast(out.op(ir::OpCode::Constant, {}, n.attrs, {}, n.dtype), n.shape, {});
    return out.op(n.op, std::move(ops), n.attrs, n.shape, n.dtype);
  });
  return true;
}

}  // namespace

std::unique_ptr<Plan> make_plan(const ir::Graph& graph, const PlanOptions& opt) {
  graph.verify();
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  if (!opt.round_operands_in_graph || !round_operands(graph, p.graph)) p.graph = graph;
  if (opt.fuse) {
    ir::Graph splat;
    if (splat_constants(p.graph, splat)) p.graph = std::move(splat);
    ir::Graph split;
    if (split_shared_gathers(p.graph, split)) p.graph = std::move(split);
  }
  const auto& nodes = p.graph.nodes();
  int nv = static_cast<int>(nodes.size());
  p.slots.resize(nv);
  p.param_value.assign(p.graph.num_params(), -1);
  p.param_read_at_end.assign(p.graph.num_params(), false);

  std::vector<bool> live(nv, false);
  for (ir::Value v : p.graph.outputs()) live[v.id] = true;
  for (int i = nv - 1; i >= 0; --i)
    if (live[i])
      for (int o : nodes[i].operands) live[o] = true;

  std::vector<int> step_of(nv, -1);
  auto add_step = [&](Step&& s) {
    int k = static_cast<int>(p.steps.size());
    if (s.results.empty()) s.results.push_back(s.node);
    for (int r : s.results) {
      p.slots[r].where = Where::kArena;
      step_of[r] = k;
    }
    p.max_operands = std::max(p.max_operands, static_cast<int>(s.operands.size()));
    p.max_results = std::max(p.max_results, static_cast<int>(s.results.size()));
    p.steps.push_back(std::move(s));
  };
  // The live results of one custom call (equal operands and attrs but the result index)
  // run as one step, placed at the first of them the plan reaches (each consumer comes
  // after its own producer, so after that step); `grouped` marks the others.
  std::vector<bool> grouped(nv, false);
  auto call_results = [&](int i) {
    std::vector<int> r{i};
    const ir::Node& n = nodes[i];
    for (int j = 0; j < nv; ++j) {
      const ir::Node& m = nodes[j];
      if (j == i || !live[j] || step_of[j] >= 0 || grouped[j] || m.is_param ||
          m.op != ir::OpCode::CustomCall || m.operands != n.operands || m.attrs.ivalue != n.attrs.ivalue ||
          !std::equal(m.attrs.dims.begin() + 1, m.attrs.dims.end(), n.attrs.dims.begin() + 1, n.attrs.dims.end()))
        continue;
      grouped[j] = true;
      r.push_back(j);
    }
    return r;
  };
  auto node_step = [&](int i) {
    Step s;
    s.node = i;
    s.n = &nodes[i];
    s.operands = nodes[i].operands;
    if (nodes[i].op == ir::OpCode::CustomCall) s.results = call_results(i);
    prepare(p.graph, s);
    return s;
  };
  for (int i = 0; i < nv; ++i) {
    const ir::Node& n = nodes[i];
    ValueSlot& slot = p.slots[i];
    slot.root = i;
    slot.bytes = ir::numel(n.shape) * static_cast<int64_t>(ir::dtype_size(n.dtype));
    if (!live[i]) continue;
    if (n.is_param) {
      slot.where = Where::kParam;
      p.params.push_back(i);
      p.param_value[n.param_index] = i;
      continue;
    }
    if (n.op == ir::OpCode::Reshape || n.op == ir::OpCode::OptimizationBarrier) {
      slot.where = Where::kAlias;
      slot.root = p.slots[n.operands[0]].root;
      continue;
    }
    if (ir::op_info(n.op).kind == ir::OpKind::kLeaf && slot.bytes <= kMaxFoldedConstantBytes) {
      // Leaves are computed once here and shared read-only by every run.
      Step s = node_step(i);
      AlignedBuffer buf = aligned_buffer(slot.bytes);
      s.fn(KernelArgs{s, nullptr, buf.get(), nullptr});
      slot.where = Where::kConst;
      slot.data = buf.get();
      p.constants.push_back(std::move(buf));
      continue;
    }
    // Without fusion every node is a step, in node order; with fusion leaves come first
    // (no operands) and the rest follows the partition's cluster order below.
    if (grouped[i]) continue;
    if (!opt.fuse || ir::op_info(n.op).kind == ir::OpKind::kLeaf) add_step(node_step(i));
  }
  if (opt.fuse) {
    // Consecutive fused loops over the same rows become one row chain (fused.cpp).
    std::vector<int> root(nv);
    for (int i = 0; i < nv; ++i) root[i] = p.slots[i].root;
    std::vector<Step> chain;
    int lone = -1;  // the chain's only part is this lone reduction's loop: run it as a node
    auto flush = [&] {
      if (chain.size() == 1) add_step(lone >= 0 ? node_step(lone) : std::move(chain[0]));
      if (chain.size() > 1) {
        Step s;
        prepare_chain(std::move(chain), s);
        add_step(std::move(s));
      }
      chain.clear();
      lone = -1;
    };
    for (const ir::Cluster& c : ir::partition(p.graph)) {
      // A lone row reduction (softmax's max) may start a chain: planned as a one-member loop.
      bool lone_sink = opt.chain_rows && !c.anchor && c.size() == 1 && c.sink >= 0;
      if (c.anchor || (c.size() < 2 && !lone_sink)) {
        flush();
        for (int v : c.main)
          if (!grouped[v]) add_step(node_step(v));
        if (c.sink >= 0) add_step(node_step(c.sink));
        continue;
      }
      Step s;
      prepare_fused(p.graph, c, s);
      if (!(opt.chain_rows && can_chain(p.graph, chain, s, root))) flush();
      if (chain.empty() && lone_sink) lone = c.sink;
      chain.push_back(std::move(s));
    }
    flush();
  }

  static const bool chain_local = std::getenv("TORCH_TPU_CHAIN_LOCAL") == nullptr ||
                                  std::strcmp(std::getenv("TORCH_TPU_CHAIN_LOCAL"), "0") != 0;
  if (opt.fuse && opt.chain_rows && chain_local) {  // row chains' values read only inside the chain: tile scratch
    std::vector<char> read_outside(nv, 0);
    for (const Step& st : p.steps)
      for (int o : st.operands) read_outside[p.slots[o].root] = 1;
    for (ir::Value v : p.graph.outputs()) read_outside[p.slots[v.id].root] = 1;
    for (Step& st : p.steps) {
      if (!st.chain) continue;
      std::vector<int> before = st.results;
      localize_chain(p.graph, read_outside, st);
      for (int r : before)  // tile-local now: no arena memory (nor a release of any)
        if (std::find(st.results.begin(), st.results.end(), r) == st.results.end()) p.slots[r].where = Where::kDead;
    }
  }

  // Liveness: last step reading each root; output roots live to the end.
  int ns = static_cast<int>(p.steps.size());
  std::vector<int> last_use(nv, -1);
  for (int k = 0; k < ns; ++k)
    for (int o : p.steps[k].operands) last_use[p.slots[o].root] = k;
  for (ir::Value v : p.graph.outputs()) {
    int r = p.slots[v.id].root;
    p.out_root.push_back(r);
    last_use[r] = ns;
    if (p.slots[r].where == Where::kParam) p.param_read_at_end[nodes[r].param_index] = true;
  }

  // Outputs that may be written over an input they overlap (in-place ops: x.add_(y), an
  // optimizer's parameters and moments): the input is read by no later step nor passed
  // through, and the producing loop reads it element by element before writing.
  // (Only a parameter of the output's byte size can be exactly its memory.)
  p.out_overwrites.assign(p.out_root.size(), {});
  for (size_t i = 0; i < p.out_root.size(); ++i) {
    int r = p.out_root[i], k = step_of[r];
    if (k < 0 || p.slots[r].where != Where::kArena || !p.steps[k].fused) continue;
    const Step& s = p.steps[k];
    for (int pi = 0; pi < p.graph.num_params(); ++pi) {
      int v = p.param_value[pi];
      if (v < 0 || p.param_read_at_end[pi] || last_use[v] > k || p.slots[v].bytes != p.slots[r].bytes) continue;
      std::vector<char> target(s.operands.size(), 0);
      for (size_t j = 0; j < s.operands.size(); ++j) target[j] = p.slots[s.operands[j]].root == v;
      if (fused_may_overwrite(s, r, target)) p.out_overwrites[i].push_back(pi);
    }
  }

  ArenaAllocator arena;
  for (int v : p.params) p.slots[v].offset = arena.alloc(p.slots[v].bytes);  // gather regions
  std::vector<std::vector<int>> release_after(ns);
  for (int v = 0; v < nv; ++v)
    if (p.slots[v].where == Where::kArena && last_use[v] < ns)
      release_after[std::max(last_use[v], step_of[v])].push_back(v);
  p.scratch_offset.assign(ns, 0);
  for (int k = 0; k < ns; ++k) {
    for (int r : p.steps[k].results) p.slots[r].offset = arena.alloc(p.slots[r].bytes);
    if (p.steps[k].scratch_bytes > 0) {
      p.scratch_offset[k] = arena.alloc(p.steps[k].scratch_bytes);
      arena.release(p.scratch_offset[k], p.steps[k].scratch_bytes);
    }
    for (int v : release_after[k]) arena.release(p.slots[v].offset, p.slots[v].bytes);
  }
  p.arena_bytes = arena.top();
  return plan;
}

}  // namespace torch_tpu::host
