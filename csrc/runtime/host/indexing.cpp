// gather / scatter / scatter_add / scatter_reduce along one axis (semantics in ir/ops.def). The index space
// (the indices shape) is simplified at compile time: size-1 dims dropped, neighbouring
// non-axis dims merged where the operand is contiguous across them. The kernels walk it as
// rows of its last dim, so index_select / embedding shapes ([N, D] indices into [V, D]) run
// one tight loop per row. Work splits by (outer rows before the axis) x (chunks of the last
// dim): two positions that can hit the same element share both, so each scatter target is
// written by one thread in row-major order, whatever the thread count.
#include <algorithm>
#include <cstring>

#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;
using ir::OpCode;

// Step data: v0 = merged index-space sizes, v1 = operand strides of those dims (0 for the
// axis dim), i0 = position of the axis in v0, i1 = operand stride of the axis, i2 = operand
// size along the axis, i3 = number of index positions.
struct Space {
  const std::vector<int64_t>& size;
  const std::vector<int64_t>& stride;
  int64_t axis_pos, axis_stride, axis_size, total;
  explicit Space(const Step& s)
      : size(s.v0), stride(s.v1), axis_pos(s.i0), axis_stride(s.i1), axis_size(s.i2), total(s.i3) {}
  int64_t last() const { return size.back(); }
  // Operand offset of the start of row r (rows index all dims but the last; axis term 0).
  int64_t row_base(int64_t r) const {
    int64_t base = 0;
    for (size_t d = size.size() - 1; d-- > 0;) {
      base += (r % size[d]) * stride[d];
      r /= size[d];
    }
    return base;
  }
};

// Calls body(pos, base, ls, j0, j1) for index positions pos + j, j in [j0, j1), whose
// operand offsets (before the axis term) are base + j * ls. Parallel as the header says.
template <bool kSplitAxisRow, class F>
void for_each_row(const Space& sp, F&& body) {
  if (sp.total == 0) return;
  int64_t k = static_cast<int64_t>(sp.size.size());
  int64_t L = sp.last(), ls = sp.stride.back();
  bool axis_last = sp.axis_pos == k - 1;
  int64_t outer = 1;  // rows before the axis: independent targets
  for (int64_t d = 0; d < std::min(sp.axis_pos, k - 1); ++d) outer *= sp.size[d];
  int64_t rows_per_outer = sp.total / L / outer;
  int64_t chunk = L;  // a row along the axis stays whole for scatter (row-major order)
  if (!axis_last || kSplitAxisRow)
    chunk = std::min(L, std::max<int64_t>(256, kParallelGrain / rows_per_outer));
  int64_t chunks = (L + chunk - 1) / chunk;
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rows_per_outer * chunk, 1));
  parallel_for(outer * chunks, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / chunks, j0 = (t % chunks) * chunk, j1 = std::min(L, j0 + chunk);
      for (int64_t m = 0; m < rows_per_outer; ++m) {
        int64_t r = o * rows_per_outer + m;
        body(r * L, sp.row_base(r), ls, j0, j1);
      }
    }
  });
}

template <class T, class IT>
void gather_kernel(const KernelArgs& a) {
  Space sp(a.step);
  const T* __restrict x = static_cast<const T*>(a.in[0]);
  const IT* __restrict idx = static_cast<const IT*>(a.in[1]);
  T* __restrict o = static_cast<T*>(a.out);
  int64_t hi = sp.axis_size - 1, as = sp.axis_stride;
  for_each_row<true>(sp, [&](int64_t pos, int64_t base, int64_t ls, int64_t j0, int64_t j1) {
    const T* xb = x + base;
    for (int64_t j = j0; j < j1; ++j) {
      int64_t v = static_cast<int64_t>(idx[pos + j]);
      v = v < 0 ? 0 : (v > hi ? hi : v);
      o[pos + j] = xb[j * ls + v * as];
    }
  });
}

// Copies the operand into the result before scattering.
void copy_operand(const KernelArgs& a, size_t bytes) {
  const char* src = static_cast<const char*>(a.in[0]);
  char* dst = static_cast<char*>(a.out);
  constexpr int64_t kBlock = 1 << 20;
  int64_t nb = (static_cast<int64_t>(bytes) + kBlock - 1) / kBlock;
  parallel_for(nb, 4, [&](int64_t b, int64_t e) {
    int64_t lo = b * kBlock, hi = std::min<int64_t>(e * kBlock, static_cast<int64_t>(bytes));
    std::memcpy(dst + lo, src + lo, hi - lo);
  });
}

// How a scatter combines an update u into its target t.
enum class Combine { kSet, kAdd, kProd, kMax, kMin };

// kSet: scatter (plain store, S = storage type); the others: D's math (ops.def semantics).
template <Combine C, DType D, class IT>
void scatter_kernel(const KernelArgs& a) {
  using M = DT<D>;
  using S = typename M::S;
  Space sp(a.step);
  const IT* __restrict idx = static_cast<const IT*>(a.in[1]);
  const S* __restrict u = static_cast<const S*>(a.in[2]);
  S* o = static_cast<S*>(a.out);
  copy_operand(a, static_cast<size_t>(ir::numel(a.step.n->shape)) * sizeof(S));
  uint64_t n = static_cast<uint64_t>(sp.axis_size);
  int64_t as = sp.axis_stride;
  for_each_row<false>(sp, [&](int64_t pos, int64_t base, int64_t ls, int64_t j0, int64_t j1) {
    S* ob = o + base;
    for (int64_t j = j0; j < j1; ++j) {
      int64_t v = static_cast<int64_t>(idx[pos + j]);
      if (static_cast<uint64_t>(v) >= n) continue;  // out of range (negative too): skipped
      S& t = ob[j * ls + v * as];
      if constexpr (C == Combine::kSet) {
        t = u[pos + j];
      } else if constexpr (C == Combine::kAdd && D == DType::Bool) {
        t = static_cast<S>(t | u[pos + j]);
      } else if constexpr (C == Combine::kAdd) {
        t = M::store(wrap_add(M::load(t), M::load(u[pos + j])));
      } else if constexpr (C == Combine::kProd) {
        t = M::store(wrap_mul(M::load(t), M::load(u[pos + j])));
      } else if constexpr (C == Combine::kMax) {
        t = M::store(nan_max(M::load(t), M::load(u[pos + j])));
      } else {
        t = M::store(nan_min(M::load(t), M::load(u[pos + j])));
      }
    }
  });
}

template <Combine C, class IT>
KernelFn pick_combine(DType d) {
  KernelFn fn = nullptr;
  TPU_DISPATCH_DTYPE(d, fn = &scatter_kernel<C, D, IT>)
  return fn;
}

template <class IT>
KernelFn pick_reduce(const ir::Node& n, DType d) {
  if (n.op == OpCode::ScatterAdd) return pick_combine<Combine::kAdd, IT>(d);
  switch (n.attrs.reducer) {
    case ir::Reducer::Prod: return pick_combine<Combine::kProd, IT>(d);
    case ir::Reducer::Max: return pick_combine<Combine::kMax, IT>(d);
    case ir::Reducer::Min: return pick_combine<Combine::kMin, IT>(d);
    default: return nullptr;
  }
}

// Plain gather/scatter move bits: pick by element size.
template <class IT>
KernelFn pick_move(OpCode op, size_t elem) {
  if (op == OpCode::Gather) {
    switch (elem) {
      case 1: return &gather_kernel<uint8_t, IT>;
      case 2: return &gather_kernel<uint16_t, IT>;
      case 4: return &gather_kernel<uint32_t, IT>;
      case 8: return &gather_kernel<uint64_t, IT>;
    }
  } else {
    switch (elem) {
      case 1: return &scatter_kernel<Combine::kSet, DType::U8, IT>;
      case 2: return &scatter_kernel<Combine::kSet, DType::F16, IT>;  // storage uint16_t
      case 4: return &scatter_kernel<Combine::kSet, DType::I32, IT>;
      case 8: return &scatter_kernel<Combine::kSet, DType::I64, IT>;
    }
  }
  return nullptr;
}

// Simplifies the index space of node n (see the Step data comment above).
void plan_space(const ir::Shape& xs, const ir::Shape& is, int64_t axis, Step& s) {
  std::vector<int64_t> xst = contiguous_strides(xs);
  s.v0.clear();
  s.v1.clear();
  s.i0 = -1;
  for (int64_t d = 0; d < static_cast<int64_t>(is.size()); ++d) {
    bool is_axis = d == axis;
    if (!is_axis && is[d] == 1) continue;
    int64_t st = is_axis ? 0 : xst[d];
    bool prev_axis = !s.v0.empty() && s.i0 == static_cast<int64_t>(s.v0.size()) - 1;
    if (!is_axis && !s.v0.empty() && !prev_axis && s.v1.back() == st * is[d]) {
      s.v0.back() *= is[d];  // contiguous with the previous dim in the operand too
      s.v1.back() = st;
      continue;
    }
    if (is_axis) s.i0 = static_cast<int64_t>(s.v0.size());
    s.v0.push_back(is[d]);
    s.v1.push_back(st);
  }
  s.i1 = xst[axis];
  s.i2 = xs[axis];
  s.i3 = ir::numel(is);
}

}  // namespace

void prepare_index(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  const ir::Node& x = g.nodes()[n.operands[0]];
  const ir::Node& idx = g.nodes()[n.operands[1]];
  plan_space(x.shape, idx.shape, n.attrs.dims.at(0), s);
  size_t elem = ir::dtype_size(x.dtype);
  bool i64 = idx.dtype == DType::I64;
  if (n.op == OpCode::Gather || n.op == OpCode::Scatter) {
    s.fn = i64 ? pick_move<int64_t>(n.op, elem) : pick_move<int32_t>(n.op, elem);
  } else {
    s.fn = i64 ? pick_reduce<int64_t>(n, x.dtype) : pick_reduce<int32_t>(n, x.dtype);
  }
  TPU_CHECK(s.fn != nullptr, "[host ", ir::op_info(n.op).hlo, "] no kernel for dtype ",
            ir::dtype_name(x.dtype));
}

}  // namespace torch_tpu::host
