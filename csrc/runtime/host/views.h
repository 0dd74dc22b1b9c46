// Strided copies: the one routine that moves elements between strided layouts (gathering
// non-contiguous inputs, scattering outputs, and every data-movement op: transpose,
// broadcast, slice, reverse, concat). Strides are in elements and may be 0 or negative.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::host {

constexpr int kMaxRank = 16;

// A copy of `shape` elements from src (src_strides) to dst (dst_strides), simplified:
// size-1 dims dropped and dims that are contiguous in both layouts merged. No heap use,
// so it is cheap to build per run.
struct CopyPlan {
  int rank = 0;
  int64_t numel = 0;
  std::array<int64_t, kMaxRank> shape{}, dst{}, src{};
};

// Row-major contiguous strides of `shape`.
std::vector<int64_t> contiguous_strides(const ir::Shape& shape);

CopyPlan make_copy_plan(const ir::Shape& shape, const int64_t* dst_strides,
                        const int64_t* src_strides);
// Copies `plan.numel` elements of `elem` bytes. dst and src point at element [0,...,0].
// Multi-threaded for large copies. dst and src must not overlap.
void run_copy(const CopyPlan& plan, void* dst, const void* src, size_t elem);

// Byte range [lo, hi) touched by a strided view; lo == hi when it is empty.
struct ByteRange {
  uintptr_t lo = 0, hi = 0;
  bool overlaps(const ByteRange& o) const { return lo < o.hi && o.lo < hi; }
};
ByteRange byte_range(const void* data, const ir::Shape& shape, const std::vector<int64_t>& strides,
                     size_t elem);

}  // namespace torch_tpu::host
