// Inclusive scans along one axis: cumsum, cumprod (semantics in ir/ops.def). The operand is
// [outer, n, inner]; rows (inner == 1) scan sequentially, columns (inner > 1) keep a tile of
// running accumulators so the loads stay contiguous. Accumulators follow PyTorch CPU:
// f16/bf16 in float, f32/f64 in double, integers in their own type (wrapping). Results do
// not depend on the thread count (each line is scanned by one thread, in order).
#include <algorithm>

#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;

template <DType D>
using ScanAcc = std::conditional_t<std::is_floating_point_v<typename DT<D>::C>,
                                   std::conditional_t<(sizeof(typename DT<D>::S) == 2), float, double>,
                                   typename DT<D>::C>;

template <bool kProd, class A>
A combine(A a, A b) {
  return kProd ? wrap_mul(a, b) : wrap_add(a, b);
}

constexpr int64_t kTile = 256;

// Step data: i0 = outer, i1 = n, i2 = inner.
template <DType D, bool kProd>
void scan_kernel(const KernelArgs& a) {
  using M = DT<D>;
  using S = typename M::S;
  using A = ScanAcc<D>;
  const Step& s = a.step;
  int64_t outer = s.i0, n = s.i1, inner = s.i2;
  const S* __restrict x = static_cast<const S*>(a.in[0]);
  S* __restrict o = static_cast<S*>(a.out);
  const A init = kProd ? A(1) : A(0);
  auto out = [](A v) { return M::store(static_cast<typename M::C>(v)); };
  if (outer * n * inner == 0) return;
  if (inner == 1) {
    parallel_for(outer, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        A acc = init;
        for (int64_t k = r * n; k < (r + 1) * n; ++k) o[k] = out(acc = combine<kProd>(acc, static_cast<A>(M::load(x[k]))));
      }
    });
    return;
  }
  int64_t tiles = (inner + kTile - 1) / kTile;
  parallel_for(outer * tiles, std::max<int64_t>(1, kParallelGrain / (n * kTile)), [&](int64_t b, int64_t e) {
    A acc[kTile];
    for (int64_t t = b; t < e; ++t) {
      int64_t r = t / tiles, i0 = (t % tiles) * kTile, w = std::min(kTile, inner - i0);
      std::fill(acc, acc + w, init);
      for (int64_t k = 0; k < n; ++k) {
        int64_t base = (r * n + k) * inner + i0;
        for (int64_t j = 0; j < w; ++j) o[base + j] = out(acc[j] = combine<kProd>(acc[j], static_cast<A>(M::load(x[base + j]))));
      }
    }
  });
}

}  // namespace

void prepare_scan(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  const ir::Node& x = g.nodes()[n.operands[0]];
  int64_t d = n.attrs.dims.at(0);
  s.i0 = 1, s.i1 = x.shape[d], s.i2 = 1;
  for (int64_t k = 0; k < d; ++k) s.i0 *= x.shape[k];
  for (size_t k = d + 1; k < x.shape.size(); ++k) s.i2 *= x.shape[k];
  bool prod = n.op == ir::OpCode::Cumprod;
  TPU_DISPATCH_DTYPE(x.dtype, if constexpr (D != DType::Bool) {
    s.fn = prod ? &scan_kernel<D, true> : &scan_kernel<D, false>;
  })
  TPU_CHECK(s.fn != nullptr, "[host reduce_window] no kernel for dtype ", ir::dtype_name(x.dtype));
}

}  // namespace torch_tpu::host
