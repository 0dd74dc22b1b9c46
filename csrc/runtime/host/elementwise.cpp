// Elementwise kernels: one generic loop per arity over the functors of scalar_ops.h,
// instantiated per (op, dtype) by the X-macro over ops.def; plus compare, select, clamp
// and convert. Each loop is a RangeFn, shared by the eager kernel and the fused loops.
// Operands are contiguous and of the node's shape (clamp bounds may be 0-d). Float ops
// with a vectorized f32 function (scalar_ops.h kVecF32, vec_math.h) run through it.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "runtime/host/kernels.h"
#include "runtime/host/parallel.h"
#include "runtime/host/scalar_ops.h"

namespace torch_tpu::host {
namespace {

using ir::DType;

constexpr uint8_t dtype_class_of(DType d) {
  return (d == DType::F16 || d == DType::BF16 || d == DType::F32 || d == DType::F64) ? ir::F
         : d == DType::Bool                                                         ? ir::B
                                                                                    : ir::I;
}

// The eager kernel of every elementwise op: its range function over the whole array
// (one indirect call per thread chunk; the loop itself is the range function's).
void eager_kernel(const KernelArgs& a) {
  RangeFn f = a.step.range;
  parallel_for(a.step.i0, kParallelGrain,
               [&](int64_t b, int64_t e) { f(a.step, a.in, a.out, b, e); });
}

template <class Op>
concept HasVecF32 = requires { Op::kVecF32; };

template <class Op, DType D>
void unary_range(const Step&, const void* const* in, void* out, int64_t b, int64_t e) {
  using M = DT<D>;
  using S = typename M::S;
  const S* __restrict x = static_cast<const S*>(in[0]);
  S* __restrict o = static_cast<S*>(out);
  if constexpr (HasVecF32<Op> && D == DType::F32) {
    Op::kVecF32(x + b, o + b, e - b);
  } else if constexpr (HasVecF32<Op> && std::is_same_v<typename M::C, float>) {
    // bf16/f16: widen a chunk to f32, run the vector function in place, round once.
    constexpr int64_t kChunk = 512;
    alignas(64) float buf[kChunk];
    for (int64_t i = b; i < e; i += kChunk) {
      int64_t n = std::min(kChunk, e - i);
      for (int64_t k = 0; k < n; ++k) buf[k] = M::load(x[i + k]);
      Op::kVecF32(buf, buf, n);
      for (int64_t k = 0; k < n; ++k) o[i + k] = M::store(buf[k]);
    }
  } else {
    for (int64_t i = b; i < e; ++i) o[i] = M::store(Op::f(M::load(x[i])));
  }
}

// f32 maximum/minimum run 8 lanes at a time (nan_max8, numeric.h): nan_max's nested branches
// keep GCC from vectorizing (relu and clamp ran 5-10x slower than an add).
// kScalar: which operand is one element read at [0] for every i (-1: none): a fused loop's
// constant splat (x * 0.5, max(x, 0)) read as a scalar instead of a tile it fills first.
template <class Op, DType D, int kScalar = -1>
void binary_range(const Step&, const void* const* in, void* out, int64_t b, int64_t e) {
  using M = DT<D>;
  using S = typename M::S;
  const S* __restrict x = static_cast<const S*>(in[0]);
  const S* __restrict y = static_cast<const S*>(in[1]);
  S* __restrict o = static_cast<S*>(out);
  decltype(M::load(x[0])) xs{}, ys{};  // read only when scalar: a range may be empty
  if constexpr (kScalar == 0) xs = M::load(x[0]);
  if constexpr (kScalar == 1) ys = M::load(y[0]);
  if constexpr (D == DType::F32 && (std::is_same_v<Op, ops::MaxOp> || std::is_same_v<Op, ops::MinOp>)) {
    for (; b + 8 <= e; b += 8) {
      F8 xv = kScalar == 0 ? F8{} + xs : load8(x + b), yv = kScalar == 1 ? F8{} + ys : load8(y + b);
      F8 r = nan_max8<std::is_same_v<Op, ops::MaxOp>>(xv, yv);
      std::memcpy(o + b, &r, sizeof r);
    }
  }
  for (int64_t i = b; i < e; ++i)
    o[i] = M::store(Op::f(kScalar == 0 ? xs : M::load(x[i]), kScalar == 1 ? ys : M::load(y[i])));
}

// Bool arithmetic is logical: add = or, mul = and (StableHLO i1 semantics). The bool
// compute type gives exactly that for Add/Mul/Max/Min/And/Or/Xor/Not.
template <class Op, uint8_t kClasses, int kArity>
RangeFn pick(DType d) {
  RangeFn fn = nullptr;
  TPU_DISPATCH_DTYPE(d, if constexpr ((kClasses & dtype_class_of(D)) != 0) {
    if constexpr (kArity == 1) fn = &unary_range<Op, D>;
    else fn = &binary_range<Op, D>;
  })
  return fn;
}

template <ir::Cmp C, class T>
bool compare(T a, T b) {
  if constexpr (C == ir::Cmp::EQ) return a == b;
  else if constexpr (C == ir::Cmp::NE) return a != b;
  else if constexpr (C == ir::Cmp::LT) return a < b;
  else if constexpr (C == ir::Cmp::LE) return a <= b;
  else if constexpr (C == ir::Cmp::GT) return a > b;
  else return a >= b;
}

template <ir::Cmp C, DType D>
void compare_range(const Step&, const void* const* in, void* out, int64_t b, int64_t e) {
  using M = DT<D>;
  using S = typename M::S;
  const S* __restrict x = static_cast<const S*>(in[0]);
  const S* __restrict y = static_cast<const S*>(in[1]);
  uint8_t* __restrict o = static_cast<uint8_t*>(out);
  for (int64_t i = b; i < e; ++i) o[i] = compare<C>(M::load(x[i]), M::load(y[i])) ? 1 : 0;
}

template <DType D>
RangeFn pick_compare(ir::Cmp c) {
  switch (c) {
    case ir::Cmp::EQ: return &compare_range<ir::Cmp::EQ, D>;
    case ir::Cmp::NE: return &compare_range<ir::Cmp::NE, D>;
    case ir::Cmp::LT: return &compare_range<ir::Cmp::LT, D>;
    case ir::Cmp::LE: return &compare_range<ir::Cmp::LE, D>;
    case ir::Cmp::GT: return &compare_range<ir::Cmp::GT, D>;
    case ir::Cmp::GE: return &compare_range<ir::Cmp::GE, D>;
  }
  return nullptr;
}

// select works on raw bits: one instantiation per element size (kScalar as binary_range:
// 1 = the true value, 2 = the false value is one element).
template <class T, int kScalar = -1>
void select_range(const Step&, const void* const* in, void* out, int64_t b, int64_t e) {
  const uint8_t* __restrict p = static_cast<const uint8_t*>(in[0]);
  const T* __restrict t = static_cast<const T*>(in[1]);
  const T* __restrict f = static_cast<const T*>(in[2]);
  T* __restrict o = static_cast<T*>(out);
  T ts{}, fs{};
  if constexpr (kScalar == 1) ts = t[0];
  if constexpr (kScalar == 2) fs = f[0];
  for (int64_t i = b; i < e; ++i) o[i] = p[i] ? (kScalar == 1 ? ts : t[i]) : (kScalar == 2 ? fs : f[i]);
}

// clamp(lo, x, hi) = min(max(x, lo), hi) with NaN propagation; 0-d bounds broadcast.
template <DType D, bool kLoScalar, bool kHiScalar>
void clamp_range(const Step&, const void* const* in, void* out, int64_t b, int64_t e) {
  using M = DT<D>;
  using S = typename M::S;
  const S* __restrict lo = static_cast<const S*>(in[0]);
  const S* __restrict x = static_cast<const S*>(in[1]);
  const S* __restrict hi = static_cast<const S*>(in[2]);
  S* __restrict o = static_cast<S*>(out);
  if constexpr (D == DType::F32) {
    for (; b + 8 <= e; b += 8) {
      F8 l = kLoScalar ? F8{} + lo[0] : load8(lo + b), h = kHiScalar ? F8{} + hi[0] : load8(hi + b);
      F8 r = nan_max8<false>(nan_max8<true>(load8(x + b), l), h);
      std::memcpy(o + b, &r, sizeof r);
    }
  }
  for (int64_t i = b; i < e; ++i) {
    auto l = M::load(lo[kLoScalar ? 0 : i]), h = M::load(hi[kHiScalar ? 0 : i]);
    o[i] = M::store(nan_min(nan_max(M::load(x[i]), l), h));
  }
}

template <DType D>
RangeFn pick_clamp(bool lo_scalar, bool hi_scalar) {
  if (lo_scalar) return hi_scalar ? &clamp_range<D, true, true> : &clamp_range<D, true, false>;
  return hi_scalar ? &clamp_range<D, false, true> : &clamp_range<D, false, false>;
}

// Float -> integer truncates toward zero. Out-of-range and NaN follow x86 (what PyTorch
// CPU produces): the "integer indefinite" value INT_MIN of the 32/64-bit conversion,
// then wrapped to narrower types; uint8 goes through int64 as PyTorch does.
template <class To, class From>
To float_to_int(From v) {
  if constexpr (sizeof(To) == 8 || std::is_same_v<To, uint8_t>) {
    if constexpr (std::is_same_v<To, uint64_t>)
      if (v >= From(9223372036854775808.0) && v < From(18446744073709551616.0))
        return static_cast<uint64_t>(v);
    bool ok = v >= From(-9223372036854775808.0) && v < From(9223372036854775808.0);
    return static_cast<To>(ok ? static_cast<int64_t>(v) : INT64_MIN);
  } else {
    bool ok = v >= From(-2147483648.0) && v < From(2147483648.0);
    return static_cast<To>(ok ? static_cast<int32_t>(v) : INT32_MIN);
  }
}

template <DType F, DType T>
typename DT<T>::S convert_one(typename DT<F>::S s) {
  using FC = typename DT<F>::C;
  using TC = typename DT<T>::C;
  FC v = DT<F>::load(s);
  if constexpr (T == DType::Bool) return v != FC(0) ? 1 : 0;
  else if constexpr (std::is_floating_point_v<FC> && kIsInt<TC>) return float_to_int<TC>(v);
  else if constexpr (std::is_same_v<FC, double> && std::is_same_v<TC, float> && T != DType::F32)
    return DT<T>::store(static_cast<float>(v));  // f64 -> f32 -> f16/bf16, as PyTorch
  else return DT<T>::store(static_cast<TC>(v));
}

template <DType F, DType T>
void convert_range(const Step&, const void* const* in, void* out, int64_t b, int64_t e) {
  using SF = typename DT<F>::S;
  using ST = typename DT<T>::S;
  const SF* __restrict x = static_cast<const SF*>(in[0]);
  ST* __restrict o = static_cast<ST*>(out);
  for (int64_t i = b; i < e; ++i) o[i] = convert_one<F, T>(x[i]);
}

}  // namespace

void round_trip_bf16_range(const Step&, const void* const* in, void* out, int64_t b, int64_t e) {
  const float* __restrict x = static_cast<const float*>(in[0]);
  float* __restrict o = static_cast<float*>(out);
  for (int64_t i = b; i < e; ++i) o[i] = round_bf16(x[i]);
}

namespace {

template <DType F>
RangeFn pick_convert_to(DType to) {
  RangeFn fn = nullptr;
  TPU_DISPATCH_DTYPE(to, fn = &convert_range<F, D>)
  return fn;
}

template <class Op, DType D>
RangeFn scalar_variant(int slot) {
  return slot == 0 ? &binary_range<Op, D, 0> : &binary_range<Op, D, 1>;
}

template <DType D>
RangeFn pick_scalar_binary(ir::OpCode op, int slot) {
  switch (op) {
    case ir::OpCode::Add: return scalar_variant<ops::AddOp, D>(slot);
    case ir::OpCode::Sub: return scalar_variant<ops::SubOp, D>(slot);
    case ir::OpCode::Mul: return scalar_variant<ops::MulOp, D>(slot);
    case ir::OpCode::Div: return scalar_variant<ops::DivOp, D>(slot);
    case ir::OpCode::Max: return scalar_variant<ops::MaxOp, D>(slot);
    case ir::OpCode::Min: return scalar_variant<ops::MinOp, D>(slot);
    default: return nullptr;
  }
}

template <class T>
RangeFn select_variant(int slot) {
  return slot == 1 ? &select_range<T, 1> : &select_range<T, 2>;
}

}  // namespace

RangeFn elementwise_scalar_range(const ir::Graph& g, const ir::Node& n, int slot) {
  if (n.op == ir::OpCode::Select) {
    if (slot != 1 && slot != 2) return nullptr;
    switch (ir::dtype_size(n.dtype)) {
      case 1: return select_variant<uint8_t>(slot);
      case 2: return select_variant<uint16_t>(slot);
      case 4: return select_variant<uint32_t>(slot);
      default: return select_variant<uint64_t>(slot);
    }
  }
  if ((slot != 0 && slot != 1) || n.operands.size() != 2) return nullptr;
  switch (g.nodes()[n.operands[0]].dtype) {
    case DType::F32: return pick_scalar_binary<DType::F32>(n.op, slot);
    case DType::BF16: return pick_scalar_binary<DType::BF16>(n.op, slot);
    case DType::F16: return pick_scalar_binary<DType::F16>(n.op, slot);
    default: return nullptr;
  }
}

void prepare_elementwise(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  s.i0 = ir::numel(n.shape);
  DType d = g.nodes()[n.operands[0]].dtype;
  RangeFn fn = nullptr;
  using ir::A, ir::B, ir::F, ir::I, ir::N;  // dtype classes named in ops.def
  switch (n.op) {
#define UNARY(name, hlo, dt) \
  case ir::OpCode::name:     \
    fn = pick<ops::name##Op, dt, 1>(d); \
    break;
#define BINARY(name, hlo, dt, traits) \
  case ir::OpCode::name:              \
    fn = pick<ops::name##Op, dt, 2>(d); \
    break;
#include "ir/ops.def"
    case ir::OpCode::Compare:
      TPU_DISPATCH_DTYPE(d, fn = pick_compare<D>(n.attrs.direction))
      break;
    case ir::OpCode::Select:
      switch (ir::dtype_size(n.dtype)) {
        case 1: fn = &select_range<uint8_t>; break;
        case 2: fn = &select_range<uint16_t>; break;
        case 4: fn = &select_range<uint32_t>; break;
        default: fn = &select_range<uint64_t>; break;
      }
      break;
    case ir::OpCode::Clamp: {
      bool lo = g.nodes()[n.operands[0]].shape.empty(), hi = g.nodes()[n.operands[2]].shape.empty();
      TPU_DISPATCH_DTYPE(n.dtype, fn = pick_clamp<D>(lo, hi))
      break;
    }
    case ir::OpCode::Convert:
      TPU_DISPATCH_DTYPE(d, fn = pick_convert_to<D>(n.dtype))
      break;
    default:
      break;
  }
  TPU_CHECK(fn != nullptr, "[host ", ir::op_info(n.op).hlo, "] no kernel for dtype ",
            ir::dtype_name(d));
  s.range = fn;
  s.fn = &eager_kernel;
}

}  // namespace torch_tpu::host
