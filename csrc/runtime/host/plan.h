// The execution plan of a compiled graph: where each value lives (a parameter, an arena
// slot, a precomputed constant, or an alias of another value), the steps in order, and
// the arena layout from liveness. Built once by make_plan(); immutable afterwards, so
// concurrent runs share it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/config.h"
#include "ir/graph.h"
#include "runtime/host/kernels.h"

namespace torch_tpu::host {

enum class Where : uint8_t { kDead, kParam, kArena, kConst, kAlias };

struct ValueSlot {
  Where where = Where::kDead;
  int root = -1;        // the value whose memory this one uses (itself unless an alias)
  int64_t offset = 0;   // arena byte offset (kArena, and kParam: its gather region)
  int64_t bytes = 0;
  const void* data = nullptr;  // kConst
};

struct AlignedFree {
  void operator()(void* p) const;
};
using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;
AlignedBuffer aligned_buffer(size_t bytes);

struct Plan {
  ir::Graph graph;
  std::vector<ValueSlot> slots;          // one per node
  std::vector<Step> steps;
  std::vector<int64_t> scratch_offset;   // per step, arena byte offset of its scratch
  std::vector<int> params;               // live parameter value ids
  std::vector<int> param_value;          // parameter index -> value id (-1 if dead)
  std::vector<bool> param_read_at_end;   // parameter index -> some output passes it through
  std::vector<int> out_root;             // per output: root value id
  // Per output: the parameter indices whose memory its producing step may overwrite (the output
  // bound in place over that input: the run writes it directly instead of through the arena).
  std::vector<std::vector<int>> out_overwrites;
  std::vector<AlignedBuffer> constants;  // storage of kConst values
  int64_t arena_bytes = 0;
  int max_operands = 0;
  int max_results = 1;
};

struct PlanOptions {
  // Run fused clusters as one tiled loop each (fused.cpp); off = one kernel per node.
  bool fuse = config().host_fusion;
  // Run consecutive fused loops over the same rows as one row chain, tile by tile (fused.cpp
  // can_chain): layer norm and softmax read their rows once from memory.
  bool chain_rows = true;
  // Rewrite f32 DEFAULT-precision dot_general / convolution into HIGHEST ones over operands
  // rounded by explicit convert(convert(x, bf16), f32) nodes (the same numbers: products of
  // bf16 values are exact in f32), so that each value is rounded once per graph (CSE) and the
  // rounding fuses into the loop producing it. Dots keep their packed form when the CPU has
  // a native bf16 GEMM.
  bool round_operands_in_graph = true;
};

// Verifies and copies `g`, then plans it.
std::unique_ptr<Plan> make_plan(const ir::Graph& g, const PlanOptions& opt = {});

}  // namespace torch_tpu::host
