// The fusion partition (see fuse.h). Greedy over nodes in topological order: a fusible
// node joins the cluster of an operand when the iteration spaces match and no cycle
// between clusters results, merging the clusters of several operands when it can. The
// cluster DAG is kept as successor lists over union-find roots; cycle checks are DFS.
#include "ir/passes/fuse.h"

#include <algorithm>
#include <queue>

#include "base/error.h"

namespace torch_tpu::ir {
namespace {

// kPending: a kFusedGather node waiting for its consumer, which absorbs it into its own
// loop (so a broadcast is never materialized when its reader fuses).
enum class Role : uint8_t { kDead, kFree, kPending, kMain, kSink, kPost, kAnchor };

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// A kFusible shape op only reinterprets row-major memory (reshape): the runtime aliases it.
bool is_alias_op(OpCode op) {
  return op_info(op).kind == OpKind::kShape && has_trait(op, kFusible);
}

class Partitioner {
 public:
  explicit Partitioner(const Graph& g) : g_(g), nodes_(g.nodes()) {}

  std::vector<Cluster> run() {
    int n = static_cast<int>(nodes_.size());
    live_.assign(n, 0);
    for (Value v : g_.outputs()) live_[v.id] = 1;
    for (int i = n - 1; i >= 0; --i)
      if (live_[i])
        for (int o : nodes_[i].operands) live_[o] = 1;
    role_.assign(n, Role::kDead);
    home_.assign(n, -1);
    for (int i = 0; i < n; ++i)
      if (live_[i]) place(i);
    for (int i = 0; i < n; ++i)  // gathers no fusible node read (graph outputs)
      if (role_[i] == Role::kPending) materialize(i);
    return collect();
  }

 private:
  struct C {
    int parent = 0;
    int64_t main_numel = 0, sink_numel = 0;
    int sink = -1;
    bool anchor = false;
    std::vector<int> succ;  // clusters that read a value of this one (any id; use find)
  };

  int find(int c) {
    while (cs_[c].parent != c) c = cs_[c].parent = cs_[cs_[c].parent].parent;
    return c;
  }
  // The cluster whose memory value v lives in (a free alias: its source's), or -1.
  int root_of(int v) { return home_[v] < 0 ? -1 : find(home_[v]); }
  bool member(int v) { return role_[v] >= Role::kMain && role_[v] <= Role::kPost; }

  int new_cluster(int v, Role r, int64_t main_numel) {
    C c;
    c.parent = static_cast<int>(cs_.size());
    c.main_numel = main_numel;
    c.anchor = r == Role::kAnchor;
    cs_.push_back(std::move(c));
    stamp_.push_back(0);
    int id = cs_.back().parent;
    if (v >= 0) {
      home_[v] = id;
      role_[v] = r;
      add_edges(v);
    }
    return id;
  }

  void add_edges(int v) {
    int c = find(home_[v]);
    for (int o : nodes_[v].operands) {
      int r = root_of(o);
      if (r >= 0 && r != c) cs_[r].succ.push_back(c);
    }
  }

  // True if some cluster in `to` is reachable from `from` over >= 1 edge.
  bool reaches(int from, const std::vector<int>& to) {
    if (to.empty()) return false;
    ++epoch_;
    std::vector<int> stack{from};
    stamp_[from] = epoch_;
    while (!stack.empty()) {
      int c = stack.back();
      stack.pop_back();
      for (int s : cs_[c].succ) {
        s = find(s);
        if (s == c) continue;
        if (contains(to, s)) return true;
        if (stamp_[s] != epoch_) {
          stamp_[s] = epoch_;
          stack.push_back(s);
        }
      }
    }
    return false;
  }

  // The stage v would take in the cluster of member q (its operand), or kDead.
  Role stage_in(int v, int q) {
    const Node& n = nodes_[v];
    const C& c = cs_[find(home_[q])];
    if (!member(q) || c.anchor) return Role::kDead;
    if (has_trait(n.op, kFusedSink))
      return role_[q] == Role::kMain && c.sink < 0 && reduces_trailing_dims(g_, n) ? Role::kSink
                                                                                   : Role::kDead;
    int64_t nv = numel(n.shape);
    if (role_[q] == Role::kMain && nv == c.main_numel) return Role::kMain;
    if ((role_[q] == Role::kSink || role_[q] == Role::kPost) && nv == c.sink_numel)
      return Role::kPost;
    return Role::kDead;
  }

  // Whether v can join the union of clusters `set` (roots) at stage r without a cycle.
  bool can_fuse(int v, const std::vector<int>& set, Role r) {
    const Node& n = nodes_[v];
    int64_t nv = numel(n.shape);
    int sinks = 0;
    for (int c : set) {
      sinks += cs_[c].sink >= 0;
      if (r == Role::kMain && cs_[c].main_numel != nv) return false;
    }
    if (sinks > (r == Role::kSink ? 0 : 1) || (r == Role::kPost && set.size() != 1)) return false;
    std::vector<int> ext;  // clusters of operands read from memory
    for (int o : n.operands) {
      if (role_[o] == Role::kPending) {  // absorbed or materialized: reads its operand
        int rg = root_of(nodes_[o].operands[0]);
        if (rg >= 0 && contains(set, rg)) return false;
        if (rg >= 0 && !contains(ext, rg)) ext.push_back(rg);
        continue;
      }
      int ro = root_of(o);
      if (ro < 0) continue;
      if (!contains(set, ro)) {
        if (!contains(ext, ro)) ext.push_back(ro);
        continue;
      }
      if (!member(o)) return false;  // a free alias of a member's memory
      bool ok = r == Role::kPost ? (role_[o] == Role::kSink || role_[o] == Role::kPost)
                                 : role_[o] == Role::kMain;
      if (!ok || (r != Role::kSink && numel(nodes_[o].shape) != nv)) return false;
    }
    for (int c : set) {
      std::vector<int> others;
      for (int d : set)
        if (d != c) others.push_back(d);
      if (reaches(c, others) || reaches(c, ext)) return false;
    }
    return true;
  }

  void commit(int v, const std::vector<int>& set, Role r) {
    int c = set[0];
    for (size_t i = 1; i < set.size(); ++i) {
      C& o = cs_[set[i]];
      o.parent = c;
      if (o.sink >= 0) {
        cs_[c].sink = o.sink;
        cs_[c].sink_numel = o.sink_numel;
      }
      cs_[c].succ.insert(cs_[c].succ.end(), o.succ.begin(), o.succ.end());
      o.succ.clear();
    }
    place_member(v, c, r);
  }

  // Puts v into cluster c at stage r, absorbing its pending gather operands first.
  void place_member(int v, int c, Role r) {
    absorb_pending(v, c, r);
    home_[v] = c;
    role_[v] = r;
    if (r == Role::kSink) {
      cs_[c].sink = v;
      cs_[c].sink_numel = numel(nodes_[v].shape);
    }
    add_edges(v);
  }

  void absorb_pending(int v, int c, Role r) {
    int64_t domain = r == Role::kPost ? cs_[c].sink_numel : cs_[c].main_numel;
    for (int o : nodes_[v].operands) {
      if (role_[o] != Role::kPending) continue;
      if (numel(nodes_[o].shape) == domain && !cs_[c].anchor) {
        home_[o] = c;
        role_[o] = r == Role::kPost ? Role::kPost : Role::kMain;
        add_edges(o);
      } else {
        materialize(o);
      }
    }
  }
  // A broadcast no reader absorbed becomes a loop of its own; a transpose or slice runs as
  // its own kernel (the layout kernels beat a gather loop at that).
  void materialize(int v) {
    bool loop = has_trait(nodes_[v].op, kFusedGather);
    new_cluster(v, loop ? Role::kMain : Role::kAnchor, numel(nodes_[v].shape));
  }

  void place(int v) {
    const Node& n = nodes_[v];
    if (n.is_param || n.operands.empty()) {
      role_[v] = Role::kFree;  // parameters and leaves: memory, or folded by the runtime
      return;
    }
    if (fuses_as_gather(g_, n)) {
      // A gather of a pending gather (a broadcast of a broadcast, as fused windows make): the
      // inner one gets its cluster now, as it would at the end (a gather reads memory), so the
      // edge to whoever absorbs this one exists before the cycle checks need it.
      if (role_[n.operands[0]] == Role::kPending) materialize(n.operands[0]);
      role_[v] = Role::kPending;
      return;
    }
    if (is_alias_op(n.op)) {
      if (role_[n.operands[0]] == Role::kPending) materialize(n.operands[0]);
      int q = n.operands[0];
      if (member(q)) {  // a view of a member: same tile, same stage
        home_[v] = home_[q];
        role_[v] = role_[q] == Role::kMain ? Role::kMain : Role::kPost;
      } else {  // an alias of memory (a parameter, leaf or an anchor's result)
        home_[v] = home_[q];
        role_[v] = Role::kFree;
      }
      return;
    }
    bool fusible = has_trait(n.op, kFusible), sink = has_trait(n.op, kFusedSink);
    if (fusible || sink) {
      // Greedily collect operand clusters that v can read in-tile, then join them all.
      std::vector<int> set;
      Role r = Role::kDead;
      for (int o : n.operands) {
        if (!member(o)) continue;
        Role s = stage_in(v, o);
        int c = find(home_[o]);
        if (s == Role::kDead || contains(set, c) || (r != Role::kDead && (s != r || s != Role::kMain)))
          continue;
        std::vector<int> trial = set;
        trial.push_back(c);
        if (can_fuse(v, trial, s)) {
          set = std::move(trial);
          r = s;
        }
      }
      if (r != Role::kDead) return commit(v, set, r);
    }
    if (fusible || (sink && reduces_trailing_dims(g_, n))) {
      int c = new_cluster(-1, Role::kMain, numel(nodes_[n.operands[0]].shape));
      if (fusible) cs_[c].main_numel = numel(n.shape);
      return place_member(v, c, fusible ? Role::kMain : Role::kSink);
    }
    for (int o : n.operands)
      if (role_[o] == Role::kPending) materialize(o);
    new_cluster(v, Role::kAnchor, numel(n.shape));
  }

  std::vector<Cluster> collect() {
    int n = static_cast<int>(nodes_.size());
    std::vector<int> index(cs_.size(), -1);
    std::vector<Cluster> out;
    std::vector<int> root_of_cluster;
    for (int v = 0; v < n; ++v) {
      if (!member(v) && role_[v] != Role::kAnchor) continue;
      int r = find(home_[v]);
      if (index[r] < 0) {
        index[r] = static_cast<int>(out.size());
        out.emplace_back();
        out.back().anchor = cs_[r].anchor;
        out.back().main_numel = cs_[r].main_numel;
        out.back().sink_numel = cs_[r].sink >= 0 ? cs_[r].sink_numel : 0;
        root_of_cluster.push_back(r);
      }
      Cluster& c = out[index[r]];
      if (role_[v] == Role::kSink) c.sink = v;
      else if (role_[v] == Role::kPost) c.post.push_back(v);
      else c.main.push_back(v);
    }
    // Inputs, outputs and the cluster DAG.
    int nc = static_cast<int>(out.size());
    auto cluster_of = [&](int v) { return member(v) || role_[v] == Role::kAnchor ? index[find(home_[v])] : -1; };
    std::vector<char> escapes(n, 0);
    for (Value v : g_.outputs()) escapes[v.id] = 1;
    std::vector<std::vector<int>> succ(nc);
    std::vector<int> indeg(nc, 0);
    for (int v = 0; v < n; ++v) {
      if (!live_[v]) continue;
      int cv = cluster_of(v);
      for (int o : nodes_[v].operands) {
        if (cluster_of(o) != cv || cv < 0) escapes[o] = 1;
        if (cv < 0) continue;
        if (cluster_of(o) != cv) {
          Cluster& c = out[cv];
          if (!contains(c.inputs, o)) c.inputs.push_back(o);
          int r = root_of(o);
          int co = r < 0 ? -1 : index[r];
          if (co >= 0 && co != cv && !contains(succ[co], cv)) {
            succ[co].push_back(cv);
            ++indeg[cv];
          }
        }
      }
    }
    for (int v = 0; v < n; ++v)
      if (escapes[v] && cluster_of(v) >= 0) out[cluster_of(v)].outputs.push_back(v);
    for (Cluster& c : out) std::sort(c.inputs.begin(), c.inputs.end());
    // Kahn's order, ties broken by the first member (deterministic, close to node order).
    std::vector<Cluster> sorted;
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < nc; ++i)
      if (indeg[i] == 0) ready.push(i);
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      sorted.push_back(std::move(out[i]));
      for (int s : succ[i])
        if (--indeg[s] == 0) ready.push(s);
    }
    TPU_CHECK(static_cast<int>(sorted.size()) == nc, "[fuse] cycle between clusters");
    return sorted;
  }

  const Graph& g_;
  const NodeList& nodes_;
  std::vector<char> live_;
  std::vector<Role> role_;
  std::vector<int> home_;  // node -> cluster id (any id of its set; use find), -1 if none
  std::vector<C> cs_;
  std::vector<unsigned> stamp_;
  unsigned epoch_ = 0;
};

}  // namespace

bool reduces_trailing_dims(const Graph& g, const Node& n) {
  const Node& x = g.nodes()[n.operands[0]];
  if (numel(x.shape) == 0) return false;
  bool seen_reduced = false;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (x.shape[i] == 1) continue;
    bool red = std::find(n.attrs.dims.begin(), n.attrs.dims.end(), static_cast<int64_t>(i)) !=
               n.attrs.dims.end();
    if (red) seen_reduced = true;
    else if (seen_reduced) return false;
  }
  return true;
}

bool gather_map(const Graph& g, const Node& n, GatherMap& m) {
  if (n.is_param || n.operands.size() != 1) return false;
  const Node& x = g.nodes()[n.operands[0]];
  size_t r = n.shape.size();
  std::vector<int64_t> xst(x.shape.size(), 1), src(r, 0);
  for (size_t i = x.shape.size(); i-- > 1;) xst[i - 1] = xst[i] * x.shape[i];
  m.base = 0;
  if (has_trait(n.op, kFusedGather)) {  // broadcast_in_dim: operand dim i is result dim dims[i]
    if (n.attrs.dims.size() != x.shape.size()) return false;
    for (size_t i = 0; i < n.attrs.dims.size(); ++i)
      if (x.shape[i] != 1) src[static_cast<size_t>(n.attrs.dims[i])] = xst[i];
  } else if (n.op == OpCode::Transpose) {  // result dim d is operand dim perm[d]
    if (n.attrs.dims.size() != r || x.shape.size() != r) return false;
    for (size_t d = 0; d < r; ++d) src[d] = xst[static_cast<size_t>(n.attrs.dims[d])];
  } else if (n.op == OpCode::Slice) {
    if (n.attrs.start.size() != r || n.attrs.stride.size() != r || x.shape.size() != r) return false;
    for (size_t d = 0; d < r; ++d) {
      src[d] = xst[d] * n.attrs.stride[d];
      m.base += n.attrs.start[d] * xst[d];
    }
  } else {
    return false;
  }
  m.shape.clear();
  m.stride.clear();
  for (size_t d = 0; d < r; ++d) {
    if (n.shape[d] == 1) continue;
    if (!m.shape.empty() && m.stride.back() == src[d] * n.shape[d]) {
      m.shape.back() *= n.shape[d];
      m.stride.back() = src[d];
      continue;
    }
    m.shape.push_back(n.shape[d]);
    m.stride.push_back(src[d]);
  }
  if (m.shape.empty()) {
    m.shape = {1};
    m.stride = {0};
  }
  return true;
}

bool fuses_as_gather(const Graph& g, const Node& n) {
  if (n.is_param) return false;
  if (has_trait(n.op, kFusedGather)) return true;
  if (n.op != OpCode::Transpose && n.op != OpCode::Slice) return false;
  GatherMap m;
  return numel(n.shape) > 0 && gather_map(g, n, m) && m.stride.back() == 1 && m.shape.back() >= 8;
}

std::vector<Cluster> partition(const Graph& g) { return Partitioner(g).run(); }

int cluster_count(const Graph& g) { return static_cast<int>(partition(g).size()); }

}  // namespace torch_tpu::ir
