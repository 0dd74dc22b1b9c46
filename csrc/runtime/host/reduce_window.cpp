// reduce_window on the host (sum / max / min with the reducer's identity as init and pad
// value): each result element folds its window in row-major window order. Sums accumulate
// as PyTorch CPU's pooling does (f16/bf16 in float, f32 in float, f64 in double; integers
// wrap); max/min propagate NaN. Threads split the result elements, so results do not
// depend on the thread count.
#include <algorithm>

#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;

// Step data: v0 = operand shape, v1 = per-dim {window, stride, pad_lo, base dil, window dil}
// (5 entries per dim); i0 = rank.
template <DType D, ir::Reducer R>
void reduce_window_kernel(const KernelArgs& a) {
  using M = DT<D>;
  using S = typename M::S;
  using A = typename M::C;
  const Step& s = a.step;
  const ir::Shape& out_shape = s.n->shape;
  int64_t rank = s.i0, total = ir::numel(out_shape);
  const std::vector<int64_t>& xs = s.v0;
  const int64_t* p = s.v1.data();
  std::vector<int64_t> xstr = contiguous_strides(xs);
  int64_t wn = 1;
  for (int64_t d = 0; d < rank; ++d) wn *= p[5 * d];
  const S* x = static_cast<const S*>(a.in[0]);
  S* o = static_cast<S*>(a.out);
  A init = R == ir::Reducer::Sum ? A(0) : R == ir::Reducer::Max ? lowest<A>() : highest<A>();
  parallel_for(total, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, wn)), [&](int64_t b, int64_t e) {
    std::vector<int64_t> oi(rank), wi(rank);
    for (int64_t q = b; q < e; ++q) {
      for (int64_t d = rank - 1, r = q; d >= 0; --d) oi[d] = r % out_shape[d], r /= out_shape[d];
      std::fill(wi.begin(), wi.end(), 0);
      A acc = init;
      for (int64_t k = 0; k < wn; ++k) {
        int64_t idx = 0;
        bool ok = true;
        for (int64_t d = 0; d < rank && ok; ++d) {
          const int64_t* pd = p + 5 * d;
          int64_t pos = oi[d] * pd[1] + wi[d] * pd[4] - pd[2];
          ok = pos >= 0 && pos % pd[3] == 0 && pos / pd[3] < xs[d];
          idx += ok ? pos / pd[3] * xstr[d] : 0;
        }
        if (ok) {
          A v = M::load(x[idx]);
          if constexpr (R == ir::Reducer::Sum) acc = wrap_add(acc, v);
          else if constexpr (R == ir::Reducer::Max) acc = nan_max(acc, v);
          else acc = nan_min(acc, v);
        }
        for (int64_t d = rank - 1; d >= 0; --d) {  // next window position (row-major)
          if (++wi[d] < p[5 * d]) break;
          wi[d] = 0;
        }
      }
      o[q] = M::store(acc);
    }
  });
}

}  // namespace

void prepare_window(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  if (n.op == ir::OpCode::Convolution) return prepare_conv(g, s);
  const ir::Node& x = g.nodes()[n.operands[0]];
  const ir::Attrs& at = n.attrs;
  s.i0 = static_cast<int64_t>(x.shape.size());
  s.v0 = x.shape;
  for (size_t d = 0; d < x.shape.size(); ++d)
    s.v1.insert(s.v1.end(), {at.window[d], at.window_strides[d], at.pad_lo[d], at.lhs_dilation[d],
                             at.rhs_dilation[d]});
  TPU_DISPATCH_DTYPE(x.dtype, if constexpr (D != DType::Bool) {
    switch (at.reducer) {
      case ir::Reducer::Sum: s.fn = &reduce_window_kernel<D, ir::Reducer::Sum>; break;
      case ir::Reducer::Max: s.fn = &reduce_window_kernel<D, ir::Reducer::Max>; break;
      case ir::Reducer::Min: s.fn = &reduce_window_kernel<D, ir::Reducer::Min>; break;
      default: break;
    }
  })
  TPU_CHECK(s.fn != nullptr, "[host reduce_window] no kernel for dtype ", ir::dtype_name(x.dtype));
}

}  // namespace torch_tpu::host
