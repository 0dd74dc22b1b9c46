// Views: Meta, spans, and the IR for strided reads of a flat value.
#include "exec/views.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace torch_tpu::exec {

bool Meta::contiguous() const {
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] != 1 && strides[i] != s) return false;
    s *= sizes[i];
  }
  return true;
}

int64_t Meta::numel() const { return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>()); }

Meta meta_of(const at::Tensor& t, ir::DType dt) {
  return {t.sizes().vec(), t.strides().vec(), t.storage_offset(), dt};
}

// Lowest and highest element offsets a view touches (numel > 0).
std::pair<int64_t, int64_t> span(const Meta& m) {
  int64_t lo = m.offset, hi = m.offset;
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    int64_t e = (m.sizes[i] - 1) * m.strides[i];
    (e < 0 ? lo : hi) += e;
  }
  return {lo, hi};
}

// Whether view `m` lies within the elements of view `in` (same element size).
bool inside(const Meta& m, const Meta& in) {
  if (m.numel() == 0) return true;
  if (in.numel() == 0) return false;
  auto [lo, hi] = span(m);
  auto [ilo, ihi] = span(in);
  return lo >= ilo && hi <= ihi;
}

at::Tensor make_view(const c10::Storage& st, at::ScalarType dt, const Meta& m) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(st), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::scalarTypeToTypeMeta(dt));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(m.sizes, m.strides, m.offset);
  return t;
}

// The flat value is seen as a mixed-radix box (rows, s0/s1, ..., s_last) and the view is a
// slice of it starting at the coordinates of its offset.
// `tv` (of layout tm) as the flat run of the storage elements it covers, in storage order:
// a reshape when tm is contiguous, a transpose first when tm is dense but permuted (a
// pointwise result takes a transposed input's layout); invalid otherwise.
ir::Value storage_order(ir::Graph& g, ir::Value tv, const Meta& tm) {
  int64_t total = tm.numel();
  if (tm.contiguous()) return g.reshape(tv, {total});
  std::vector<int64_t> perm(tm.sizes.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return tm.strides[a] > tm.strides[b]; });
  int64_t expect = 1;
  for (size_t j = perm.size(); j-- > 0;) {
    int64_t d = perm[j];
    if (tm.sizes[d] == 1) continue;
    if (tm.strides[d] != expect) return {};  // broadcast, overlapping or gapped: not dense
    expect *= tm.sizes[d];
  }
  return g.reshape(g.transpose(tv, perm), {total});
}

ir::Value derive(ir::Graph& g, ir::Value tv, const Meta& tm, const Meta& m) {
  if (tm.dtype != m.dtype) return {};
  int64_t total = tm.numel(), rel = m.offset - tm.offset;
  if (rel < 0) return {};
  struct D { int64_t stride, size, dim; };
  std::vector<D> ds;
  int64_t last = rel;  // the highest element index read
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    if (m.sizes[i] == 0) return {};
    if (m.sizes[i] == 1 || m.strides[i] == 0) continue;
    if (m.strides[i] < 0) return {};
    ds.push_back({m.strides[i], m.sizes[i], static_cast<int64_t>(i)});
    last += (m.sizes[i] - 1) * m.strides[i];
  }
  if (last >= total) return {};
  std::sort(ds.begin(), ds.end(), [](const D& a, const D& b) { return a.stride > b.stride; });
  for (size_t j = 0; j + 1 < ds.size(); ++j)
    if (ds[j].stride % ds[j + 1].stride || ds[j].stride / ds[j + 1].stride < ds[j + 1].size) return {};
  ir::Value flat = storage_order(g, tv, tm);
  if (!flat.valid()) return {};
  ir::Value v;
  if (ds.empty()) {
    v = g.slice(flat, {rel}, {rel + 1}, {1});
  } else {
    int64_t s0 = ds[0].stride, rows = (total + s0 - 1) / s0;
    ir::Shape box{rows}, start, limit;
    for (size_t j = 0; j + 1 < ds.size(); ++j) box.push_back(ds[j].stride / ds[j + 1].stride);
    box.push_back(ds.back().stride);
    int64_t r = rel;
    for (size_t j = 0; j < ds.size(); ++j) {
      start.push_back(r / ds[j].stride);
      r %= ds[j].stride;
      limit.push_back(start.back() + ds[j].size);
      if (limit.back() > box[j]) return {};
    }
    start.push_back(r);
    limit.push_back(r + 1);
    if (rows * s0 > total) flat = g.concat({flat, g.constant(0, tm.dtype, {rows * s0 - total})}, 0);
    v = g.reshape(flat, box);
    v = g.slice(v, start, limit, std::vector<int64_t>(box.size(), 1));
    ir::Shape sorted;
    for (const D& d : ds) sorted.push_back(d.size);
    v = g.reshape(v, sorted);
    // sorted position -> original dim order among the strided dims
    std::vector<int64_t> order(ds.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ds[a].dim < ds[b].dim; });
    v = g.transpose(v, order);
  }
  // Insert size-1 and broadcast dims.
  ir::Shape kept;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < m.sizes.size(); ++i)
    if (m.sizes[i] != 1 && m.strides[i] != 0) {
      kept.push_back(m.sizes[i]);
      dims.push_back(static_cast<int64_t>(i));
    }
  v = g.reshape(v, kept);
  return g.broadcast(v, m.sizes, dims);
}

bool flat_run(const Meta& m, int64_t storage_elems, FlatRun kind, Meta* flat) {
  if (m.contiguous() || m.numel() == 0) return false;
  int64_t s0 = 0, read = 1;  // the largest stride; the elements the view reads
  for (size_t d = 0; d < m.sizes.size(); ++d)
    if (m.sizes[d] > 1 && m.strides[d] != 0) {
      s0 = std::max(s0, m.strides[d]);
      read *= m.sizes[d];
    }
  if (s0 <= 0) return false;
  auto [lo, hi] = span(m);
  int64_t begin = lo, end = hi + 1;
  if (kind == FlatRun::kDense) {
    if (end - begin != read) return false;  // gaps between the elements read
  } else {
    begin = lo - lo % s0;
    end = (hi / s0 + 1) * s0;
  }
  if (end > storage_elems) return false;
  // derive's conditions, checked without building a graph (this runs in the fast path's
  // signature): strides that nest, and the view inside the mixed-radix box from its offset.
  struct D {
    int64_t stride, size;
  };
  D ds[16];
  int n = 0;
  for (size_t i = 0; i < m.sizes.size(); ++i) {
    if (m.sizes[i] == 1 || m.strides[i] == 0) continue;
    if (m.strides[i] < 0 || n == 16) return false;
    ds[n++] = {m.strides[i], m.sizes[i]};
  }
  std::sort(ds, ds + n, [](const D& a, const D& b) { return a.stride > b.stride; });
  for (int j = 0; j + 1 < n; ++j)
    if (ds[j].stride % ds[j + 1].stride || ds[j].stride / ds[j + 1].stride < ds[j + 1].size) return false;
  const int64_t total = end - begin;
  int64_t r = m.offset - begin;
  for (int j = 0; j < n; ++j) {
    const int64_t extent = j == 0 ? total / ds[0].stride : ds[j - 1].stride / ds[j].stride;
    const int64_t start = r / ds[j].stride;
    r %= ds[j].stride;
    if (start + ds[j].size > extent) return false;
  }
  *flat = Meta{{total}, {1}, begin, m.dtype};
  return true;
}

}  // namespace torch_tpu::exec
