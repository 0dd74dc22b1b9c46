// The host kernel contract. At compile time each node becomes a Step: prepare_*() picks
// the kernel specialized for the node's op and dtypes and precomputes what it needs
// (strides, copy plans, scratch size). At run time the kernel reads its operands as
// contiguous row-major buffers and writes a contiguous row-major result. Kernels never
// keep state between calls, so steps are shared read-only by concurrent runs.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "runtime/host/views.h"

namespace torch_tpu::host {

struct Step;

struct KernelArgs {
  const Step& step;
  const void* const* in;  // one pointer per operand (contiguous row-major)
  void* out;              // the result (contiguous row-major), distinct from every input
  void* scratch;          // step.scratch_bytes of 64-byte aligned scratch (nullptr if 0)
};
using KernelFn = void (*)(const KernelArgs&);

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
};

// Each prepare_* fills step.fn and the kernel data for one node of `g`.
void prepare_elementwise(const ir::Graph& g, Step& s);  // unary, binary, compare, select,
                                                        // clamp, convert
void prepare_leaf(const ir::Graph& g, Step& s);         // constant, iota
void prepare_shape(const ir::Graph& g, Step& s);        // broadcast, transpose, slice,
                                                        // concat, reverse, reshape (copy)
void prepare_reduce(const ir::Graph& g, Step& s);       // reduce, argmax, argmin
void prepare_dot(const ir::Graph& g, Step& s);
void prepare_rng(const ir::Graph& g, Step& s);

// One Philox4x32-10 block for a 64-bit counter (words 2-3 zero) and key = seed (rng.cpp).
struct Philox {
  uint32_t w[4];
};
Philox philox4x32_10(uint64_t counter, uint64_t seed);

}  // namespace torch_tpu::host
