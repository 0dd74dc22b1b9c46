// Reductions (sum, prod, max, min, and, or) and argmax/argmin. The operand is viewed as
// [A, R, K] (outer kept, reduced, inner kept) after dropping size-1 dims and merging
// neighbours; patterns that do not fit are first permuted into [kept, reduced] in
// scratch. Rows (K == 1) reduce pairwise with 8 lanes; columns (K > 1) accumulate tiles
// of 64 lanes with a 4-level cascade, so f32 sums stay accurate for long reductions.
// Accumulation is in float for f16/bf16/f32, double for f64, wrap-around for integers.
// Results do not depend on the thread count. Empty reductions give the identity.
#include <algorithm>
#include <cstring>

#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;
using ir::Reducer;

template <Reducer R>
struct Red {
  template <class C>
  static C init() {
    if constexpr (R == Reducer::Sum || R == Reducer::Or) return C(0);
    else if constexpr (R == Reducer::Prod) return C(1);
    else if constexpr (R == Reducer::Max) return lowest<C>();
    else if constexpr (R == Reducer::Min) return highest<C>();
    else if constexpr (std::is_same_v<C, bool>) return true;
    else return static_cast<C>(~C(0));
  }
  template <class C>
  static C f(C a, C b) {
    if constexpr (R == Reducer::Sum) return wrap_add(a, b);
    else if constexpr (R == Reducer::Prod) return wrap_mul(a, b);
    else if constexpr (R == Reducer::Max) return nan_max(a, b);
    else if constexpr (R == Reducer::Min) return nan_min(a, b);
    else if constexpr (R == Reducer::And) return static_cast<C>(a & b);
    else return static_cast<C>(a | b);
  }
};

template <DType D>
using Acc = std::conditional_t<std::is_same_v<typename DT<D>::C, float>, float, typename DT<D>::C>;

template <Reducer R, DType D>
Acc<D> reduce_row(const typename DT<D>::S* x, int64_t n) {
  using C = Acc<D>;
  if (n > 256) {
    int64_t h = reduce_split(n);
    return Red<R>::f(reduce_row<R, D>(x, h), reduce_row<R, D>(x + h, n - h));
  }
  C lane[8];
  for (C& l : lane) l = Red<R>::template init<C>();
  if constexpr (std::is_same_v<C, float> && (R == Reducer::Max || R == Reducer::Min)) {
    // The same lanes and order with a NaN-free compare-and-blend (nan_max's branches keep the
    // loop scalar: 8x slower than a sum) and a NaN flag per lane; a chunk holding a NaN is
    // redone below with nan_max/nan_min, so every result has the bits of the fold it replaces.
    typedef float F8 __attribute__((vector_size(32)));
    typedef int32_t I8 __attribute__((vector_size(32)));
    F8 acc;
    for (int j = 0; j < 8; ++j) acc[j] = Red<R>::template init<C>();
    I8 nan = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      F8 v;
      if constexpr (D == ir::DType::F32) std::memcpy(&v, x + i, sizeof v);
      else
        for (int j = 0; j < 8; ++j) v[j] = DT<D>::load(x[i + j]);
      nan |= v != v;
      if constexpr (R == Reducer::Max) acc = acc > v ? acc : v;
      else acc = acc < v ? acc : v;
    }
    int32_t any = 0;
    for (int j = 0; j < 8; ++j) any |= nan[j];
    if (!any) {
      for (int j = 0; j < 8; ++j) lane[j] = acc[j];
      for (int j = 0; i < n; ++i, ++j) lane[j] = Red<R>::f(lane[j], static_cast<C>(DT<D>::load(x[i])));
      for (int w = 4; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) lane[j] = Red<R>::f(lane[j], lane[j + w]);
      return lane[0];
    }
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] = Red<R>::f(lane[j], static_cast<C>(DT<D>::load(x[i + j])));
  for (int j = 0; i < n; ++i, ++j) lane[j] = Red<R>::f(lane[j], static_cast<C>(DT<D>::load(x[i])));
  for (int w = 4; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] = Red<R>::f(lane[j], lane[j + w]);
  return lane[0];
}

constexpr int64_t kTile = 64;
constexpr int64_t kBlock = 1 << 15;  // fixed split of one long row across threads

// Step data: i0 = A, i1 = R, i2 = K; copies[0] (optional) permutes the operand into
// scratch first; the partial sums of a split row live in scratch after that.
template <Reducer R, DType D>
void reduce_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  using C = Acc<D>;
  const Step& s = a.step;
  int64_t A = s.i0, Rn = s.i1, K = s.i2;
  const S* x = static_cast<const S*>(a.in[0]);
  S* o = static_cast<S*>(a.out);
  char* scratch = static_cast<char*>(a.scratch);
  if (!s.copies.empty()) {
    run_copy(s.copies[0], scratch, x, sizeof(S));
    x = reinterpret_cast<const S*>(scratch);
    scratch += s.i3;
  }
  auto out = [](C v) { return DT<D>::store(static_cast<typename DT<D>::C>(v)); };
  if (K == 1 && A == 1 && Rn > 2 * kBlock) {
    int64_t nb = (Rn + kBlock - 1) / kBlock;
    C* part = reinterpret_cast<C*>(scratch);
    parallel_for(nb, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        part[i] = reduce_row<R, D>(x + i * kBlock, std::min(kBlock, Rn - i * kBlock));
    });
    for (int64_t w = 1; w < nb; w *= 2)  // pairwise over the fixed blocks
      for (int64_t i = 0; i + w < nb; i += 2 * w) part[i] = Red<R>::f(part[i], part[i + w]);
    o[0] = out(part[0]);
  } else if (K == 1) {
    parallel_for(A, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(Rn, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) o[i] = out(reduce_row<R, D>(x + i * Rn, Rn));
                 });
  } else {
    int64_t tiles_k = (K + kTile - 1) / kTile;
    int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(Rn * kTile, 1));
    parallel_for(A * tiles_k, grain, [&](int64_t b, int64_t e) {
      C acc[4][kTile];
      for (int64_t t = b; t < e; ++t) {
        int64_t ai = t / tiles_k, k0 = (t % tiles_k) * kTile, w = std::min(kTile, K - k0);
        for (auto& lv : acc)
          for (C& v : lv) v = Red<R>::template init<C>();
        const S* base = x + ai * Rn * K + k0;
        for (int64_t r = 0; r < Rn; ++r) {
          const S* row = base + r * K;
          int64_t j = 0;
          if constexpr (D == DType::F32 && (R == Reducer::Max || R == Reducer::Min))
            for (; j + 8 <= w; j += 8) {  // per lane the same fold, vectorized (numeric.h)
              F8 r = nan_max8<R == Reducer::Max>(load8(&acc[0][j]), load8(row + j));
              std::memcpy(&acc[0][j], &r, sizeof r);
            }
          for (; j < w; ++j) acc[0][j] = Red<R>::f(acc[0][j], static_cast<C>(DT<D>::load(row[j])));
          for (int lv = 0, period = 16; lv < 3 && (r + 1) % period == 0; ++lv, period *= 16)
            for (int64_t j = 0; j < w; ++j) {
              acc[lv + 1][j] = Red<R>::f(acc[lv + 1][j], acc[lv][j]);
              acc[lv][j] = Red<R>::template init<C>();
            }
        }
        for (int64_t j = 0; j < w; ++j)
          o[ai * K + k0 + j] = out(Red<R>::f(Red<R>::f(acc[3][j], acc[2][j]), Red<R>::f(acc[1][j], acc[0][j])));
      }
    });
  }
}

// argmax/argmin over [A, R, K] -> i64 [A, K]: first extreme; a NaN is the extreme.
template <bool kMax, DType D>
void arg_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  using C = typename DT<D>::C;
  const Step& s = a.step;
  int64_t A = s.i0, Rn = s.i1, K = s.i2;
  const S* x = static_cast<const S*>(a.in[0]);
  int64_t* o = static_cast<int64_t*>(a.out);
  int64_t tiles_k = (K + kTile - 1) / kTile;
  parallel_for(A * tiles_k, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(Rn * kTile, 1)),
               [&](int64_t b, int64_t e) {
    C best[kTile];
    for (int64_t t = b; t < e; ++t) {
      int64_t ai = t / tiles_k, k0 = (t % tiles_k) * kTile, w = std::min(kTile, K - k0);
      int64_t* idx = o + ai * K + k0;
      const S* base = x + ai * Rn * K + k0;
      for (int64_t j = 0; j < w; ++j) {
        idx[j] = 0;
        if (Rn > 0) best[j] = DT<D>::load(base[j]);
      }
      for (int64_t r = 1; r < Rn; ++r)
        for (int64_t j = 0; j < w; ++j) {
          C v = DT<D>::load(base[r * K + j]), cur = best[j];
          bool better = kMax ? (v > cur) : (v < cur);
          if (cur == cur && (v != v || better)) {
            best[j] = v;
            idx[j] = r;
          }
        }
    }
  });
}

template <DType D>
KernelFn pick_reduce(const ir::Node& n) {
  if (n.op == ir::OpCode::ArgMax) return &arg_kernel<true, D>;
  if (n.op == ir::OpCode::ArgMin) return &arg_kernel<false, D>;
  Reducer r = n.attrs.reducer;
  if constexpr (D == DType::Bool) {  // i1: sum = or, prod = and (StableHLO semantics)
    if (r == Reducer::Sum || r == Reducer::Max) r = Reducer::Or;
    if (r == Reducer::Prod || r == Reducer::Min) r = Reducer::And;
  }
  switch (r) {
    case Reducer::Sum: return &reduce_kernel<Reducer::Sum, D>;
    case Reducer::Prod: return &reduce_kernel<Reducer::Prod, D>;
    case Reducer::Max: return &reduce_kernel<Reducer::Max, D>;
    case Reducer::Min: return &reduce_kernel<Reducer::Min, D>;
    case Reducer::And:
    case Reducer::Or:
      if constexpr (!std::is_floating_point_v<typename DT<D>::C>)
        return r == Reducer::And ? &reduce_kernel<Reducer::And, D> : &reduce_kernel<Reducer::Or, D>;
      break;
  }
  return nullptr;
}

// ---- Row reductions for fused sinks (see RowReduce in kernels.h) -------------------------
// The same reduce_row / first-extreme scan as the kernels above. A fused loop reduces a
// short row whole, a long row in segments at reduce_row's own split points (merge), and
// a single row longer than 2 * kBlock in kBlock blocks combined pairwise (combine), so it
// gives the eager kernel's bits in every case.

template <Reducer R, DType D>
void rows_reduce(const void* xv, int64_t rows, int64_t n, void* ov) {
  const auto* x = static_cast<const typename DT<D>::S*>(xv);
  auto* o = static_cast<typename DT<D>::S*>(ov);
  for (int64_t i = 0; i < rows; ++i)
    o[i] = DT<D>::store(static_cast<typename DT<D>::C>(reduce_row<R, D>(x + i * n, n)));
}
template <Reducer R, DType D>
void partial_reduce(const void* xv, int64_t n, int64_t, void* acc) {
  Acc<D> v = reduce_row<R, D>(static_cast<const typename DT<D>::S*>(xv), n);
  std::memcpy(acc, &v, sizeof v);
}
template <Reducer R, DType D>
void merge_reduce(void* a, const void* b) {
  Acc<D> x, y;
  std::memcpy(&x, a, sizeof x);
  std::memcpy(&y, b, sizeof y);
  x = Red<R>::f(x, y);
  std::memcpy(a, &x, sizeof x);
}
template <Reducer R, DType D>
void combine_reduce(void* accs, int64_t nb, void* ov) {
  auto at = [&](int64_t i) {
    Acc<D> v;
    std::memcpy(&v, static_cast<char*>(accs) + 16 * i, sizeof v);
    return v;
  };
  for (int64_t w = 1; w < nb; w *= 2)
    for (int64_t i = 0; i + w < nb; i += 2 * w) {
      Acc<D> v = Red<R>::f(at(i), at(i + w));
      std::memcpy(static_cast<char*>(accs) + 16 * i, &v, sizeof v);
    }
  *static_cast<typename DT<D>::S*>(ov) = DT<D>::store(static_cast<typename DT<D>::C>(at(0)));
}

// First extreme of x[0, n): a NaN is the extreme (as arg_kernel).
template <bool kMax, DType D>
int64_t arg_scan(const typename DT<D>::S* x, int64_t n, typename DT<D>::C& best) {
  int64_t idx = 0;
  best = DT<D>::load(x[0]);
  for (int64_t r = 1; r < n; ++r) {
    typename DT<D>::C v = DT<D>::load(x[r]);
    bool better = kMax ? (v > best) : (v < best);
    if (best == best && (v != v || better)) {
      best = v;
      idx = r;
    }
  }
  return idx;
}
template <bool kMax, DType D>
void rows_arg(const void* xv, int64_t rows, int64_t n, void* ov) {
  const auto* x = static_cast<const typename DT<D>::S*>(xv);
  typename DT<D>::C best;
  for (int64_t i = 0; i < rows; ++i) static_cast<int64_t*>(ov)[i] = arg_scan<kMax, D>(x + i * n, n, best);
}
template <bool kMax, DType D>
void partial_arg(const void* xv, int64_t n, int64_t index0, void* acc) {
  typename DT<D>::C best;
  int64_t idx = index0 + arg_scan<kMax, D>(static_cast<const typename DT<D>::S*>(xv), n, best);
  std::memcpy(acc, &best, sizeof best);
  std::memcpy(static_cast<char*>(acc) + 8, &idx, 8);
}
template <bool kMax, DType D>
void merge_arg(void* a, const void* b) {
  typename DT<D>::C best, v;
  std::memcpy(&best, a, sizeof best);
  std::memcpy(&v, b, sizeof v);
  bool better = kMax ? (v > best) : (v < best);
  if (best == best && (v != v || better)) std::memcpy(a, b, 16);
}
template <bool kMax, DType D>
void combine_arg(void* accs, int64_t nb, void* ov) {
  typename DT<D>::C best, v;
  int64_t idx, vi;
  const char* a = static_cast<const char*>(accs);
  std::memcpy(&best, a, sizeof best);
  std::memcpy(&idx, a + 8, 8);
  for (int64_t i = 1; i < nb; ++i) {
    std::memcpy(&v, a + 16 * i, sizeof v);
    std::memcpy(&vi, a + 16 * i + 8, 8);
    bool better = kMax ? (v > best) : (v < best);
    if (best == best && (v != v || better)) {
      best = v;
      idx = vi;
    }
  }
  *static_cast<int64_t*>(ov) = idx;
}

template <DType D>
RowReduce pick_row_reduce(const ir::Node& n) {
  if (n.op == ir::OpCode::ArgMax) return {&rows_arg<true, D>, &partial_arg<true, D>, &merge_arg<true, D>, &combine_arg<true, D>};
  if (n.op == ir::OpCode::ArgMin) return {&rows_arg<false, D>, &partial_arg<false, D>, &merge_arg<false, D>, &combine_arg<false, D>};
  Reducer r = n.attrs.reducer;
  if constexpr (D == DType::Bool) {
    if (r == Reducer::Sum || r == Reducer::Max) r = Reducer::Or;
    if (r == Reducer::Prod || r == Reducer::Min) r = Reducer::And;
  }
#define TPU_ROW_REDUCE(name) \
  case Reducer::name:        \
    return {&rows_reduce<Reducer::name, D>, &partial_reduce<Reducer::name, D>, \
            &merge_reduce<Reducer::name, D>, &combine_reduce<Reducer::name, D>};
  switch (r) {
    TPU_ROW_REDUCE(Sum) TPU_ROW_REDUCE(Prod) TPU_ROW_REDUCE(Max) TPU_ROW_REDUCE(Min)
    case Reducer::And:
    case Reducer::Or:
      if constexpr (!std::is_floating_point_v<typename DT<D>::C>) {
        if (r == Reducer::And)
          return {&rows_reduce<Reducer::And, D>, &partial_reduce<Reducer::And, D>,
                &merge_reduce<Reducer::And, D>, &combine_reduce<Reducer::And, D>};
        return {&rows_reduce<Reducer::Or, D>, &partial_reduce<Reducer::Or, D>,
                &merge_reduce<Reducer::Or, D>, &combine_reduce<Reducer::Or, D>};
      }
      break;
  }
#undef TPU_ROW_REDUCE
  return {};
}

}  // namespace

static_assert(kReduceBlock == kBlock, "fused sinks split long rows like the eager kernel");

RowReduce row_reduce(const ir::Node& n, ir::DType operand) {
  RowReduce r;
  TPU_DISPATCH_DTYPE(operand, r = pick_row_reduce<D>(n))
  TPU_CHECK(r.rows != nullptr, "[host ", ir::op_info(n.op).hlo, "] no fused reduction for dtype ",
            ir::dtype_name(operand));
  return r;
}

void prepare_reduce(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  const ir::Node& x = g.nodes()[n.operands[0]];
  std::vector<bool> red(x.shape.size(), false);
  for (int64_t d : n.attrs.dims) red[d] = true;
  // Groups of neighbouring dims with the same kind (size-1 dims dropped).
  std::vector<std::pair<int64_t, bool>> groups;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (x.shape[i] == 1) continue;
    if (!groups.empty() && groups.back().second == red[i]) groups.back().first *= x.shape[i];
    else groups.push_back({x.shape[i], red[i]});
  }
  int64_t kept = ir::numel(n.shape), total = ir::numel(x.shape);
  s.i0 = kept, s.i1 = 1, s.i2 = 1;
  size_t elem = ir::dtype_size(x.dtype);
  if (total == 0) {
    s.i1 = 0;  // empty: identity (or index 0) for every kept element
  } else if (groups.size() <= 2 || (groups.size() == 3 && groups[1].second)) {
    // Groups alternate kinds, so this is [], [K], [R], [K R], [R K] or [K R K].
    size_t i = 0;
    s.i0 = (i < groups.size() && !groups[i].second) ? groups[i++].first : 1;
    s.i1 = (i < groups.size() && groups[i].second) ? groups[i++].first : 1;
    s.i2 = (i < groups.size()) ? groups[i].first : 1;
  } else {
    TPU_CHECK(n.op == ir::OpCode::Reduce, "[host reduce] unexpected layout");
    std::vector<int64_t> xst = contiguous_strides(x.shape), src;
    ir::Shape pshape;
    for (bool want_red : {false, true})
      for (size_t d = 0; d < x.shape.size(); ++d)
        if (red[d] == want_red) {
          pshape.push_back(x.shape[d]);
          src.push_back(xst[d]);
        }
    std::vector<int64_t> dst = contiguous_strides(pshape);
    s.copies.push_back(make_copy_plan(pshape, dst.data(), src.data()));
    s.i1 = total / std::max<int64_t>(kept, 1);
    s.i3 = (total * static_cast<int64_t>(elem) + 63) / 64 * 64;
  }
  if (n.op == ir::OpCode::Reduce && s.i2 == 1 && s.i0 == 1)
    s.scratch_bytes = s.i3 + ((s.i1 + kBlock - 1) / kBlock + 1) * 8;
  else
    s.scratch_bytes = s.i3;
  TPU_DISPATCH_DTYPE(x.dtype, s.fn = pick_reduce<D>(n))
  TPU_CHECK(s.fn != nullptr, "[host ", ir::op_info(n.op).hlo, "] no kernel for dtype ",
            ir::dtype_name(x.dtype));
}

}  // namespace torch_tpu::host
