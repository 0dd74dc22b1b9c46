// The host kernel contract. At compile time each node becomes a Step: prepare_*() picks
// the kernel specialized for the node's op and dtypes and precomputes what it needs
// (strides, copy plans, scratch size). At run time the kernel reads its operands as
// contiguous row-major buffers and writes a contiguous row-major result. Kernels never
// keep state between calls, so steps are shared read-only by concurrent runs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/host/views.h"

namespace torch_tpu::ir {
struct Cluster;
}

namespace torch_tpu::host {

struct Step;
struct FusedLoop;   // fused.cpp
struct FusedChain;  // fused.cpp

struct KernelArgs {
  const Step& step;
  const void* const* in;  // one pointer per operand (contiguous row-major)
  void* out;              // the result (contiguous row-major), distinct from every input
  void* scratch;          // step.scratch_bytes of 64-byte aligned scratch (nullptr if 0)
  void* const* outs = nullptr;  // fused steps: one pointer per step.results entry
};
using KernelFn = void (*)(const KernelArgs&);
// Elementwise range function: result elements [b, e) from operand elements [b, e) (0-d
// clamp bounds at [0]). The one loop both the eager kernel (the whole array, split over
// threads) and the fused loops (one tile, operands pointing at the tile) call.
using RangeFn = void (*)(const Step& s, const void* const* in, void* out, int64_t b, int64_t e);

struct Step {
  int node = -1;                 // node id in the executable's graph copy
  const ir::Node* n = nullptr;   // that node (owned by the executable)
  std::vector<int> operands;     // operand value ids
  KernelFn fn = nullptr;
  int64_t scratch_bytes = 0;
  // Kernel-specific precomputed data (meaning documented by each prepare_*).
  int64_t i0 = 0, i1 = 0, i2 = 0, i3 = 0;
  std::vector<int64_t> v0, v1;
  std::vector<CopyPlan> copies;
  std::vector<int64_t> offsets;  // element offsets paired with `copies`
  ir::DType in_dtype = ir::DType::F32;
  RangeFn range = nullptr;       // elementwise ops: the loop body over a range
  // Fused steps (fused.cpp): the values written (node first), and the loop's plan.
  std::vector<int> results;
  std::shared_ptr<const FusedLoop> fused;
  // Row chains (fused.cpp): consecutive fused loops run tile by tile (results: every part's).
  std::shared_ptr<const FusedChain> chain;
};

// Each prepare_* fills step.fn and the kernel data for one node of `g`.
void prepare_elementwise(const ir::Graph& g, Step& s);  // unary, binary, compare, select,
                                                        // clamp, convert
// The range function of elementwise node n (binary add/sub/mul/div/max/min on f32/bf16/f16,
// or select) reading operand `slot` as one element at [0] for every index; null when there
// is none (fused loops then keep the operand's broadcast).
RangeFn elementwise_scalar_range(const ir::Graph& g, const ir::Node& n, int slot);
// f32 -> f32: each element rounded to bf16 (numeric.h round_bf16), as convert(convert(x, bf16),
// f32) gives it, in one pass (fused loops fold such pairs).
void round_trip_bf16_range(const Step&, const void* const* in, void* out, int64_t b, int64_t e);
// Whether a convolution with bf16 operands and an f32 result (attrs.ivalue 1) runs on oneDNN's
// bf16 kernels as it is: a native bf16 CPU, one group, no lhs dilation or negative padding
// (those are materialized in f32 scratch). The planner makes DEFAULT convs mixed only then.
bool conv_mixed_takes(const ir::Node& n);
void prepare_leaf(const ir::Graph& g, Step& s);         // constant, iota
void prepare_shape(const ir::Graph& g, Step& s);        // broadcast, transpose, slice,
                                                        // concat, reverse, reshape (copy)
void prepare_reduce(const ir::Graph& g, Step& s);       // reduce, argmax, argmin
void prepare_dot(const ir::Graph& g, Step& s);
void prepare_rng(const ir::Graph& g, Step& s);
void prepare_index(const ir::Graph& g, Step& s);       // gather, scatter, scatter_add
void prepare_sort(const ir::Graph& g, Step& s);        // sort, argsort
void prepare_scan(const ir::Graph& g, Step& s);        // cumsum, cumprod
// triangular_solve, custom_call (linalg.cpp). A custom call step may write several results
// of one call: s.results set before (plan.cpp groups the nodes of one call), node first.
void prepare_linalg(const ir::Graph& g, Step& s);
void prepare_window(const ir::Graph& g, Step& s);      // reduce_window; convolution via:
void prepare_conv(const ir::Graph& g, Step& s);        // convolution (conv.cpp, oneDNN)
// One loop over a fused cluster of ir::partition (fused.cpp). Fills s.operands (the
// cluster's inputs), s.results (the members written to memory; s.node = results[0]),
// s.fused and s.fn.
void prepare_fused(const ir::Graph& g, const ir::Cluster& c, Step& s);
// Row chains: consecutive fused loops over the same rows (a reduction over rows of R
// elements, then loops reading its per-row results through row broadcasts: layer norm,
// softmax) run as one step, row tile by row tile, so each loop reads what the previous ones
// wrote for those rows from cache instead of memory. can_chain: whether fused step `next`
// may join `parts` (the first with a row reduction; every read of an earlier part's result
// stays within the tile's rows). `root`: per value, the value whose memory it uses.
bool can_chain(const ir::Graph& g, const std::vector<Step>& parts, const Step& next, const std::vector<int>& root);
// The chain step of `parts` (two or more, each accepted by can_chain in turn).
void prepare_chain(std::vector<Step> parts, Step& s);
// After planning: the chain's results that no other step reads and that are not graph outputs
// (read_outside[v] == 0, by root) live in per-thread tile scratch instead of memory (softmax's
// shifted and exponentiated rows, layer norm's centered rows); they leave s.results.
void localize_chain(const ir::Graph& g, const std::vector<char>& read_outside, Step& s);
// The ops of a fused step's loop in evaluation order ("Add Mul Erf | Reduce | Mul"), for
// TORCH_TPU_HOST_PROFILE=2.
std::string fused_members(const Step& s);
// Whether fused step s may write its result `value` straight over the memory of the operands
// marked in `target` (by position in s.operands; one input bound in place, as `x.add_(y)`'s x):
// an elementwise loop whose members read that input only at their own element, none after the
// member producing `value`, so every element is read before it is overwritten.
bool fused_may_overwrite(const Step& s, int value, const std::vector<char>& target);

// Row reductions for a fused sink (reduce.cpp), the same code as the eager reduce kernel:
// rows(x, rows, n, out) reduces `rows` contiguous rows of n operand elements into `rows`
// results (storage types). For rows too long for one tile: partial(x, n, index0, acc)
// reduces one segment into a 16-byte accumulator, merge(a, b) folds the accumulator of
// the segment after a's into a, and combine(accs, count, out) merges `count` block
// accumulators pairwise (as the eager kernel does for one long row) and stores the result.
struct RowReduce {
  void (*rows)(const void* x, int64_t rows, int64_t n, void* out) = nullptr;
  void (*partial)(const void* x, int64_t n, int64_t index0, void* acc) = nullptr;
  void (*merge)(void* a, const void* b) = nullptr;
  void (*combine)(void* accs, int64_t count, void* out) = nullptr;
};
RowReduce row_reduce(const ir::Node& n, ir::DType operand);
constexpr int64_t kReduceBlock = 1 << 15;  // the fixed block split of one long row
// Where the eager row reduction splits a row of n > 256 elements into two halves
// (pairwise summation); a fused loop splits long rows at the same points.
constexpr int64_t reduce_split(int64_t n) { return (n / 2 + 7) / 8 * 8; }

// One Philox4x32-10 block for a 64-bit counter (words 2-3 zero) and key = seed (rng.cpp).
struct Philox {
  uint32_t w[4];
};
Philox philox4x32_10(uint64_t counter, uint64_t seed);

}  // namespace torch_tpu::host
