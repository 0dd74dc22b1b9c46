// Tensor views as the exec layer sees them: (sizes, strides, offset, dtype) of a storage,
// and the IR that reads a strided view out of a flat value (the seed of layout
// legalization). Sees ATen (exec glue).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::exec {

// A view of a storage: sizes, strides and offset in elements of `dtype`.
struct Meta {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  ir::DType dtype = ir::DType::F32;
  bool operator==(const Meta& o) const {
    return sizes == o.sizes && strides == o.strides && offset == o.offset && dtype == o.dtype;
  }
  bool contiguous() const;
  int64_t numel() const;
};

Meta meta_of(const at::Tensor& t, ir::DType dt);
// Lowest and highest element offsets a view touches (numel > 0).
std::pair<int64_t, int64_t> span(const Meta& m);
// Whether view `m` lies within the elements of view `in` (same element size).
bool inside(const Meta& m, const Meta& in);
// A tpu tensor of dtype `dt` viewing `st` as `m`.
at::Tensor make_view(const c10::Storage& st, at::ScalarType dt, const Meta& m);

// Value `tv` (of layout tm) as the flat run of the storage elements it covers, in storage
// order: a reshape when tm is contiguous, a transpose first when tm is dense but permuted;
// an invalid Value otherwise.
ir::Value storage_order(ir::Graph& g, ir::Value tv, const Meta& tm);

// A strided view read as the flat run of storage it spans, the view derived in the graph (a
// transposed weight: the transpose folds into its dot; q / k / v views of one projection:
// fused loops read them in place), instead of a dense copy gathered before each run. False
// for contiguous or empty views, and where derive cannot express the view.
// - dense (eager ops, Lower::in): only views without gaps apart from broadcast dims (a
//   permutation of dense memory, an expand): the run is exactly the elements read, so the
//   graph depends on sizes and strides only, never on the offset or the storage's size.
// - whole rows (a compiled graph's inputs, capture.cpp): any view whose strides nest; the run
//   covers whole rows of its largest stride (so derive needs no padding), from the row
//   holding its first element, when the storage (`storage_elems` elements) holds them.
enum class FlatRun { kDense, kWholeRows };
bool flat_run(const Meta& m, int64_t storage_elems, FlatRun kind, Meta* flat);

// The strided view `m` of the flat contiguous value `v` (whose own view is `vm`) as IR ops
// in `g`, when the view's strides nest (each divides the next larger one, dims don't
// overlap) and every element it reads lies inside `vm`; an invalid Value otherwise.
ir::Value derive(ir::Graph& g, ir::Value v, const Meta& vm, const Meta& m);

}  // namespace torch_tpu::exec
