// dot_general on the host: operands are brought into [B, M, K] x [B, K, N] (a strided
// gather only when the layout needs it; operands used as stored may be in [B, K, M] /
// [B, N, K], passed as transposes) and multiplied by host::gemm (oneDNN; f64 on OpenBLAS).
// F32 precision follows the TPU (docs/decisions/gemm.md):
//   DEFAULT  operands rounded to bf16 (RNE); exact products, f32 accumulation.
//   HIGH     hi*hi + hi*lo + lo*hi (hi = bf16(x), lo = bf16(x - hi)). With a native bf16
//            GEMM: one bf16 GEMM with K tripled, [hi|hi|lo] x [hi;lo;hi]. Without: one f32
//            GEMM with K doubled, [hi|lo] x [hi+lo;hi] (hi+lo is exact in f32; the product
//            hi*(hi+lo) is rounded once to f32, below the f32 accumulation error).
//   HIGHEST  plain f32 GEMM (more precise than the TPU's 6 bf16 passes, and cheaper here).
// bf16/f16 operands are widened (exactly), multiplied with f32 accumulation and rounded
// once. Integer dots wrap (64-bit accumulation).
#include <algorithm>
#include <cstring>

#include "runtime/host/gemm.h"
#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;

// Step data: i0..i3 = B, M, K, N. v0 = {lhs mode, rhs mode, parts}: mode 0 = direct,
// 1 = direct and transposed ([B,K,M] / [B,N,K]), 2 = gathered by copies[0] / copies[1] into
// scratch; parts = how many K-blocks the packed operands have (1, 2 or 3; 0 = no packing).
// v1 = {bf16 packing (1) or f32 (0), mixed dot on the native bf16 GEMM (1), few-row f32
// kernel gemm_small (1)}.
// offsets = scratch byte offsets {lhs raw, rhs raw, lhs packed, rhs packed, out f}.
enum { kRawA, kRawB, kPA, kPB, kFC, kNumRegions };

char* region(const KernelArgs& a, int r) { return static_cast<char*>(a.scratch) + a.step.offsets[r]; }

// Operand in canonical or transposed layout.
struct Operand {
  const void* p;
  bool trans;
};

Operand operand(const KernelArgs& a, int which, size_t elem) {
  int mode = static_cast<int>(a.step.v0[which]);
  if (mode < 2) return {a.in[which], mode == 1};
  char* dst = region(a, which == 0 ? kRawA : kRawB);
  run_copy(a.step.copies[which], dst, a.in[which], elem);
  return {dst, false};
}

// What one K-block of a packed operand holds.
enum class Part : uint8_t { Value, Hi, Lo, HiPlusLo };

// One line of part p: out[i] = part(in[i]). The switch sits outside the loops so each
// loop is a straight vectorizable conversion.
template <DType D, class O>
void part_line(const typename DT<D>::S* in, O* out, int64_t n, Part p) {
  auto store = [](float v) {
    if constexpr (std::is_same_v<O, float>) return v;
    else return static_cast<O>(f32_bits(v) >> 16);  // exact: v is a bf16 value
  };
  switch (p) {
    case Part::Value:
      for (int64_t i = 0; i < n; ++i) out[i] = store(DT<D>::load(in[i]));
      break;
    case Part::Hi:
      for (int64_t i = 0; i < n; ++i) out[i] = store(round_bf16(DT<D>::load(in[i])));
      break;
    case Part::Lo:
      for (int64_t i = 0; i < n; ++i) {
        float x = DT<D>::load(in[i]), hi = round_bf16(x);
        out[i] = store(round_bf16(x - hi));
      }
      break;
    case Part::HiPlusLo:
      for (int64_t i = 0; i < n; ++i) {
        float x = DT<D>::load(in[i]), hi = round_bf16(x);
        out[i] = store(hi + round_bf16(x - hi));
      }
      break;
  }
}

// src viewed as [outer, K, inner] -> dst [outer, X, K, inner], block p = part(src, parts[p]),
// stored as f32 or as bf16 bits. lhs: inner = 1 (rows); rhs: outer = batch, inner = N.
// Each [K, inner] block is contiguous in src and, per part, in dst, so the parts are
// computed over long runs (the whole operand when X = 1), cut only at block boundaries
// and at the thread split.
template <DType D, class O>
void pack(const void* src, O* dst, int64_t outer, int64_t K, int64_t inner, const Part* parts, int X) {
  const auto* s = static_cast<const typename DT<D>::S*>(src);
  const int64_t block = K * inner;
  if (block == 0) return;
  parallel_for(outer * block, std::max<int64_t>(1, kParallelGrain / X), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e;) {
      int64_t o = i / block, off = i % block, len = std::min(e - i, block - off);
      for (int p = 0; p < X; ++p) part_line<D>(s + i, dst + (o * X + p) * block + off, len, parts[p]);
      i += len;
    }
  });
}

// Packing recipe per (dtype, precision, bf16 kernel): parts of lhs and rhs.
struct Recipe {
  int parts;  // 0 = operands used as they are (f32 HIGHEST)
  bool bf16;  // packed operands are bf16 bits
  Part lhs[3], rhs[3];
};

Recipe recipe(DType d, ir::Precision p, bool native) {
  using enum Part;
  if (d != DType::F32) return {1, false, {Value}, {Value}};  // bf16/f16: widen exactly
  if (p == ir::Precision::Highest) return {0, false, {}, {}};
  if (p == ir::Precision::Default) return {1, native, {Hi}, {Hi}};
  if (native) return {3, true, {Hi, Hi, Lo}, {Hi, Lo, Hi}};
  return {2, false, {Hi, Lo}, {HiPlusLo, Hi}};
}

template <DType D>
void float_dot_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  int64_t B = a.step.i0, M = a.step.i1, K = a.step.i2, N = a.step.i3;
  if constexpr (D == DType::F64) {
    Operand l = operand(a, 0, 8), r = operand(a, 1, 8);
    gemm_f64({B, M, N, K, l.trans, r.trans}, static_cast<const double*>(l.p), static_cast<const double*>(r.p),
             static_cast<double*>(a.out));
    return;
  } else {
    const bool mixed = D == DType::BF16 && a.step.n->dtype == DType::F32;  // f32 result (attrs.ivalue 1)
    Recipe rc = recipe(D, a.step.n->attrs.precision, a.step.v1[0] != 0);
    if (mixed && a.step.v1[1] != 0) rc = {0, true, {}, {}};  // native bf16 GEMM on the operands as stored
    Operand l = operand(a, 0, sizeof(S)), r = operand(a, 1, sizeof(S));
    float* c = D == DType::F32 || mixed ? static_cast<float*>(a.out) : reinterpret_cast<float*>(region(a, kFC));
    if (a.step.v1[2] != 0) {  // few f32 rows: the weight split while read (gemv.cpp)
      const SmallPrecision sp =
          a.step.n->attrs.precision == ir::Precision::Default ? SmallPrecision::Default : SmallPrecision::High;
      bool ok = gemm_small({B, M, N, K, l.trans, r.trans}, sp, static_cast<const float*>(l.p),
                           static_cast<const float*>(r.p), c, gemm_has_bf16());
      TPU_CHECK(ok, "[host dot_general] the few-row kernel refused a shape it was planned for");
    } else if (rc.parts == 0) {
      gemm({B, M, N, K, l.trans, r.trans}, rc.bf16 ? GemmType::BF16 : GemmType::F32, l.p, r.p, c);
    } else {
      void* pa = region(a, kPA);
      void* pb = region(a, kPB);
      // With one part the pack is an elementwise map over the whole operand, so a transposed
      // operand stays transposed (only K-block packs need canonical layouts: trans is false).
      if (rc.bf16) {
        pack<D>(l.p, static_cast<uint16_t*>(pa), B * M, K, 1, rc.lhs, rc.parts);
        pack<D>(r.p, static_cast<uint16_t*>(pb), B, K, N, rc.rhs, rc.parts);
      } else {
        pack<D>(l.p, static_cast<float*>(pa), B * M, K, 1, rc.lhs, rc.parts);
        pack<D>(r.p, static_cast<float*>(pb), B, K, N, rc.rhs, rc.parts);
      }
      gemm({B, M, N, rc.parts * K, l.trans, r.trans}, rc.bf16 ? GemmType::BF16 : GemmType::F32, pa, pb, c);
    }
    if constexpr (D != DType::F32) {
      if (mixed) return;
      S* o = static_cast<S*>(a.out);
      parallel_for(B * M * N, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = DT<D>::store(c[i]);
      });
    }
  }
}

template <DType D>
void int_dot_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  int64_t B = a.step.i0, M = a.step.i1, K = a.step.i2, N = a.step.i3;
  const S* A = static_cast<const S*>(operand(a, 0, sizeof(S)).p);
  const S* Bm = static_cast<const S*>(operand(a, 1, sizeof(S)).p);
  S* o = static_cast<S*>(a.out);
  uint64_t* acc = reinterpret_cast<uint64_t*>(region(a, kFC));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) acc[n] = 0;
      for (int64_t k = 0; k < K; ++k) {
        uint64_t x = static_cast<uint64_t>(A[(b * M + m) * K + k]);
        const S* row = Bm + (b * K + k) * N;
        for (int64_t n = 0; n < N; ++n) acc[n] += x * static_cast<uint64_t>(row[n]);
      }
      for (int64_t n = 0; n < N; ++n) o[(b * M + m) * N + n] = static_cast<S>(acc[n]);
    }
}

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Fills the gather plan for one operand and returns its mode (see Step data above).
int plan_operand(const ir::Node& x, const std::vector<int64_t>& batch,
                 const std::vector<int64_t>& contract, bool lhs, bool may_trans, Step& s) {
  std::vector<int64_t> freed;
  for (int64_t d = 0; d < static_cast<int64_t>(x.shape.size()); ++d)
    if (std::find(batch.begin(), batch.end(), d) == batch.end() &&
        std::find(contract.begin(), contract.end(), d) == contract.end())
      freed.push_back(d);
  auto cat = [&](const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<int64_t> r = batch;
    r.insert(r.end(), a.begin(), a.end());
    r.insert(r.end(), b.begin(), b.end());
    return r;
  };
  std::vector<int64_t> canon = lhs ? cat(freed, contract) : cat(contract, freed);
  std::vector<int64_t> trans = lhs ? cat(contract, freed) : cat(freed, contract);
  std::vector<int64_t> xst = contiguous_strides(x.shape), src;
  ir::Shape shape;
  for (int64_t d : canon) {
    shape.push_back(x.shape[d]);
    src.push_back(xst[d]);
  }
  std::vector<int64_t> dst = contiguous_strides(shape);
  s.copies.push_back(make_copy_plan(shape, dst.data(), src.data()));
  if (is_identity(canon)) return 0;
  if (may_trans && is_identity(trans)) return 1;
  return 2;
}

}  // namespace

void prepare_dot(const ir::Graph& g, Step& s) {
  const ir::Node& n = *s.n;
  const ir::Node& l = g.nodes()[n.operands[0]];
  const ir::Node& r = g.nodes()[n.operands[1]];
  const ir::Attrs& at = n.attrs;
  int64_t B = 1, M = 1, K = 1, N = 1;
  for (int64_t d : at.lhs_batch) B *= l.shape[d];
  for (int64_t d : at.lhs_contract) K *= l.shape[d];
  M = B * K == 0 ? 0 : ir::numel(l.shape) / (B * K);
  N = B * K == 0 ? 0 : ir::numel(r.shape) / (B * K);
  if (B * K == 0) {  // recover M and N from the result shape when the product is empty
    M = N = 1;
    size_t i = at.lhs_batch.size(), nl = l.shape.size() - at.lhs_batch.size() - at.lhs_contract.size();
    for (size_t j = 0; j < nl; ++j) M *= n.shape[i + j];
    for (size_t j = i + nl; j < n.shape.size(); ++j) N *= n.shape[j];
  }
  s.i0 = B, s.i1 = M, s.i2 = K, s.i3 = N;
  DType d = l.dtype;
  bool native = d == DType::F32 && at.precision != ir::Precision::Highest && gemm_has_bf16();
  Recipe rc = ir::is_float(d) && d != DType::F64 ? recipe(d, at.precision, native) : Recipe{0, false, {}, {}};
  // A mixed dot (bf16 operands, f32 result): the native bf16 GEMM reads the operands as they
  // are (no packing); without one they are widened to f32 like any bf16 dot.
  const bool mixed = n.dtype == DType::F32 && d == DType::BF16, mixed_native = mixed && gemm_has_bf16();
  if (mixed_native) rc = {0, true, {}, {}};
  // f32 DEFAULT or HIGH with few rows: gemm_small reads the operands as stored (no packing).
  const bool small = d == DType::F32 && at.precision != ir::Precision::Highest && gemm_small_takes(B, M, K);
  if (small) rc = {0, false, {}, {}};
  // The GEMM reads operands as stored, or packed elementwise (one part) in the same layout.
  bool direct = ir::is_float(d) && rc.parts <= 1;
  int lm = plan_operand(l, at.lhs_batch, at.lhs_contract, true, direct, s);
  int rm = plan_operand(r, at.rhs_batch, at.rhs_contract, false, direct, s);
  if (rc.parts > 1) {  // K-block packing reads canonical layouts; a transposed one is gathered first
    lm = lm == 1 ? 2 : lm;
    rm = rm == 1 ? 2 : rm;
  }
  s.v0 = {lm, rm, rc.parts};
  s.v1 = {rc.bf16 && !mixed_native ? 1 : 0, mixed_native ? 1 : 0, small ? 1 : 0};
  int64_t elem = static_cast<int64_t>(ir::dtype_size(d)), pe = rc.bf16 ? 2 : 4;
  int64_t sizes[kNumRegions] = {lm == 2 ? B * M * K * elem : 0,
                                rm == 2 ? B * K * N * elem : 0,
                                rc.parts * B * M * K * pe,
                                rc.parts * B * K * N * pe,
                                !ir::is_float(d) ? N * 8 : rc.parts > 0 && d != DType::F32 && !mixed ? B * M * N * 4 : 0};
  s.offsets.assign(kNumRegions, 0);
  for (int i = 0; i < kNumRegions; ++i) {
    s.offsets[i] = s.scratch_bytes;
    s.scratch_bytes += (sizes[i] + 63) / 64 * 64;
  }
  TPU_DISPATCH_DTYPE(d, {
    if constexpr (D == DType::Bool) s.fn = nullptr;
    else if constexpr (std::is_floating_point_v<typename DT<D>::C>) s.fn = &float_dot_kernel<D>;
    else s.fn = &int_dot_kernel<D>;
  })
  TPU_CHECK(s.fn != nullptr, "[host dot_general] no kernel for dtype ", ir::dtype_name(d));
}

}  // namespace torch_tpu::host
