// Strided views as IR (see views.h). A view whose strides nest is a box of the flat
// storage: the storage region it spans, reshaped to mixed-radix dims (one per stride), is
// sliced (read) or spliced with concatenates (write). Other views go through gather /
// scatter with flat indices computed from iota.
#include "ir/passes/views.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"

namespace torch_tpu::ir {

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

namespace {

struct Dim {
  int64_t size, stride;
};

std::vector<int64_t> strides_of(const StorageView& v) {
  if (!v.strides.empty() || v.sizes.empty()) return v.strides;
  std::vector<int64_t> s(v.sizes.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) s[i] = acc, acc *= v.sizes[i];
  return s;
}

// The view with negative strides flipped (reversed dims), broadcast and size-1 dims dropped
// ("kept" dims address distinct elements), and kept dims that are contiguous together merged
// into groups. `order` lists the groups by decreasing stride: the box's dims.
struct Normal {
  int64_t offset = 0;              // the lowest element the view reads
  std::vector<int64_t> kept_dims;  // view dims with size > 1 and stride != 0
  Shape kept;                      // their sizes
  std::vector<int64_t> kept_strides;  // their strides as given (may be negative)
  std::vector<int64_t> flips;      // positions in `kept` whose stride was negative
  std::vector<Dim> groups;         // merged kept dims, positive strides, in kept order
  std::vector<int64_t> order;      // group indices by decreasing stride
  bool nested = true;              // each stride divides the next larger; no overlap
};

Normal normalize(const StorageView& v) {
  Normal n;
  n.offset = v.offset;
  std::vector<int64_t> st = strides_of(v);
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    if (v.sizes[i] <= 1 || st[i] == 0) continue;
    int64_t s = st[i];
    if (s < 0) {
      n.offset += (v.sizes[i] - 1) * s;
      n.flips.push_back(static_cast<int64_t>(n.kept.size()));
      s = -s;
    }
    n.kept_dims.push_back(static_cast<int64_t>(i));
    n.kept.push_back(v.sizes[i]);
    n.kept_strides.push_back(st[i]);
    if (!n.groups.empty() && n.groups.back().stride == s * v.sizes[i])
      n.groups.back() = {n.groups.back().size * v.sizes[i], s};
    else
      n.groups.push_back({v.sizes[i], s});
  }
  if (n.groups.empty()) n.groups.push_back({1, 1});  // one element
  n.order.resize(n.groups.size());
  std::iota(n.order.begin(), n.order.end(), 0);
  std::stable_sort(n.order.begin(), n.order.end(),
                   [&](int64_t a, int64_t b) { return n.groups[a].stride > n.groups[b].stride; });
  for (size_t p = 1; p < n.order.size(); ++p) {
    const Dim& hi = n.groups[n.order[p - 1]];
    const Dim& lo = n.groups[n.order[p]];
    if (hi.stride % lo.stride != 0 || hi.stride / lo.stride < lo.size) n.nested = false;
  }
  return n;
}

Shape group_shape(const Normal& n) {
  Shape s;
  for (const Dim& d : n.groups) s.push_back(d.size);
  return s;
}

// The storage region [base, base + extent) a nested view lies in, seen as `dims` (top: the
// largest stride's size; then stride ratios; then the smallest stride when above 1), and the
// view as the sub-box [start, limit) of it. `avail` elements of the region exist; the rest
// (only past the storage's end) is padding that the view never touches.
struct Box {
  int64_t base = 0, extent = 0, avail = 0;
  Shape dims;
  std::vector<int64_t> start, limit;
};

// Fills `b` for a region starting `rel` (< the largest stride) elements before the view's
// first element; false when the view would wrap around a box row from there.
bool fill_box(const Normal& n, int64_t numel, int64_t rel, Box& b) {
  const Dim& top = n.groups[n.order[0]];
  b.base = n.offset - rel;
  b.extent = top.stride * top.size;
  b.avail = std::min(b.extent, numel - b.base);
  b.dims = {top.size};
  b.start = {0};
  b.limit = {top.size};
  for (size_t p = 1; p < n.order.size(); ++p) {
    const Dim& d = n.groups[n.order[p]];
    int64_t radix = n.groups[n.order[p - 1]].stride / d.stride, at = rel / d.stride;
    rel %= d.stride;
    b.dims.push_back(radix);
    b.start.push_back(at);
    b.limit.push_back(at + d.size);
    if (at + d.size > radix) return false;
  }
  int64_t last = n.groups[n.order.back()].stride;
  if (last > 1) {
    b.dims.push_back(last);
    b.start.push_back(rel);
    b.limit.push_back(rel + 1);
  }
  return true;
}

// Prefers the region aligned to the largest stride (a column slice of a row-major matrix
// reshapes the whole storage, no padding); else starts at the view's first element, which
// never wraps but may need padding past the end.
Box plan_box(const Normal& n, int64_t numel) {
  Box b;
  if (fill_box(n, numel, n.offset % n.groups[n.order[0]].stride, b) && b.avail == b.extent)
    return b;
  fill_box(n, numel, 0, b);
  return b;
}

// The region of `flat` a box covers, padded with zeros to its extent.
Value region(Graph& g, Value flat, const Box& b) {
  Value x = g.slice(flat, {b.base}, {b.base + b.avail}, {1});
  if (b.avail < b.extent) x = g.concat({x, g.constant(0, g.dtype(flat), {b.extent - b.avail})}, 0);
  return g.reshape(x, b.dims);
}

std::vector<int64_t> ones(size_t n) { return std::vector<int64_t>(n, 1); }

// The nested view read out of `flat`, in group shape.
Value read_nested(Graph& g, Value flat, const Normal& n, int64_t numel) {
  if (n.groups.size() == 1) {  // a (strided) range: one slice
    const Dim& d = n.groups[0];
    return g.slice(flat, {n.offset}, {n.offset + (d.size - 1) * d.stride + 1}, {d.stride});
  }
  Box b = plan_box(n, numel);
  Value x = g.slice(region(g, flat, b), b.start, b.limit, ones(b.dims.size()));
  Shape sorted;
  for (int64_t p : n.order) sorted.push_back(n.groups[p].size);
  x = g.reshape(x, sorted);
  std::vector<int64_t> perm(n.order.size());  // group i sits at sorted position perm[i]
  for (size_t p = 0; p < n.order.size(); ++p) perm[n.order[p]] = static_cast<int64_t>(p);
  return g.transpose(x, perm);
}

// x with the sub-box [b.start, b.limit) from dim d on replaced by `nb`: per dim, the part
// before, the spliced middle and the part after, concatenated.
Value place(Graph& g, Value x, Value nb, const Box& b, size_t d) {
  if (d == b.dims.size()) return nb;
  const Shape xs = g.shape(x);
  auto part = [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> start(xs.size(), 0), limit = xs;
    start[d] = lo, limit[d] = hi;
    return g.slice(x, start, limit, ones(xs.size()));
  };
  std::vector<Value> parts;
  if (b.start[d] > 0) parts.push_back(part(0, b.start[d]));
  parts.push_back(place(g, part(b.start[d], b.limit[d]), nb, b, d + 1));
  if (b.limit[d] < xs[d]) parts.push_back(part(b.limit[d], xs[d]));
  return g.concat(parts, static_cast<int64_t>(d));
}

// The storage after writing `x` (group shape) through the nested view.
Value write_nested(Graph& g, Value old, Value x, const Normal& n, int64_t numel, bool covers) {
  x = g.transpose(x, n.order);  // sorted by decreasing stride
  if (covers) return g.reshape(x, {numel});
  Box b = plan_box(n, numel);
  Shape sub;
  for (size_t d = 0; d < b.dims.size(); ++d) sub.push_back(b.limit[d] - b.start[d]);
  Value r = place(g, region(g, old, b), g.reshape(x, sub), b, 0);
  r = g.slice(g.reshape(r, {b.extent}), {0}, {b.avail}, {1});
  std::vector<Value> parts;
  if (b.base > 0) parts.push_back(g.slice(old, {0}, {b.base}, {1}));
  parts.push_back(r);
  if (b.base + b.avail < numel) parts.push_back(g.slice(old, {b.base + b.avail}, {numel}, {1}));
  return g.concat(parts, 0);
}

// Flat element indices (i64, [numel(shape)]): offset + sum_d iota_d * strides[d].
Value flat_indices(Graph& g, const Shape& shape, const std::vector<int64_t>& strides, int64_t offset) {
  Value idx = g.constant(static_cast<double>(offset), DType::I64, shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 1 || strides[d] == 0) continue;
    Value term = g.binary(OpCode::Mul, g.iota(DType::I64, shape, static_cast<int64_t>(d)),
                          g.constant(static_cast<double>(strides[d]), DType::I64, shape));
    idx = g.binary(OpCode::Add, idx, term);
  }
  return g.reshape(idx, {numel(shape)});
}

Value reverse(Graph& g, Value x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return x;
  Attrs a;
  a.dims = dims;
  return g.op(OpCode::Reverse, {x}, std::move(a));
}

Value index_op(Graph& g, OpCode op, std::vector<Value> operands) {
  Attrs a;
  a.dims = {0};
  return g.op(op, std::move(operands), std::move(a));
}

void check_flat(const Graph& g, Value flat, const StorageView& v, const char* what) {
  TPU_CHECK(g.shape(flat) == Shape{v.storage_numel}, "[legalize] ", what,
            " storage value has the wrong shape; got ", shape_str(g.shape(flat)), ", expected [",
            v.storage_numel, "]");
}

}  // namespace

ViewKind view_kind(const StorageView& v) {
  TPU_CHECK(v.strides.empty() || v.strides.size() == v.sizes.size(),
            "[legalize] view strides do not match its rank; got ", v.strides.size(),
            " strides, expected ", v.sizes.size());
  TPU_CHECK(v.storage_numel >= 0, "[legalize] storage size is negative; got ", v.storage_numel);
  std::vector<int64_t> st = strides_of(v);
  int64_t n = 1, lo = v.offset, hi = v.offset;
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    TPU_CHECK(v.sizes[i] >= 0, "[legalize] view size is negative; got ", shape_str(v.sizes));
    n *= v.sizes[i];
    if (v.sizes[i] > 0) (st[i] < 0 ? lo : hi) += (v.sizes[i] - 1) * st[i];
  }
  if (n == 0) return ViewKind::kEmpty;
  TPU_CHECK(lo >= 0 && hi < v.storage_numel, "[legalize] view reaches outside its storage; got elements ",
            lo, "..", hi, ", expected within 0..", v.storage_numel - 1);
  Normal nv = normalize(v);
  if (!nv.nested) return ViewKind::kIndexed;
  bool dense = nv.groups.size() == 1 && nv.groups[0].stride == 1 && nv.flips.empty();
  return dense && v.offset == 0 && n == v.storage_numel ? ViewKind::kWhole : ViewKind::kNested;
}

bool covers_storage(const StorageView& v) {
  ViewKind k = view_kind(v);
  if (k == ViewKind::kEmpty) return v.storage_numel == 0;
  if (k == ViewKind::kIndexed) return false;
  return numel(normalize(v).kept) == v.storage_numel;  // nested: distinct elements
}

Value read_view(Graph& g, Value flat, const StorageView& v) {
  check_flat(g, flat, v, "read:");
  ViewKind k = view_kind(v);
  if (k == ViewKind::kEmpty) return g.constant(0, g.dtype(flat), v.sizes);
  Normal nv = normalize(v);
  Value x;  // the kept dims' elements, in group shape (nested) or flat (indexed)
  if (k == ViewKind::kIndexed) {
    x = index_op(g, OpCode::Gather, {flat, flat_indices(g, nv.kept, nv.kept_strides, v.offset)});
  } else {
    x = read_nested(g, flat, nv, v.storage_numel);
    if (!nv.flips.empty()) x = reverse(g, g.reshape(x, nv.kept), nv.flips);
  }
  // Only size-1 dims missing: a reshape (no broadcast node for a dense view).
  if (numel(nv.kept) == numel(v.sizes)) return g.reshape(x, v.sizes);
  return g.broadcast(g.reshape(x, nv.kept), v.sizes, nv.kept_dims);
}

Value write_view(Graph& g, Value old, Value value, const StorageView& v) {
  TPU_CHECK(g.shape(value) == v.sizes, "[legalize] written value does not match its view; got ",
            shape_str(g.shape(value)), ", expected ", shape_str(v.sizes));
  bool covers = covers_storage(v);
  TPU_CHECK(covers || old.valid(), "[legalize] a partial write needs the storage's old value; got none");
  if (old.valid()) {
    check_flat(g, old, v, "write:");
    TPU_CHECK(g.dtype(old) == g.dtype(value), "[legalize] written value's dtype differs from its storage's; got ",
              dtype_name(g.dtype(value)), ", expected ", dtype_name(g.dtype(old)));
  }
  ViewKind k = view_kind(v);
  if (k == ViewKind::kEmpty) return covers ? g.reshape(value, {0}) : old;
  // A broadcast dim writes each element size times: keep the last (row-major) write.
  std::vector<int64_t> st = strides_of(v), start(v.sizes.size(), 0);
  Shape written = v.sizes;
  for (size_t i = 0; i < st.size(); ++i)
    if (st[i] == 0) start[i] = v.sizes[i] - 1, written[i] = 1;
  Value x = g.slice(value, start, v.sizes, ones(start.size()));
  if (k == ViewKind::kIndexed)
    return index_op(g, OpCode::Scatter, {old, flat_indices(g, written, st, v.offset), g.reshape(x, {numel(written)})});
  Normal nv = normalize(v);
  x = g.reshape(reverse(g, g.reshape(x, nv.kept), nv.flips), group_shape(nv));
  return write_nested(g, old, x, nv, v.storage_numel, covers);
}

int64_t lowest_element(const StorageView& v) {
  std::vector<int64_t> st = strides_of(v);
  int64_t lo = v.offset;
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 0 && st[i] < 0) lo += (v.sizes[i] - 1) * st[i];
  return lo;
}

namespace {

// Flat indices of `shape` with `strides` placed so that the lowest element is `start`.
Value indices_at(Graph& g, const Shape& shape, const std::vector<int64_t>& strides, int64_t rel, Value start) {
  TPU_CHECK(g.dtype(start) == DType::I64 && g.shape(start).empty(),
            "[legalize] a view's runtime start must be an i64 scalar; got ", dtype_name(g.dtype(start)), " ",
            shape_str(g.shape(start)));
  Value idx = flat_indices(g, shape, strides, rel);
  return g.binary(OpCode::Add, idx, g.broadcast(start, g.shape(idx), {}));
}

}  // namespace

Value read_view_at(Graph& g, Value flat, const StorageView& v, Value start) {
  check_flat(g, flat, v, "read:");
  if (view_kind(v) == ViewKind::kEmpty) return g.constant(0, g.dtype(flat), v.sizes);
  Normal nv = normalize(v);
  int64_t rel = v.offset - lowest_element(v);
  Value x = index_op(g, OpCode::Gather, {flat, indices_at(g, nv.kept, nv.kept_strides, rel, start)});
  if (numel(nv.kept) == numel(v.sizes)) return g.reshape(x, v.sizes);
  return g.broadcast(g.reshape(x, nv.kept), v.sizes, nv.kept_dims);
}

Value write_view_at(Graph& g, Value old, Value value, const StorageView& v, Value start) {
  TPU_CHECK(g.shape(value) == v.sizes, "[legalize] written value does not match its view; got ",
            shape_str(g.shape(value)), ", expected ", shape_str(v.sizes));
  TPU_CHECK(old.valid(), "[legalize] a write at a runtime offset needs the storage's old value; got none");
  check_flat(g, old, v, "write:");
  TPU_CHECK(g.dtype(old) == g.dtype(value), "[legalize] written value's dtype differs from its storage's; got ",
            dtype_name(g.dtype(value)), ", expected ", dtype_name(g.dtype(old)));
  if (view_kind(v) == ViewKind::kEmpty) return old;
  // A broadcast dim writes each element size times: keep the last (row-major) write.
  std::vector<int64_t> st = strides_of(v), from(v.sizes.size(), 0);
  Shape written = v.sizes;
  for (size_t i = 0; i < st.size(); ++i)
    if (st[i] == 0) from[i] = v.sizes[i] - 1, written[i] = 1;
  Value x = g.slice(value, from, v.sizes, ones(from.size()));
  int64_t rel = v.offset - lowest_element(v);
  return index_op(g, OpCode::Scatter, {old, indices_at(g, written, st, rel, start), g.reshape(x, {numel(written)})});
}

}  // namespace torch_tpu::ir
