// Strided views of a flat storage as IR: reading a view out of the storage's flat value, and
// the storage's next value after writing through a view. The building blocks of layout
// legalization (legalize.h); the exec layer uses the same functions for its view reads.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ir {

// How a graph parameter or output is bound to memory: a strided view of a flat storage of
// `storage_numel` elements. Strides and offset count elements of the view's dtype (the
// dtype of the parameter / output it binds); strides may be 0 (broadcast), negative
// (reversed) or overlapping (as_strided); empty strides mean contiguous row-major.
// storage < 0 means "not bound to a storage": the parameter / output passes through the
// pass unchanged (scalars, RNG state, fresh results); the other fields are then ignored.
struct StorageView {
  int storage = -1;
  int64_t storage_numel = 0;
  Shape sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  // The view's position is a runtime operand (legalize.h: a scalar parameter holding
  // lowest_element() of each call's view), so one program serves every offset of this
  // layout. `offset` then only places the elements relative to the lowest one.
  bool dynamic_offset = false;
};

// Row-major contiguous strides (in elements) of `shape`.
std::vector<int64_t> row_major_strides(const Shape& shape);

// How a view is read or written (the cheapest IR that expresses it).
enum class ViewKind : uint8_t {
  kEmpty,   // no elements: a constant, a write changes nothing
  kWhole,   // the whole storage, dense row-major: a reshape
  kNested,  // strides nest (after flipping negative ones and dropping broadcast and size-1
            // dims, each stride divides the next larger one and the dims do not overlap):
            // slice/reshape/transpose/reverse/broadcast; writes: slices and concatenates
  kIndexed, // anything else (overlapping dims): gather / scatter with indices from iota
};

// Checks the view (rank of strides, non-negative sizes, every element inside the storage);
// throws Error "[legalize] ..." otherwise. The kind is the same for reads and writes.
ViewKind view_kind(const StorageView& v);

// The view `v` of `flat` (a [v.storage_numel] value) as a value of shape v.sizes.
Value read_view(Graph& g, Value flat, const StorageView& v);

// True when writing through `v` replaces every element of the storage, so the write needs
// no old value (a dense or permuted cover, e.g. a transposed view of the whole storage).
bool covers_storage(const StorageView& v);

// The next value of the storage (shape [v.storage_numel]) after writing `value` (shape
// v.sizes, the storage's dtype) through `v` into `old`. `old` may be invalid only when
// covers_storage(v). Where the view writes one element several times (broadcast or
// overlapping dims) the last write in row-major order wins, as on the host runtime; torch
// refuses such writes, and XLA leaves the winner unspecified for overlapping dims.
Value write_view(Graph& g, Value old, Value value, const StorageView& v);

// The lowest storage element a view touches (its offset moved back by its negative strides).
int64_t lowest_element(const StorageView& v);

// read_view / write_view of a view whose lowest element is the runtime value `start` (an
// i64 scalar) instead of lowest_element(v): gathers / scatters at flat indices start + the
// view's fixed pattern. An element outside the storage is clamped (XLA's gather/scatter);
// the caller passes views that lie in their storage.
Value read_view_at(Graph& g, Value flat, const StorageView& v, Value start);
Value write_view_at(Graph& g, Value old, Value value, const StorageView& v, Value start);

}  // namespace torch_tpu::ir
