// Strided copy (one generic routine by element size with fast paths for contiguous and
// last-dim-contiguous layouts), view byte ranges, and View::contiguous().
#include "runtime/host/views.h"

#include <cstring>

#include "base/error.h"
#include "runtime/host/parallel.h"
#include "runtime/runtime.h"

namespace torch_tpu {

namespace runtime {
bool View::contiguous() const {
  if (strides.empty()) return true;
  if (strides.size() != shape.size()) return false;
  if (ir::numel(shape) == 0) return true;
  int64_t expect = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}
}  // namespace runtime

namespace host {

std::vector<int64_t> contiguous_strides(const ir::Shape& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

CopyPlan make_copy_plan(const ir::Shape& shape, const int64_t* dst_strides,
                        const int64_t* src_strides) {
  CopyPlan p;
  p.numel = ir::numel(shape);
  if (p.numel == 0) return p;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    int r = p.rank;
    // Merge into the previous (outer) dim when both layouts are contiguous across them.
    if (r > 0 && p.dst[r - 1] == dst_strides[i] * shape[i] &&
        p.src[r - 1] == src_strides[i] * shape[i]) {
      p.shape[r - 1] *= shape[i];
      p.dst[r - 1] = dst_strides[i];
      p.src[r - 1] = src_strides[i];
      continue;
    }
    TPU_CHECK(r < kMaxRank, "[host copy] rank too large; got ", shape.size(), ", expected <= ",
              kMaxRank);
    p.shape[r] = shape[i];
    p.dst[r] = dst_strides[i];
    p.src[r] = src_strides[i];
    p.rank = r + 1;
  }
  return p;
}

namespace {

// Copies the rows [row_begin, row_end) of the plan's outer index space; a row is the
// innermost dim.
template <class T>
void copy_rows(const CopyPlan& p, char* dst, const char* src, int64_t row_begin, int64_t row_end,
               size_t elem) {
  int r = p.rank;
  int64_t n = p.shape[r - 1], ds = p.dst[r - 1], ss = p.src[r - 1];
  std::array<int64_t, kMaxRank> idx{};
  int64_t rem = row_begin, doff = 0, soff = 0;
  for (int d = r - 2; d >= 0; --d) {
    idx[d] = rem % p.shape[d];
    rem /= p.shape[d];
    doff += idx[d] * p.dst[d];
    soff += idx[d] * p.src[d];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    T* o = reinterpret_cast<T*>(dst) + doff;
    const T* x = reinterpret_cast<const T*>(src) + soff;
    if (ds == 1 && ss == 1) {
      std::memcpy(o, x, n * elem);
    } else if (ds == 1 && ss == 0) {
      T v = x[0];
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    } else if (ds == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = x[i * ss];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * ds] = x[i * ss];
    }
    for (int d = r - 2; d >= 0; --d) {  // advance the outer index
      doff += p.dst[d];
      soff += p.src[d];
      if (++idx[d] < p.shape[d]) break;
      doff -= p.dst[d] * p.shape[d];
      soff -= p.src[d] * p.shape[d];
      idx[d] = 0;
    }
  }
}

template <class T>
void copy_typed(const CopyPlan& p, void* dst, const void* src) {
  constexpr size_t elem = sizeof(T);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (p.rank == 0) {
    std::memcpy(d, s, elem);
    return;
  }
  if (p.rank == 1 && p.dst[0] == 1 && p.src[0] == 1) {
    parallel_for(p.numel, kParallelGrain * 4, [&](int64_t b, int64_t e) {
      std::memcpy(d + b * elem, s + b * elem, (e - b) * elem);
    });
    return;
  }
  int64_t row_len = p.shape[p.rank - 1];
  int64_t rows = p.numel / row_len;
  int64_t grain = std::max<int64_t>(1, kParallelGrain / row_len);
  parallel_for(rows, grain,
               [&](int64_t b, int64_t e) { copy_rows<T>(p, d, s, b, e, elem); });
}

}  // namespace

void run_copy(const CopyPlan& plan, void* dst, const void* src, size_t elem) {
  if (plan.numel == 0) return;
  switch (elem) {
    case 1: return copy_typed<uint8_t>(plan, dst, src);
    case 2: return copy_typed<uint16_t>(plan, dst, src);
    case 4: return copy_typed<uint32_t>(plan, dst, src);
    case 8: return copy_typed<uint64_t>(plan, dst, src);
    default: TPU_CHECK(false, "[host copy] unsupported element size; got ", elem, ", expected 1/2/4/8");
  }
}

ByteRange byte_range(const void* data, const ir::Shape& shape, const std::vector<int64_t>& strides,
                     size_t elem) {
  ByteRange r;
  if (ir::numel(shape) == 0) return r;
  int64_t lo = 0, hi = 0;
  if (strides.empty()) {
    hi = ir::numel(shape) - 1;
  } else {
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t span = (shape[i] - 1) * strides[i];
      (span < 0 ? lo : hi) += span;
    }
  }
  auto base = reinterpret_cast<uintptr_t>(data);
  r.lo = base + lo * static_cast<int64_t>(elem);
  r.hi = base + (hi + 1) * static_cast<int64_t>(elem);
  return r;
}

}  // namespace host
}  // namespace torch_tpu
