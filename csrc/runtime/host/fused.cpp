// Fused loops: one pass over memory per fused cluster of ir::partition. The cluster's
// iteration space is cut into tiles (a few thousand elements, or whole reduction rows);
// per tile, each member is evaluated into a small per-thread scratch buffer that stays in
// cache, by the same RangeFn loop the eager kernel runs (so every intermediate is rounded
// to its dtype exactly as unfused). Broadcasts read their operand through a precomputed
// index map; a reduction sink reduces the tile's rows with the eager reduction code; only
// members read outside the cluster (or graph outputs) are written to memory, directly.
// Tiles are spread over threads; no result depends on the thread count.
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "ir/passes/fuse.h"
#include "runtime/host/kernels.h"
#include "runtime/host/parallel.h"
#include "runtime/host/plan.h"

namespace torch_tpu::host {

namespace {
constexpr int64_t kTileElems = 4096;  // elementwise tile (see docs/decisions/fused-host-kernels.md)
constexpr int64_t kRowMax = 8192;     // longer reduction rows are reduced in segments
}

struct FusedLoop {
  enum class Src : uint8_t { kMember, kInput, kScalar };  // tile / input at b / input at 0
  struct Operand {
    Src src;
    int index;
  };
  // kSplat: a broadcast of one element that every reader takes as a kScalar operand (no pass).
  // kDead: folded into its one reader (no pass; see fold_round_trips).
  enum class Kind : uint8_t { kRange, kGather, kAlias, kSink, kSplat, kDead };
  struct Member {
    Kind kind;
    int stage = 0;             // 0 main, 1 sink, 2 post
    Step step;                 // kRange: the prepared elementwise step
    std::vector<Operand> ops;  // kRange / kSink operands
    int alias_of = -1;         // kAlias: the member whose tile it shares
    int slot = -1;             // scratch slot, or -1
    int result = -1;           // index into the fused step's results, or -1
    int64_t elem = 0;
    // kGather: input index, and the source strides of the (simplified) result dims from
    // element `base` (ir::gather_map: a broadcast, transpose or slice).
    int input = -1;
    int rank = 0;
    int64_t base = 0;
    int64_t shape[kMaxRank] = {}, stride[kMaxRank] = {};
  };
  std::vector<Member> members;  // main, then the sink, then post (each in node order)
  std::vector<int64_t> in_elem;
  RowReduce red;
  int sink = -1;               // member index of the sink
  int64_t n_main = 0, rows = 0, row_len = 0;
  int64_t rows_per_tile = 0;   // row mode: rows of at most kRowMax, whole rows per tile
  bool long_rows = false;      // segments at reduce_split points, or kReduceBlock blocks
  bool blocks = false;         // one row longer than 2 * kReduceBlock: blocks + combine
  int64_t main_tile = 0, post_tile = 0;
  int num_slots = 0;
  int64_t slot_bytes = 0;
  int64_t sink_buf_offset = 0;  // long rows, sink not stored: its buffer in step scratch
};

namespace {

using Loop = FusedLoop;

// Copies elements [b, b + len) of a broadcast, transpose or slice result from its operand
// `src`, run by run along the last dim (the source offset stepped, not recomputed per run;
// short contiguous runs, a head's 32 values, copied by a loop the compiler vectorizes rather
// than a memcpy call each).
template <class T>
void gather_t(const Loop::Member& m, const T* src, int64_t b, int64_t len, T* out) {
  const int r = m.rank;
  int64_t idx[kMaxRank], rem = b;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % m.shape[d];
    rem /= m.shape[d];
  }
  const int64_t inner = m.shape[r - 1], st = m.stride[r - 1];
  int64_t off = m.base;
  for (int d = 0; d < r; ++d) off += idx[d] * m.stride[d];
  for (int64_t done = 0; done < len;) {
    const int64_t count = std::min(inner - idx[r - 1], len - done);
    const T* __restrict s = src + off;
    T* __restrict o = out + done;
    if (st == 1) {
      if (count >= 64) std::memcpy(o, s, count * sizeof(T));
      else
        for (int64_t i = 0; i < count; ++i) o[i] = s[i];
    } else if (st == 0) {
      std::fill(o, o + count, *s);
    } else {
      for (int64_t i = 0; i < count; ++i) o[i] = s[i * st];
    }
    done += count;
    if (done >= len) break;
    off -= idx[r - 1] * st;  // the next run: the row's start, one step along the outer dims
    idx[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      off += m.stride[d];
      if (++idx[d] < m.shape[d]) break;
      off -= m.shape[d] * m.stride[d];
      idx[d] = 0;
    }
  }
}

void gather(const Loop::Member& m, const void* src, int64_t b, int64_t len, void* out) {
  switch (m.elem) {
    case 1: return gather_t(m, static_cast<const uint8_t*>(src), b, len, static_cast<uint8_t*>(out));
    case 2: return gather_t(m, static_cast<const uint16_t*>(src), b, len, static_cast<uint16_t*>(out));
    case 4: return gather_t(m, static_cast<const uint32_t*>(src), b, len, static_cast<uint32_t*>(out));
    default: return gather_t(m, static_cast<const uint64_t*>(src), b, len, static_cast<uint64_t*>(out));
  }
}

// Per-thread state of a running loop: member tile pointers and scratch.
struct TileCtx {
  const Loop& L;
  const void* const* in;
  void* const* outs;
  std::byte* scratch;
  void** ptr;
};

const void* operand_ptr(const TileCtx& c, const Loop::Operand& o, int64_t b) {
  switch (o.src) {
    case Loop::Src::kMember: return c.ptr[o.index];
    case Loop::Src::kInput:
      return static_cast<const char*>(c.in[o.index]) + b * c.L.in_elem[o.index];
    default: return c.in[o.index];
  }
}

// Where member m's elements [b, ...) of this tile go.
void* member_out(const TileCtx& c, const Loop::Member& m, int64_t b) {
  if (m.kind == Loop::Kind::kAlias) return c.ptr[m.alias_of];
  if (m.result >= 0) return static_cast<char*>(c.outs[m.result]) + b * m.elem;
  return c.scratch + m.slot * c.L.slot_bytes;
}

// Evaluates the members of `stage` over elements [b, b + len) of that stage's space.
void eval_stage(const TileCtx& c, int stage, int64_t b, int64_t len) {
  const void* ops[4];
  for (size_t k = 0; k < c.L.members.size(); ++k) {
    const Loop::Member& m = c.L.members[k];
    if (m.stage != stage || m.kind == Loop::Kind::kSplat || m.kind == Loop::Kind::kDead) continue;
    void* out = member_out(c, m, b);
    c.ptr[k] = out;
    if (m.kind == Loop::Kind::kRange) {
      for (size_t j = 0; j < m.ops.size(); ++j) ops[j] = operand_ptr(c, m.ops[j], b);
      m.step.range(m.step, ops, out, 0, len);
    } else if (m.kind == Loop::Kind::kGather) {
      gather(m, c.in[m.input], b, len, out);
    }
  }
}

std::byte* thread_scratch(int64_t bytes) {
  thread_local AlignedBuffer buf;
  thread_local int64_t cap = 0;
  if (bytes > cap) {
    buf = aligned_buffer(static_cast<size_t>(bytes));
    cap = bytes;
  }
  return buf.get();
}

// Runs `body(ctx, begin, end)` over [0, n) items on threads, each thread with its own
// tile pointers and scratch.
template <class F>
void for_tiles(const KernelArgs& a, int64_t n, int64_t grain, F&& body) {
  const Loop& L = *a.step.fused;
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    void* ptr[64];
    std::vector<void*> heap;
    void** p = ptr;
    if (L.members.size() > 64) {
      heap.resize(L.members.size());
      p = heap.data();
    }
    TileCtx c{L, a.in, a.outs, thread_scratch(L.num_slots * L.slot_bytes), p};
    body(c, b, e);
  });
}

// Reduces elements [off, off + n) of the row starting at flat index `row0` into acc,
// splitting where reduce_row would, so the result has the eager kernel's bits.
void reduce_segment(const TileCtx& c, const Loop::Member& sk, int64_t row0, int64_t off, int64_t n,
                    char* acc) {
  if (n <= kRowMax) {
    eval_stage(c, 0, row0 + off, n);
    c.L.red.partial(operand_ptr(c, sk.ops[0], row0 + off), n, off, acc);
    return;
  }
  int64_t h = reduce_split(n);
  alignas(16) char right[16];
  reduce_segment(c, sk, row0, off, h, acc);
  reduce_segment(c, sk, row0, off + h, n - h, right);
  c.L.red.merge(acc, right);
}

// Rows [a0, a0 + nr) of a loop with a short-row sink: main stage, row reductions, post stage.
void row_tile(const TileCtx& c, int64_t a0, int64_t nr) {
  const Loop& L = c.L;
  const Loop::Member& sk = L.members[L.sink];
  eval_stage(c, 0, a0 * L.row_len, nr * L.row_len);
  void* out = member_out(c, sk, a0);
  c.ptr[L.sink] = out;
  L.red.rows(operand_ptr(c, sk.ops[0], a0 * L.row_len), nr, L.row_len, out);
  eval_stage(c, 2, a0, nr);
}

void fused_kernel(const KernelArgs& a) {
  const Loop& L = *a.step.fused;
  int64_t cost = static_cast<int64_t>(L.members.size());
  if (L.sink < 0) {
    int64_t tiles = (L.n_main + L.main_tile - 1) / L.main_tile;
    int64_t grain = std::max<int64_t>(1, kParallelGrain / (L.main_tile * cost));
    for_tiles(a, tiles, grain, [&](const TileCtx& c, int64_t tb, int64_t te) {
      for (int64_t t = tb; t < te; ++t) {
        int64_t b = t * L.main_tile;
        eval_stage(c, 0, b, std::min(L.main_tile, L.n_main - b));
      }
    });
    return;
  }
  const Loop::Member& sk = L.members[L.sink];
  if (!L.long_rows) {
    int64_t tiles = (L.rows + L.rows_per_tile - 1) / L.rows_per_tile;
    int64_t grain = std::max<int64_t>(1, kParallelGrain / (L.rows_per_tile * L.row_len * cost));
    for_tiles(a, tiles, grain, [&](const TileCtx& c, int64_t tb, int64_t te) {
      for (int64_t t = tb; t < te; ++t) {
        int64_t a0 = t * L.rows_per_tile;
        row_tile(c, a0, std::min(L.rows_per_tile, L.rows - a0));
      }
    });
    return;
  }
  // Long rows: the sink values first (segments evaluated and reduced in a fixed order),
  // then the post stage over all rows.
  char* scratch = static_cast<char*>(a.scratch);
  char* sink_mem = static_cast<char*>(sk.result >= 0 ? a.outs[sk.result] : scratch + L.sink_buf_offset);
  if (L.blocks) {  // one row: kReduceBlock blocks in parallel, combined pairwise
    int64_t nb = (L.row_len + kReduceBlock - 1) / kReduceBlock;
    for_tiles(a, nb, 1, [&](const TileCtx& c, int64_t ib, int64_t ie) {
      for (int64_t j = ib; j < ie; ++j) {
        int64_t b = j * kReduceBlock, len = std::min(kReduceBlock, L.row_len - b);
        eval_stage(c, 0, b, len);
        L.red.partial(operand_ptr(c, sk.ops[0], b), len, b, scratch + 16 * j);
      }
    });
    L.red.combine(scratch, nb, sink_mem);
  } else {  // rows in parallel, each split where reduce_row splits it
    for_tiles(a, L.rows, 1, [&](const TileCtx& c, int64_t rb, int64_t re) {
      alignas(16) char acc[16];
      for (int64_t r = rb; r < re; ++r) {
        reduce_segment(c, sk, r * L.row_len, 0, L.row_len, acc);
        L.red.combine(acc, 1, sink_mem + r * sk.elem);
      }
    });
  }
  for_tiles(a, (L.rows + L.post_tile - 1) / L.post_tile, 1 << 20,
            [&](const TileCtx& c, int64_t tb, int64_t te) {
              for (int64_t t = tb; t < te; ++t) {
                int64_t a0 = t * L.post_tile;
                c.ptr[L.sink] = sink_mem + a0 * sk.elem;
                eval_stage(c, 2, a0, std::min(L.post_tile, L.rows - a0));
              }
            });
}

// The index map of gather node n (a broadcast, transpose or slice), simplified.
void plan_gather(const ir::Graph& g, const ir::Node& n, Loop::Member& m) {
  ir::GatherMap map;
  TPU_CHECK(ir::gather_map(g, n, map) && map.shape.size() <= static_cast<size_t>(kMaxRank),
            "[host fuse] no index map for a gather member");
  m.rank = static_cast<int>(map.shape.size());
  m.base = map.base;
  for (int d = 0; d < m.rank; ++d) {
    m.shape[d] = map.shape[static_cast<size_t>(d)];
    m.stride[d] = map.stride[static_cast<size_t>(d)];
  }
}

// Scratch slots for members not written to memory, reused once their last reader ran.
void assign_slots(Loop& L) {
  int nm = static_cast<int>(L.members.size());
  auto root = [&](int k) {
    while (L.members[k].kind == Loop::Kind::kAlias) k = L.members[k].alias_of;
    return k;
  };
  std::vector<int> last(nm, -1);
  for (int k = 0; k < nm; ++k) {
    last[k] = std::max(last[k], k);
    for (const Loop::Operand& o : L.members[k].ops)
      if (o.src == Loop::Src::kMember) last[root(o.index)] = k;
  }
  for (int k = 0; k < nm; ++k)  // the sink's readers run in the post stage, after it
    if (L.members[k].stage == 2)
      for (const Loop::Operand& o : L.members[k].ops)
        if (o.src == Loop::Src::kMember) last[root(o.index)] = std::max(last[root(o.index)], k);
  std::vector<int> free_slots;
  std::vector<std::vector<int>> release(nm);
  for (int k = 0; k < nm; ++k) {
    Loop::Member& m = L.members[k];
    if (m.kind != Loop::Kind::kAlias && m.kind != Loop::Kind::kSplat && m.kind != Loop::Kind::kDead && m.result < 0) {
      if (free_slots.empty()) free_slots.push_back(L.num_slots++);
      m.slot = free_slots.back();
      free_slots.pop_back();
      release[last[k]].push_back(m.slot);
    }
    for (int s : release[k]) free_slots.push_back(s);
  }
}

// convert(convert(x, bf16), f32) of f32 x, the intermediate read by nothing else: one pass
// that rounds x to bf16 in f32 (the host planner's DEFAULT operand rounding, where the dot's
// operand has no producing loop to fuse into), instead of a narrowing and a widening pass.
void fold_round_trips(const ir::Graph& g, Loop& L) {
  const auto& nodes = g.nodes();
  int nm = static_cast<int>(L.members.size());
  std::vector<int> readers(nm, 0);
  for (const Loop::Member& m : L.members) {
    for (const Loop::Operand& o : m.ops)
      if (o.src == Loop::Src::kMember) ++readers[o.index];
    if (m.kind == Loop::Kind::kAlias) ++readers[m.alias_of];
  }
  for (Loop::Member& m : L.members) {
    if (m.kind != Loop::Kind::kRange || m.step.n->op != ir::OpCode::Convert || m.step.n->dtype != ir::DType::F32 ||
        m.ops.size() != 1 || m.ops[0].src != Loop::Src::kMember)
      continue;
    Loop::Member& inner = L.members[m.ops[0].index];
    const ir::Node* in = inner.step.n;
    if (inner.kind != Loop::Kind::kRange || in->op != ir::OpCode::Convert || in->dtype != ir::DType::BF16 ||
        nodes[in->operands[0]].dtype != ir::DType::F32 || inner.result >= 0 || readers[m.ops[0].index] != 1 ||
        inner.stage != m.stage)
      continue;
    m.ops = inner.ops;
    m.step.range = &round_trip_bf16_range;
    inner.kind = Loop::Kind::kDead;
    inner.ops.clear();
  }
}

}  // namespace

// ---- Row chains --------------------------------------------------------------------------

struct FusedChain {
  struct Part {
    Step step;
    std::vector<std::pair<bool, int>> in;  // per operand: (an earlier part's result?, index)
    std::vector<int> out;                  // per result: index into the chain's results
  };
  std::vector<Part> parts;
  // Per chain result: in memory (ext >= 0: the step's result ext, KernelArgs::outs[ext]) or,
  // read only by later parts (localize_chain), in the thread's scratch at `off`: the tile's
  // rows only, `unit` bytes per row.
  struct Res {
    int ext;
    int64_t off, unit;
  };
  std::vector<Res> res;
  int64_t rows = 0, row_len = 0, rows_per_tile = 0, cost = 0;
  int max_ops = 0, max_results = 0, max_members = 0;
  int64_t scratch = 0;       // per-thread scratch bytes (the largest part's)
  int64_t scratch_all = 0;   // with the tile-local results after it
};

namespace {

void chain_kernel(const KernelArgs& a) {
  const FusedChain& C = *a.step.chain;
  int64_t tiles = (C.rows + C.rows_per_tile - 1) / C.rows_per_tile;
  int64_t grain = std::max<int64_t>(1, kParallelGrain / (C.rows_per_tile * C.row_len * C.cost));
  parallel_for(tiles, grain, [&](int64_t tb, int64_t te) {
    std::vector<const void*> ins(C.max_ops);
    std::vector<void*> outs(C.max_results), ptr(C.max_members), res(C.res.size());
    std::byte* scratch = thread_scratch(C.scratch_all);
    for (int64_t t = tb; t < te; ++t) {
      int64_t a0 = t * C.rows_per_tile, nr = std::min(C.rows_per_tile, C.rows - a0);
      // Loops index results by global row / element: a tile-local result's pointer is its
      // buffer moved back by the tile's first row (integer arithmetic: it points outside).
      for (size_t k = 0; k < C.res.size(); ++k) {
        const FusedChain::Res& r = C.res[k];
        res[k] = r.ext >= 0 ? a.outs[r.ext]
                            : reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(scratch + r.off) -
                                                      static_cast<std::uintptr_t>(a0 * r.unit));
      }
      for (const FusedChain::Part& part : C.parts) {
        const Loop& L = *part.step.fused;
        for (size_t j = 0; j < part.in.size(); ++j)
          ins[j] = part.in[j].first ? res[part.in[j].second] : a.in[part.in[j].second];
        for (size_t j = 0; j < part.out.size(); ++j) outs[j] = res[part.out[j]];
        TileCtx c{L, ins.data(), outs.data(), scratch, ptr.data()};
        if (L.sink >= 0) row_tile(c, a0, nr);
        else eval_stage(c, 0, a0 * C.row_len, nr * C.row_len);
      }
    }
  });
}

// Whether member reads of input `j` of loop L stay within the rows of the tile: inputs read
// at the loop's own index in a space of `numel` elements (rows x row_len in the main stage,
// rows in the post stage), broadcasts of a per-row value along the row, or the identity.
bool reads_row_local(const Loop& L, int j, int64_t numel, int64_t rows, int64_t row_len) {
  for (const Loop::Member& m : L.members) {
    if (m.kind == Loop::Kind::kGather) {
      if (m.input != j) continue;
      bool per_row = numel == rows && m.rank == 2 && m.shape[0] == rows && m.shape[1] == row_len &&
                     m.stride[0] == 1 && m.stride[1] == 0;
      bool identity = m.rank == 1 && m.stride[0] == 1 && m.base == 0 && m.shape[0] == numel &&
                      numel == (m.stage == 2 ? rows : rows * row_len);
      if (!per_row && !identity && rows != 1) return false;
      continue;
    }
    for (const Loop::Operand& o : m.ops) {
      if (o.src == Loop::Src::kMember || o.index != j) continue;
      if (o.src == Loop::Src::kScalar) {
        if (rows != 1) return false;
        continue;
      }
      int64_t space = m.stage == 2 ? rows : rows * row_len;
      if (numel != space) return false;
    }
  }
  return true;
}

}  // namespace

bool can_chain(const ir::Graph& g, const std::vector<Step>& parts, const Step& next, const std::vector<int>& root) {
  if (parts.empty() || !next.fused || !parts[0].fused) return false;
  const Loop& F = *parts[0].fused;
  if (F.sink < 0 || F.long_rows || F.row_len > kTileElems) return false;
  const Loop& L = *next.fused;
  int64_t rows = F.rows, R = F.row_len;
  if (L.sink >= 0 ? (L.long_rows || L.rows != rows || L.row_len != R) : L.n_main != rows * R) return false;
  for (size_t j = 0; j < next.operands.size(); ++j) {
    int v = root[next.operands[j]];
    bool inside = false;
    for (const Step& p : parts)
      inside |= std::find(p.results.begin(), p.results.end(), v) != p.results.end();
    if (inside && !reads_row_local(L, static_cast<int>(j), ir::numel(g.nodes()[v].shape), rows, R)) return false;
  }
  return true;
}

void prepare_chain(std::vector<Step> parts, Step& s) {
  auto C = std::make_shared<FusedChain>();
  const Loop& F = *parts[0].fused;
  C->rows = F.rows;
  C->row_len = F.row_len;
  C->rows_per_tile = F.rows_per_tile;
  s.results.clear();
  s.operands.clear();
  for (Step& st : parts) {
    FusedChain::Part part;
    const Loop& L = *st.fused;
    for (int v : st.operands) {
      int k = static_cast<int>(std::find(s.results.begin(), s.results.end(), v) - s.results.begin());
      if (k < static_cast<int>(s.results.size())) {
        part.in.push_back({true, k});
        continue;
      }
      k = static_cast<int>(std::find(s.operands.begin(), s.operands.end(), v) - s.operands.begin());
      if (k == static_cast<int>(s.operands.size())) s.operands.push_back(v);
      part.in.push_back({false, k});
    }
    for (int r : st.results) {
      part.out.push_back(static_cast<int>(s.results.size()));
      s.results.push_back(r);
    }
    C->cost += static_cast<int64_t>(L.members.size());
    C->max_ops = std::max(C->max_ops, static_cast<int>(st.operands.size()));
    C->max_results = std::max(C->max_results, static_cast<int>(st.results.size()));
    C->max_members = std::max(C->max_members, static_cast<int>(L.members.size()));
    C->scratch = std::max(C->scratch, L.num_slots * L.slot_bytes);
    TPU_CHECK(st.scratch_bytes == 0, "[host fuse] a chained loop with step scratch");
    part.step = std::move(st);
    C->parts.push_back(std::move(part));
  }
  for (size_t k = 0; k < s.results.size(); ++k) C->res.push_back({static_cast<int>(k), 0, 0});
  C->scratch_all = C->scratch;
  s.node = s.results[0];
  s.n = C->parts[0].step.n;
  s.fn = &chain_kernel;
  s.chain = std::move(C);
}

void localize_chain(const ir::Graph& g, const std::vector<char>& read_outside, Step& s) {
  auto C = std::make_shared<FusedChain>(*s.chain);
  std::vector<int> ext;
  int64_t off = (C->scratch + 63) / 64 * 64;
  for (size_t k = 0; k < s.results.size(); ++k) {
    int r = s.results[k];
    const ir::Node& n = g.nodes()[r];
    int64_t numel = ir::numel(n.shape), es = static_cast<int64_t>(ir::dtype_size(n.dtype));
    int64_t unit = numel == C->rows * C->row_len ? C->row_len * es : numel == C->rows ? es : 0;
    if (read_outside[r] || unit == 0) {
      C->res[k] = {static_cast<int>(ext.size()), 0, 0};
      ext.push_back(r);
      continue;
    }
    C->res[k] = {-1, off, unit};
    off += (C->rows_per_tile * unit + 63) / 64 * 64;
  }
  if (ext.empty()) return;  // a dead chain: left as it is
  C->scratch_all = off;
  s.results = std::move(ext);
  s.chain = std::move(C);
}

bool fused_may_overwrite(const Step& s, int value, const std::vector<char>& target) {
  if (!s.fused || s.chain) return false;
  const Loop& L = *s.fused;
  if (L.sink >= 0) return false;  // rows and post stages read across a tile's elements
  int producer = -1;
  for (size_t k = 0; k < L.members.size(); ++k)
    if (L.members[k].result >= 0 && s.results[L.members[k].result] == value) producer = static_cast<int>(k);
  if (producer < 0 || L.members[producer].kind != Loop::Kind::kRange) return false;
  for (size_t k = 0; k < L.members.size(); ++k) {
    const Loop::Member& m = L.members[k];
    if ((m.kind == Loop::Kind::kGather || m.kind == Loop::Kind::kSplat) && target[m.input]) return false;
    for (const Loop::Operand& o : m.ops)
      if (o.src != Loop::Src::kMember && target[o.index] &&
          (o.src == Loop::Src::kScalar || static_cast<int>(k) > producer))
        return false;
  }
  return true;
}

std::string fused_members(const Step& s) {
  if (s.chain) {
    std::string r;
    for (const FusedChain::Part& p : s.chain->parts) r += (r.empty() ? "" : " || ") + fused_members(p.step);
    return r;
  }
  std::string r;
  int stage = 0;
  for (const Loop::Member& m : s.fused->members) {
    if (m.kind == Loop::Kind::kAlias || m.kind == Loop::Kind::kSplat || m.kind == Loop::Kind::kDead) continue;
    if (!r.empty()) r += m.stage != stage ? " | " : " ";
    stage = m.stage;
    if (m.kind == Loop::Kind::kGather) r += ir::op_info(m.step.n->op).name;
    else if (m.kind == Loop::Kind::kSink) r += "Reduce";
    else if (m.step.range == &round_trip_bf16_range) r += "RoundBf16";
    else r += ir::op_info(m.step.n->op).name;
  }
  return r;
}

void prepare_fused(const ir::Graph& g, const ir::Cluster& c, Step& s) {
  const auto& nodes = g.nodes();
  auto L = std::make_shared<Loop>();
  std::vector<int> order = c.main;
  if (c.sink >= 0) order.push_back(c.sink);
  order.insert(order.end(), c.post.begin(), c.post.end());
  auto member_index = [&](int v) {
    auto it = std::find(order.begin(), order.end(), v);
    return it == order.end() ? -1 : static_cast<int>(it - order.begin());
  };
  auto input_index = [&](int v) {
    return static_cast<int>(std::lower_bound(c.inputs.begin(), c.inputs.end(), v) - c.inputs.begin());
  };
  s.operands = c.inputs;
  for (int v : c.inputs)
    L->in_elem.push_back(static_cast<int64_t>(ir::dtype_size(nodes[v].dtype)));
  // Splats: broadcasts of one element (constants: x * 0.5, max(x, 0)) that no one reads as a
  // tile (not a result; every reader an elementwise op with a scalar form for that operand,
  // and no other splat operand). Their readers take the element itself; no pass fills a tile.
  std::vector<char> splat(order.size(), 0);
  for (size_t k = 0; k < order.size(); ++k) {
    const ir::Node& n = nodes[order[k]];
    splat[k] = static_cast<int>(order[k]) != c.sink && ir::has_trait(n.op, ir::kFusedGather) &&
               ir::numel(nodes[n.operands[0]].shape) == 1 &&
               !std::binary_search(c.outputs.begin(), c.outputs.end(), order[k]);
  }
  std::vector<char> reader_ok(order.size(), 1);
  for (size_t k = 0; k < order.size(); ++k) {
    const ir::Node& n = nodes[order[k]];
    int count = 0;
    for (int o : n.operands) {
      int mi = member_index(o);
      if (mi >= 0 && splat[mi]) ++count;
    }
    if (count == 0) continue;
    for (size_t j = 0; j < n.operands.size(); ++j) {  // (a sink or view has no scalar form)
      int mi = member_index(n.operands[j]);
      if (mi >= 0 && splat[mi] && !(count == 1 && elementwise_scalar_range(g, n, static_cast<int>(j))))
        reader_ok[mi] = 0;
    }
  }
  for (size_t k = 0; k < order.size(); ++k) splat[k] = splat[k] && reader_ok[k];
  for (size_t k = 0; k < order.size(); ++k) {
    int v = order[k];
    const ir::Node& n = nodes[v];
    Loop::Member m;
    m.elem = static_cast<int64_t>(ir::dtype_size(n.dtype));
    m.stage = v == c.sink ? 1 : k < c.main.size() ? 0 : 2;
    auto operand = [&](int o) {
      int mi = member_index(o);
      if (mi >= 0 && splat[mi]) return Loop::Operand{Loop::Src::kScalar, input_index(nodes[o].operands[0])};
      if (mi >= 0) return Loop::Operand{Loop::Src::kMember, mi};
      bool scalar = ir::numel(nodes[o].shape) == 1;
      return Loop::Operand{scalar ? Loop::Src::kScalar : Loop::Src::kInput, input_index(o)};
    };
    if (v == c.sink) {
      m.kind = Loop::Kind::kSink;
      m.ops.push_back(operand(n.operands[0]));
      if (m.ops[0].src == Loop::Src::kScalar) m.ops[0].src = Loop::Src::kInput;
      L->red = row_reduce(n, nodes[n.operands[0]].dtype);
      L->sink = static_cast<int>(k);
    } else if (splat[k]) {
      m.kind = Loop::Kind::kSplat;
      m.input = input_index(n.operands[0]);
    } else if (ir::fuses_as_gather(g, n)) {
      m.kind = Loop::Kind::kGather;
      m.step.n = &n;  // (for the profile's member list)
      m.input = input_index(n.operands[0]);
      plan_gather(g, n, m);
    } else if (ir::op_info(n.op).kind == ir::OpKind::kShape) {  // a kFusible view (reshape)
      m.kind = Loop::Kind::kAlias;
      m.alias_of = member_index(n.operands[0]);
      TPU_CHECK(m.alias_of >= 0, "[host fuse] view of a non-member");
    } else {
      m.kind = Loop::Kind::kRange;
      m.step.node = v;
      m.step.n = &n;
      m.step.operands = n.operands;
      prepare_elementwise(g, m.step);
      for (size_t j = 0; j < n.operands.size(); ++j) {
        int mi = member_index(n.operands[j]);
        if (mi >= 0 && splat[mi]) m.step.range = elementwise_scalar_range(g, n, static_cast<int>(j));
        m.ops.push_back(operand(n.operands[j]));
      }
      TPU_CHECK(m.ops.size() <= 4, "[host fuse] too many operands");
    }
    L->members.push_back(std::move(m));
  }
  // Results: members read outside the cluster, as their alias roots.
  for (int v : c.outputs) {
    int k = member_index(v);
    while (L->members[k].kind == Loop::Kind::kAlias) k = L->members[k].alias_of;
    if (L->members[k].result >= 0) continue;
    L->members[k].result = static_cast<int>(s.results.size());
    s.results.push_back(order[k]);
  }
  TPU_CHECK(!s.results.empty(), "[host fuse] cluster without outputs");
  fold_round_trips(g, *L);
  // Iteration space and tiles.
  L->n_main = c.main_numel;
  int64_t max_elem = 8;
  if (c.sink >= 0) {
    L->rows = c.sink_numel;
    L->row_len = c.main_numel / std::max<int64_t>(c.sink_numel, 1);
    L->long_rows = L->row_len > kRowMax;
    L->blocks = L->rows == 1 && L->row_len > 2 * kReduceBlock;
    L->rows_per_tile = L->long_rows ? 1 : std::max<int64_t>(1, kTileElems / std::max<int64_t>(L->row_len, 1));
    L->main_tile = L->blocks ? kReduceBlock : L->long_rows ? kRowMax : L->rows_per_tile * L->row_len;
    L->post_tile = L->long_rows ? kTileElems : L->rows_per_tile;
    if (L->long_rows) {
      int64_t nb = L->blocks ? (L->row_len + kReduceBlock - 1) / kReduceBlock : 0;
      L->sink_buf_offset = (nb * 16 + 63) / 64 * 64;
      s.scratch_bytes = L->sink_buf_offset + L->rows * max_elem;
    }
  } else {
    L->main_tile = kTileElems;
  }
  assign_slots(*L);
  L->slot_bytes = (std::max(L->main_tile, L->post_tile) * max_elem + 63) / 64 * 64;
  s.node = s.results[0];
  s.n = &nodes[s.node];
  s.i0 = c.main_numel;
  s.fn = &fused_kernel;
  s.fused = std::move(L);
}

}  // namespace torch_tpu::host
