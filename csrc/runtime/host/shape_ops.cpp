// Data-movement ops as strided copies planned at compile time (broadcast_in_dim,
// transpose, slice, reverse, concatenate, reshape when it cannot alias) and the leaf
// ops (constant splat, iota).
#include <algorithm>
#include <cstring>

#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;

// Step data: copies[k] moves operand k (or operand 0 for single-source ops) into the
// result; offsets[k] is the element offset added to the source (i0 = 0) or to the
// destination (i0 = 1, concatenate). i1 = element size.
void copy_kernel(const KernelArgs& a) {
  const Step& s = a.step;
  size_t elem = static_cast<size_t>(s.i1);
  for (size_t k = 0; k < s.copies.size(); ++k) {
    int64_t off = s.offsets[k] * static_cast<int64_t>(elem);
    if (s.i0 == 0)
      run_copy(s.copies[k], a.out, static_cast<const char*>(a.in[0]) + off, elem);
    else
      run_copy(s.copies[k], static_cast<char*>(a.out) + off, a.in[k], elem);
  }
}

// Constant: i2 holds the element's storage bits.
template <class T>
void fill_kernel(const KernelArgs& a) {
  T v;
  std::memcpy(&v, &a.step.i2, sizeof(T));
  T* __restrict o = static_cast<T*>(a.out);
  parallel_for(a.step.i0, kParallelGrain * 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = v;
  });
}

template <DType D>
uint64_t constant_bits(const ir::Node& n) {
  using M = DT<D>;
  typename M::S s;
  if constexpr (D == DType::F16 || D == DType::BF16)
    s = M::store(static_cast<float>(n.attrs.value));
  else if constexpr (std::is_floating_point_v<typename M::C>)
    s = static_cast<typename M::S>(n.attrs.value);
  else if constexpr (D == DType::Bool)
    s = n.attrs.ivalue != 0;
  else
    s = static_cast<typename M::S>(n.attrs.ivalue);
  uint64_t bits = 0;
  std::memcpy(&bits, &s, sizeof s);
  return bits;
}

// Iota: i0 = numel, i1 = size of the iota dim, i2 = product of the dims after it.
template <DType D>
void iota_kernel(const KernelArgs& a) {
  using M = DT<D>;
  using S = typename M::S;
  S* o = static_cast<S*>(a.out);
  int64_t size = a.step.i1, inner = a.step.i2;
  // Runs of `inner` equal values; the value steps through [0, size) run by run (one
  // division per thread chunk, not two per element).
  int64_t runs = inner > 0 ? a.step.i0 / inner : 0;
  parallel_for(runs, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    int64_t v = size > 0 ? b % size : 0;
    for (int64_t r = b; r < e; ++r) {
      S x;
      if constexpr (D == DType::Bool) x = v != 0;
      else x = M::store(static_cast<typename M::C>(v));
      std::fill(o + r * inner, o + (r + 1) * inner, x);
      if (++v == size) v = 0;
    }
  });
}

}  // namespace

void prepare_leaf(const ir::Graph&, Step& s) {
  const ir::Node& n = *s.n;
  s.i0 = ir::numel(n.shape);
  if (n.op == ir::OpCode::Constant) {
    TPU_DISPATCH_DTYPE(n.dtype, s.i2 = static_cast<int64_t>(constant_bits<D>(n)))
    switch (ir::dtype_size(n.dtype)) {
      case 1: s.fn = &fill_kernel<uint8_t>; break;
      case 2: s.fn = &fill_kernel<uint16_t>; break;
      case 4: s.fn = &fill_kernel<uint32_t>; break;
      default: s.fn = &fill_kernel<uint64_t>; break;
    }
    return;
  }
  TPU_CHECK(n.op == ir::OpCode::Iota, "[host] not a leaf op: ", ir::op_info(n.op).hlo);
  int64_t d = n.attrs.dims.at(0);
  s.i1 = n.shape[d];
  s.i2 = 1;
  for (size_t i = d + 1; i < n.shape.size(); ++i) s.i2 *= n.shape[i];
  if (s.i2 == 0) s.i2 = 1;
  TPU_DISPATCH_DTYPE(n.dtype, s.fn = &iota_kernel<D>)
}

void prepare_shape(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  const ir::Node& x = g.nodes()[n.operands[0]];
  const ir::Attrs& a = n.attrs;
  std::vector<int64_t> xst = contiguous_strides(x.shape), ost = contiguous_strides(n.shape);
  std::vector<int64_t> src(n.shape.size(), 0);
  int64_t offset = 0;
  s.fn = &copy_kernel;
  s.i1 = static_cast<int64_t>(ir::dtype_size(n.dtype));
  switch (n.op) {
    case ir::OpCode::Broadcast:
      for (size_t i = 0; i < a.dims.size(); ++i)
        if (x.shape[i] != 1) src[a.dims[i]] = xst[i];
      break;
    case ir::OpCode::Transpose:
      for (size_t i = 0; i < a.dims.size(); ++i) src[i] = xst[a.dims[i]];
      break;
    case ir::OpCode::Slice:
      for (size_t i = 0; i < src.size(); ++i) {
        offset += a.start[i] * xst[i];
        src[i] = xst[i] * a.stride[i];
      }
      break;
    case ir::OpCode::Reverse:
      src = xst;
      for (int64_t d : a.dims) {
        if (x.shape[d] > 0) offset += (x.shape[d] - 1) * xst[d];
        src[d] = -xst[d];
      }
      break;
    case ir::OpCode::Reshape:
    case ir::OpCode::OptimizationBarrier:
      src = ost;
      break;
    case ir::OpCode::Concat: {
      s.i0 = 1;
      int64_t dim = a.dims.at(0), at = 0;
      for (int o : n.operands) {
        const ir::Node& y = g.nodes()[o];
        std::vector<int64_t> yst = contiguous_strides(y.shape);
        s.copies.push_back(make_copy_plan(y.shape, ost.data(), yst.data()));
        s.offsets.push_back(at * ost[dim]);
        at += y.shape[dim];
      }
      return;
    }
    default:
      TPU_CHECK(false, "[host] not a shape op: ", ir::op_info(n.op).hlo);
  }
  s.copies.push_back(make_copy_plan(n.shape, ost.data(), src.data()));
  s.offsets.push_back(offset);
}

}  // namespace torch_tpu::host
