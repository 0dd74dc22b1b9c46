// sort / argsort along one axis (semantics in ir/ops.def): stable, NaN largest, -0.0 == 0.0.
// Each line along the axis becomes (key, position) pairs, where the key is an unsigned
// integer whose order is the wanted order (floats canonicalized: one NaN, one zero;
// descending = complemented key); sorting the pairs lexicographically is then a stable
// sort. 32-bit keys and positions pack into one uint64 (the common case: sorting is a
// plain integer sort). Lines are sorted in parallel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;

// The unsigned key of D's values: 32 bits for types up to 4 bytes (and f16/bf16 via f32).
template <DType D>
using Key = std::conditional_t<(sizeof(typename DT<D>::S) <= 4), uint32_t, uint64_t>;

template <DType D>
Key<D> sort_key(typename DT<D>::S s, bool descending) {
  using C = typename DT<D>::C;
  using K = Key<D>;
  C c = DT<D>::load(s);
  K k;
  if constexpr (std::is_floating_point_v<C>) {
    // f16/bf16 widen to f32 exactly; canonical NaN and +0 so equal keys tie.
    using F = std::conditional_t<sizeof(K) == 4, float, double>;
    F f = static_cast<F>(c);
    if (f == 0) f = 0;
    std::memcpy(&k, &f, sizeof k);
    K sign = K(1) << (8 * sizeof(K) - 1);
    k = (k & sign) ? static_cast<K>(~k) : static_cast<K>(k | sign);
    if (f != f) k = static_cast<K>(~K(0));  // above +inf, whatever the NaN's sign bit
  } else if constexpr (std::is_signed_v<C>) {
    k = static_cast<K>(static_cast<K>(static_cast<int64_t>(c)) ^
                       (K(1) << (8 * sizeof(C) - 1)));
    if constexpr (sizeof(C) < sizeof(K)) k &= static_cast<K>((K(1) << (8 * sizeof(C))) - 1);
  } else {
    k = static_cast<K>(c);
  }
  return descending ? static_cast<K>(~k) : k;
}

// Writes the sorting permutation of the line x[k * inner], k < n, into perm[0..n).
template <DType D>
void sort_line(const typename DT<D>::S* x, int64_t n, int64_t inner, bool desc,
               std::vector<uint64_t>& buf, std::vector<std::pair<uint64_t, int64_t>>& wide,
               int64_t* perm) {
  if (sizeof(Key<D>) == 4 && n <= (int64_t{1} << 32)) {
    buf.resize(n);
    for (int64_t k = 0; k < n; ++k)
      buf[k] = (static_cast<uint64_t>(sort_key<D>(x[k * inner], desc)) << 32) | uint64_t(k);
    std::sort(buf.begin(), buf.end());
    for (int64_t k = 0; k < n; ++k) perm[k] = static_cast<int64_t>(buf[k] & 0xFFFFFFFFu);
  } else {
    wide.resize(n);
    for (int64_t k = 0; k < n; ++k) wide[k] = {sort_key<D>(x[k * inner], desc), k};
    std::sort(wide.begin(), wide.end());
    for (int64_t k = 0; k < n; ++k) perm[k] = wide[k].second;
  }
}

// Step data: i0 = outer, i1 = n (axis size), i2 = inner, i3 = descending.
template <DType D, bool kIndices>
void sort_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  const Step& s = a.step;
  int64_t outer = s.i0, n = s.i1, inner = s.i2;
  bool desc = s.i3 != 0;
  const S* x = static_cast<const S*>(a.in[0]);
  int64_t lines = outer * inner;
  if (lines == 0 || n == 0) return;
  parallel_for(lines, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t b, int64_t e) {
    std::vector<uint64_t> buf;
    std::vector<std::pair<uint64_t, int64_t>> wide;
    std::vector<int64_t> perm(n);
    for (int64_t l = b; l < e; ++l) {
      int64_t o = l / inner, i = l % inner, base = o * n * inner + i;
      sort_line<D>(x + base, n, inner, desc, buf, wide, perm.data());
      if constexpr (kIndices) {
        int64_t* out = static_cast<int64_t*>(a.out) + base;
        for (int64_t k = 0; k < n; ++k) out[k * inner] = perm[k];
      } else {
        S* out = static_cast<S*>(a.out) + base;
        for (int64_t k = 0; k < n; ++k) out[k * inner] = x[base + perm[k] * inner];
      }
    }
  });
}

// [outer, n, inner] around axis `d` of `shape`.
void split_axis(const ir::Shape& shape, int64_t d, Step& s) {
  s.i0 = 1, s.i1 = shape[d], s.i2 = 1;
  for (int64_t k = 0; k < d; ++k) s.i0 *= shape[k];
  for (size_t k = d + 1; k < shape.size(); ++k) s.i2 *= shape[k];
}

}  // namespace

void prepare_sort(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  const ir::Node& x = g.nodes()[n.operands[0]];
  split_axis(x.shape, n.attrs.dims.at(0), s);
  s.i3 = n.attrs.ivalue & 1;
  bool idx = n.op == ir::OpCode::ArgSort;
  TPU_DISPATCH_DTYPE(x.dtype, s.fn = idx ? &sort_kernel<D, true> : &sort_kernel<D, false>)
}

}  // namespace torch_tpu::host
