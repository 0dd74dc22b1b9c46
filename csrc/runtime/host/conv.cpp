// convolution on the host: oneDNN's f32 forward convolution (our plain ncdhw / goidhw operands
// reordered to the blocked layouts its direct jit kernels use; one primitive per geometry,
// cached process-wide like host::gemm) for f32/bf16/f16, and a
// direct loop for f64 and integers (oneDNN has neither). Operands are packed to f32 first when
// their values change (bf16/f16 widening, bf16 rounding for DEFAULT/HIGH) or their layout
// does (lhs dilation or negative padding: the input is materialized dilated and padded).
// F32 precision as dot_general (docs/decisions/convolution.md):
//   DEFAULT  both operands rounded to bf16 (RNE), f32 accumulation.
//   HIGH     conv(hi(x), hi(w) + lo(w)) + conv(lo(x), hi(w)), two f32 convolutions.
//   HIGHEST  f32 as stored.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "runtime/host/dnnl_scratch.h"
#include "runtime/host/gemm.h"
#include "runtime/host/kernels.h"
#include "runtime/host/numeric.h"
#include "runtime/host/parallel.h"

namespace torch_tpu::host {
namespace {

using ir::DType;
using dnnl::memory;

// The geometry in canonical 3-d form (missing leading spatial dims have size 1, no padding,
// no dilation). Stored in Step::v0 by prepare_conv.
struct Geo {
  int64_t S, N, C, O, G;
  int64_t X[3], K[3], Y[3], str[3], lo[3], hi[3], ld[3], rd[3];
  // The input as the oneDNN primitive reads it ([N, C, Xp]) and its padding.
  int64_t Xp[3], plo[3], phi[3];
  bool materialize;  // lhs dilation or negative padding: Xp holds the padded input
  bool bf16;         // bf16 operands read as stored, f32 result (a mixed convolution)
  bool tres;         // the result stored [O, N, spatial] (attrs.result_transposed)
  bool gemm;         // im2col + one GEMM instead of oneDNN's convolution (gemm_conv_takes)
  // Where canonical result element (n * O + o) * out_plane + q is stored.
  int64_t out_at(int64_t i) const {
    if (!tres) return i;
    int64_t yp = Y[0] * Y[1] * Y[2], q = i % yp, no = i / yp;
    return ((no % O) * N + no / O) * yp + q;
  }
  int64_t in_plane() const { return X[0] * X[1] * X[2]; }
  int64_t p_plane() const { return Xp[0] * Xp[1] * Xp[2]; }
  int64_t k_plane() const { return K[0] * K[1] * K[2]; }
  int64_t out_plane() const { return Y[0] * Y[1] * Y[2]; }
};

std::vector<int64_t> encode(const Geo& g) {
  std::vector<int64_t> v(sizeof(Geo) / sizeof(int64_t) + 1);
  std::memcpy(v.data(), &g, sizeof g);
  return v;
}
Geo decode(const std::vector<int64_t>& v) {
  Geo g;
  std::memcpy(&g, v.data(), sizeof g);
  return g;
}

enum class Part : uint8_t { Value, Hi, Lo, HiPlusLo };

template <Part P>
float part(float x) {
  if constexpr (P == Part::Value) return x;
  float hi = round_bf16(x);
  if constexpr (P == Part::Hi) return hi;
  if constexpr (P == Part::Lo) return round_bf16(x - hi);
  return hi + round_bf16(x - hi);
}

// dst[i] = part(src[i]) for n elements.
template <DType D, Part P>
void pack_flat(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const typename DT<D>::S*>(src);
  parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = part<P>(static_cast<float>(DT<D>::load(s[i])));
  });
}

// The input [N*C planes of X] into [N*C planes of Xp]: element i goes to i*ld + lo (dropped
// outside), the rest is zero.
template <DType D, Part P>
void pack_dilated(const void* src, float* dst, const Geo& g) {
  const auto* s = static_cast<const typename DT<D>::S*>(src);
  int64_t in = g.in_plane(), out = g.p_plane();
  parallel_for(g.N * g.C, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, out)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      float* d = dst + pl * out;
      std::fill(d, d + out, 0.0f);
      const auto* x = s + pl * in;
      for (int64_t i0 = 0; i0 < g.X[0]; ++i0) {
        int64_t p0 = i0 * g.ld[0] + g.lo[0];
        if (p0 < 0 || p0 >= g.Xp[0]) continue;
        for (int64_t i1 = 0; i1 < g.X[1]; ++i1) {
          int64_t p1 = i1 * g.ld[1] + g.lo[1];
          if (p1 < 0 || p1 >= g.Xp[1]) continue;
          for (int64_t i2 = 0; i2 < g.X[2]; ++i2) {
            int64_t p2 = i2 * g.ld[2] + g.lo[2];
            if (p2 < 0 || p2 >= g.Xp[2]) continue;
            d[(p0 * g.Xp[1] + p1) * g.Xp[2] + p2] =
                part<P>(static_cast<float>(DT<D>::load(x[(i0 * g.X[1] + i1) * g.X[2] + i2])));
          }
        }
      }
    }
  });
}

template <DType D, Part P>
void pack_input(const void* src, float* dst, const Geo& g) {
  if (g.materialize) pack_dilated<D, P>(src, dst, g);
  else pack_flat<D, P>(src, dst, g.N * g.C * g.in_plane());
}

template <DType D>
void pack_input_part(const void* src, float* dst, const Geo& g, Part p) {
  switch (p) {
    case Part::Value: return pack_input<D, Part::Value>(src, dst, g);
    case Part::Hi: return pack_input<D, Part::Hi>(src, dst, g);
    case Part::Lo: return pack_input<D, Part::Lo>(src, dst, g);
    case Part::HiPlusLo: return pack_input<D, Part::HiPlusLo>(src, dst, g);
  }
}
template <DType D>
void pack_weight_part(const void* src, float* dst, int64_t n, Part p) {
  switch (p) {
    case Part::Value: return pack_flat<D, Part::Value>(src, dst, n);
    case Part::Hi: return pack_flat<D, Part::Hi>(src, dst, n);
    case Part::Lo: return pack_flat<D, Part::Lo>(src, dst, n);
    case Part::HiPlusLo: return pack_flat<D, Part::HiPlusLo>(src, dst, n);
  }
}

// The convolution as a direct loop over real taps (padding and lhs-dilation holes are skipped):
// y(no * out_plane + q) = sum of x(input index) * w(weight index), accumulated in Acc.
template <typename Acc, typename X, typename W, typename Y>
void direct_loop(const Geo& g, X x, W w, Y y) {
  int64_t Cg = g.C / g.G, Og = g.O / g.G, yp = g.out_plane();
  int64_t work = std::max<int64_t>(1, Cg * g.k_plane() * yp);
  parallel_for(g.N * g.O, std::max<int64_t>(1, kParallelGrain / work), [&](int64_t b, int64_t e) {
    for (int64_t no = b; no < e; ++no) {
      int64_t n = no / g.O, o = no % g.O, grp = o / Og;
      for (int64_t q = 0; q < yp; ++q) {
        int64_t yo[3] = {q / (g.Y[1] * g.Y[2]), q / g.Y[2] % g.Y[1], q % g.Y[2]};
        Acc acc = 0;
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t k = 0; k < g.k_plane(); ++k) {
            int64_t kk[3] = {k / (g.K[1] * g.K[2]), k / g.K[2] % g.K[1], k % g.K[2]}, idx = 0;
            bool ok = true;
            for (int d = 0; d < 3 && ok; ++d) {
              int64_t p = yo[d] * g.str[d] + kk[d] * g.rd[d] - g.lo[d];
              ok = p >= 0 && p % g.ld[d] == 0 && p / g.ld[d] < g.X[d];
              idx = idx * g.X[d] + (ok ? p / g.ld[d] : 0);
            }
            if (ok) acc += x((n * g.C + grp * Cg + c) * g.in_plane() + idx) * w((o * Cg + c) * g.k_plane() + k);
          }
        y(no * yp + q, acc);
      }
    }
  });
}

// An lhs-dilated convolution (a transposed conv, a strided conv's input gradient) whose
// weights hold an Inf or NaN: the holes between dilated input elements are not input
// (StableHLO's lhs_dilation), so a hole times an Inf weight must not reach a sum. The
// materialized input would put 0 * inf = NaN into outputs whose real taps are all finite
// (CPU and XLA give the finite sum there); this direct loop skips the holes. Rare, so slow.
template <DType D>
void conv_skip_holes(const void* src, const float* w, float* y, const Geo& g, Part px) {
  const auto* x = static_cast<const typename DT<D>::S*>(src);
  auto load = [&](int64_t i) {
    float v = static_cast<float>(DT<D>::load(x[i]));
    switch (px) {
      case Part::Value: return part<Part::Value>(v);
      case Part::Hi: return part<Part::Hi>(v);
      case Part::Lo: return part<Part::Lo>(v);
      case Part::HiPlusLo: return part<Part::HiPlusLo>(v);
    }
    return v;
  };
  direct_loop<float>(g, load, [&](int64_t i) { return w[i]; }, [&](int64_t i, float acc) { y[g.out_at(i)] = acc; });
}

bool lhs_dilated(const Geo& g) { return g.ld[0] > 1 || g.ld[1] > 1 || g.ld[2] > 1; }

bool all_finite(const float* w, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(w[i])) return false;
  return true;
}

// ---- oneDNN primitives, cached by geometry -----------------------------------------------

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// The convolution runs on the layouts oneDNN picks (format `any`: blocked nChw8c and
// OIhw8i8o on AVX2, its direct jit kernels); our tensors are plain, so src and weights are
// reordered in and dst out through scratch when the picked layout is not the plain one.
struct Descs {
  memory::desc src, wei, dst;     // plain (ours)
  memory::desc bsrc, bwei, bdst;  // as the primitive reads / writes them
  int64_t bytes(int r) const {    // scratch for a blocked copy (0 when plain)
    const memory::desc& b = r == 0 ? bsrc : r == 1 ? bwei : bdst;
    return b != (r == 0 ? src : r == 1 ? wei : dst) ? static_cast<int64_t>(b.get_size()) : 0;
  }
  int64_t blocked_bytes() const {  // all three, 64-byte aligned, laid out src | wei | dst
    int64_t n = 0;
    for (int r = 0; r < 3; ++r) n += (bytes(r) + 63) / 64 * 64;
    return n;
  }
};
struct Prim : Descs {
  memory::desc scratch;  // the primitive's scratchpad (user-managed: dnnl_scratch.h)
  dnnl::convolution_forward prim;
  std::optional<dnnl::reorder> rsrc, rwei, rdst;
};

memory::dims spatial(const Geo& g, const int64_t* v) { return memory::dims(v + 3 - g.S, v + 3); }

// The descriptors and oneDNN's primitive descriptor for a geometry (no kernel generated yet).
dnnl::convolution_forward::primitive_desc make_pd(const Geo& g, Descs* p) {
  using tag = memory::format_tag;
  static const tag kAct[] = {tag::ncw, tag::nchw, tag::ncdhw};
  static const tag kWei[] = {tag::oiw, tag::oihw, tag::oidhw};
  static const tag kGWei[] = {tag::goiw, tag::goihw, tag::goidhw};
  auto dims = [&](std::initializer_list<int64_t> lead, const int64_t* sp) {
    memory::dims d(lead);
    for (int64_t x : spatial(g, sp)) d.push_back(x);
    return d;
  };
  auto f32 = memory::data_type::f32, in = g.bf16 ? memory::data_type::bf16 : f32;
  p->src = memory::desc(dims({g.N, g.C}, g.Xp), in, kAct[g.S - 1]);
  p->dst = memory::desc(dims({g.N, g.O}, g.Y), f32, kAct[g.S - 1]);
  if (g.tres) {  // [N, O, Y] dims stored as [O, N, Y]: oneDNN writes (or reorders into) it
    memory::dims st(2 + g.S);
    int64_t plane = 1;
    for (int64_t i = g.S - 1; i >= 0; --i) st[2 + i] = plane, plane *= g.Y[3 - g.S + i];
    st[0] = plane, st[1] = plane * g.N;
    p->dst = memory::desc(dims({g.N, g.O}, g.Y), f32, st);
  }
  if (g.G == 1) p->wei = memory::desc(dims({g.O, g.C}, g.K), in, kWei[g.S - 1]);
  else p->wei = memory::desc(dims({g.G, g.O / g.G, g.C / g.G}, g.K), in, kGWei[g.S - 1]);
  memory::dims dil;
  for (int64_t d : spatial(g, g.rd)) dil.push_back(d - 1);
  // oneDNN wants pr such that (Xp + pl + pr - window) / stride + 1 == Y exactly in integers.
  memory::dims pl = spatial(g, g.plo), pr;
  for (int64_t i = 3 - g.S; i < 3; ++i) {
    int64_t win = (g.K[i] - 1) * g.rd[i] + 1;
    pr.push_back((g.Y[i] - 1) * g.str[i] + win - g.Xp[i] - g.plo[i]);
  }
  // Negative right padding means the last input elements are never read: oneDNN's kernels
  // still touch them past the end (a crash when the input ends a page), so the source is
  // described cropped instead (its dims shrink, its strides stay those of the whole buffer).
  bool cropped = false;
  memory::dims sdims = p->src.get_dims(), sstrides(sdims.size());
  for (int64_t i = static_cast<int64_t>(sdims.size()) - 1, st = 1; i >= 0; --i) sstrides[i] = st, st *= sdims[i];
  for (size_t i = 0; i < pr.size(); ++i)
    if (pr[i] < 0) sdims[2 + i] += pr[i], pr[i] = 0, cropped = true;
  if (cropped) p->src = memory::desc(sdims, in, sstrides);
  // Blocked layouts (oneDNN's direct jit kernels) for one group and non-negative left padding,
  // rhs dilation and materialized (lhs-dilated) inputs included: on plain layouts oneDNN picks
  // its reference kernel for those, which made a strided convolution's backward (its input
  // gradient has lhs dilation = stride, its weight gradient rhs dilation = stride) 100-1000x
  // slower than PyTorch CPU. Grouped convolutions keep the plain layouts.
  bool blocked = g.G == 1;
  for (int64_t v : pl) blocked &= v >= 0;
  auto any = [&](const memory::desc& d) {
    return blocked ? memory::desc(d.get_dims(), d.get_data_type(), tag::any) : d;
  };
  // A plain-layout primitive writes a plain dst, reordered into the transposed result after:
  // given the [O, N, Y] strides itself, oneDNN (AVX2) falls back to its reference kernel, which
  // is slow and sums in another order than the plain conv the result must equal bit for bit.
  memory::desc want_dst = blocked || !g.tres ? any(p->dst) : memory::desc(dims({g.N, g.O}, g.Y), f32, kAct[g.S - 1]);
  dnnl::convolution_forward::primitive_desc pd(
      engine(), dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, any(p->src),
      any(p->wei), want_dst, spatial(g, g.str), dil, pl, pr, user_scratchpad_attr());
  p->bsrc = pd.src_desc(), p->bwei = pd.weights_desc(), p->bdst = pd.dst_desc();
  return pd;
}

std::shared_ptr<Prim> make_prim(const Geo& g) {
  auto p = std::make_shared<Prim>();
  auto pd = make_pd(g, p.get());
  p->scratch = pd.scratchpad_desc();
  p->prim = dnnl::convolution_forward(pd);
  if (p->bsrc != p->src) p->rsrc = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p->src, engine(), p->bsrc));
  if (p->bwei != p->wei) p->rwei = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p->wei, engine(), p->bwei));
  if (p->bdst != p->dst) p->rdst = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), p->bdst, engine(), p->dst));
  return p;
}

// Keyed by the geometry and the executing thread's OpenMP thread count: oneDNN sizes a
// primitive's per-thread scratch by the count of the thread that creates it, so a primitive
// made on a narrower thread would overrun its scratchpad on a wider team.
std::shared_ptr<Prim> lookup(std::vector<int64_t> key, const Geo& g) {
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<Prim>> cache;
  key.push_back(omp_get_max_threads());
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto p = make_prim(g);  // outside the lock: creation can take a millisecond
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();
  return cache.emplace(key, p).first->second;
}

// blk: scratch for the blocked copies, laid out src | wei | dst as Descs::blocked_bytes says.
void run_prim(const Prim& p, const void* x, const void* w, float* y, char* blk) {
  thread_local dnnl::stream stream(engine());
  memory mx(p.src, engine(), const_cast<void*>(x)), mw(p.wei, engine(), const_cast<void*>(w));
  memory my(p.dst, engine(), y);
  memory bx = mx, bw = mw, by = my;
  char* at = blk;
  auto next = [&](int r) { at += (p.bytes(r) + 63) / 64 * 64; };
  if (p.rsrc) bx = memory(p.bsrc, engine(), at), next(0), p.rsrc->execute(stream, mx, bx);
  if (p.rwei) bw = memory(p.bwei, engine(), at), next(1), p.rwei->execute(stream, mw, bw);
  if (p.rdst) by = memory(p.bdst, engine(), at);
  p.prim.execute(stream, {{DNNL_ARG_SRC, bx}, {DNNL_ARG_WEIGHTS, bw}, {DNNL_ARG_DST, by},
                          {DNNL_ARG_SCRATCHPAD, thread_scratchpad(engine(), p.scratch)}});
  if (p.rdst) p.rdst->execute(stream, by, my);
  stream.wait();
}

// ---- small convolutions as one GEMM -----------------------------------------------------
// oneDNN's direct kernels block channels and spatial positions; with few output positions per
// image (ResNet's last stage on 64x64 images: 2x2) or few input channels (a weight gradient in
// its [C, N, X] form has the batch as input channels) they ran at 40-130 GFLOP/s where the
// GEMM runs at several hundred. There the convolution is im2col and one GEMM:
//   out[o, (n, q)] = sum over (c, k) of W[o, (c, k)] * col[(n, q), (c, k)],
// out stored [O, N, Q]: the result_transposed layout as is, else transposed into [N, O, Q].
// Sums run in the GEMM's order (not the convolution's): f32 rounding differs, not the recipe.

// force: TORCH_TPU_CONV_GEMM=1 (every one-group convolution), else the measured rule.
bool gemm_conv_takes(const Geo& g, bool force) {
  if (g.G != 1 || g.N * g.O * g.out_plane() == 0 || g.C == 0) return false;
  if (force) return true;
  int64_t rows = g.N * g.out_plane(), cols = g.C * g.k_plane();
  if (rows * cols > (int64_t{1} << 22)) return false;  // col: at most 16 MB
  // Measured per ResNet-18 geometry (64x64 images, batch 8, docs/decisions/convolution.md):
  // the GEMM wins at <= 4 output positions per image, and for weight gradients (C = the
  // batch) whose kernel (the output gradient) has <= 16 positions; oneDNN wins elsewhere.
  return g.out_plane() <= 4 || (g.C <= 16 && g.k_plane() <= 16);
}

// col[(n, q), (c, k)] = x[n, c, q * str + k * rd - plo] (x: [N, C, Xp]; zero outside it).
template <class T>
void im2col(const T* x, T* col, const Geo& g) {
  const int64_t Q = g.out_plane(), KP = g.k_plane(), CK = g.C * KP, XP = g.p_plane();
  parallel_for(g.N * Q, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, CK)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t n = r / Q, q = r % Q;
      int64_t qi[3] = {q / (g.Y[1] * g.Y[2]), (q / g.Y[2]) % g.Y[1], q % g.Y[2]};
      T* dst = col + r * CK;
      const T* xn = x + n * g.C * XP;
      for (int64_t k = 0; k < KP; ++k) {
        int64_t ki[3] = {k / (g.K[1] * g.K[2]), (k / g.K[2]) % g.K[1], k % g.K[2]};
        int64_t off = 0;
        bool in = true;
        for (int d = 0; d < 3; ++d) {
          int64_t p = qi[d] * g.str[d] + ki[d] * g.rd[d] - g.plo[d];
          in &= p >= 0 && p < g.Xp[d];
          off = off * g.Xp[d] + p;
        }
        if (in) {
          for (int64_t c = 0; c < g.C; ++c) dst[c * KP + k] = xn[c * XP + off];
        } else {
          for (int64_t c = 0; c < g.C; ++c) dst[c * KP + k] = T{};
        }
      }
    }
  });
}

// y (stored [N, O, Q], or [O, N, Q] when tres) = conv(x, w); w canonical [O, C, K]. col and
// out: scratch (out unused when tres).
void gemm_conv(const Geo& g, const void* x, const void* w, float* y, void* col, float* out, GemmType t) {
  const int64_t Q = g.out_plane(), NQ = g.N * Q;
  if (t == GemmType::BF16) im2col(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(col), g);
  else im2col(static_cast<const float*>(x), static_cast<float*>(col), g);
  float* c = g.tres ? y : out;
  gemm(GemmShape{1, g.O, NQ, g.C * g.k_plane(), false, true}, t, w, col, c);
  if (g.tres) return;
  parallel_for(g.N * g.O, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, Q)), [&](int64_t b, int64_t e) {
    for (int64_t no = b; no < e; ++no) {
      int64_t n = no / g.O, o = no % g.O;
      std::copy(out + o * NQ + n * Q, out + o * NQ + n * Q + Q, y + no * Q);
    }
  });
}

// ---- kernels ------------------------------------------------------------------------------

// Scratch regions (byte offsets in Step::offsets): packed input (two for HIGH), packed
// weight (two), f32 result, second f32 result (HIGH).
// blocked copies for oneDNN (Descs::blocked_bytes).
// im2col and the GEMM's [O, N, Q] result for gemm_conv (kCol, kOut).
enum { kX0, kX1, kW0, kW1, kY0, kY1, kBlk, kWc, kCol, kOut, kNumRegions };

template <class T>
T* region(const KernelArgs& a, int r) {
  return reinterpret_cast<T*>(static_cast<char*>(a.scratch) + a.step.offsets[r]);
}

// The kernel in canonical [O, C/G, k...] layout: the operand as stored, or (kernel_transposed /
// kernel_reversed) one strided copy of it into scratch (copies[0]; source offset i3 elements
// of i1 bytes).
const void* kernel_operand(const KernelArgs& a) {
  if (a.step.copies.empty()) return a.in[1];
  void* dst = region<char>(a, kWc);
  run_copy(a.step.copies[0], dst, static_cast<const char*>(a.in[1]) + a.step.i3 * a.step.i1,
           static_cast<size_t>(a.step.i1));
  return dst;
}

// Step data: v0 = Geo, i0 = precision recipe (0 direct f32, 1 one packed pass, 2 HIGH),
// i2 = scratch bytes reserved for the blocked copies (kBlk).
template <DType D>
void conv_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  Geo g = decode(a.step.v0);
  int64_t out_n = g.N * g.O * g.out_plane();
  if (out_n == 0) return;
  const bool f32_out = a.step.n->dtype == DType::F32;  // f32, or a mixed bf16 one widened
  float* y = f32_out ? static_cast<float*>(a.out) : region<float>(a, kY0);
  if (g.C == 0 || g.k_plane() == 0) {
    std::fill(y, y + out_n, 0.0f);
  } else {
    std::shared_ptr<Prim> prim = g.gemm ? nullptr : lookup(a.step.v0, g);
    char* blk = region<char>(a, kBlk);
    std::unique_ptr<char[]> own;  // the executing thread's primitive picked bigger blocked copies
    if (prim && prim->blocked_bytes() > a.step.i2) own.reset(new char[prim->blocked_bytes()]), blk = own.get();
    auto run = [&](const void* x, const void* w, float* out) {
      if (g.gemm) gemm_conv(g, x, w, out, region<char>(a, kCol), region<float>(a, kOut), GemmType::F32);
      else run_prim(*prim, x, w, out, blk);
    };
    int64_t wn = g.O * (g.C / g.G) * g.k_plane();
    int recipe = static_cast<int>(a.step.i0);
    if (recipe == 0) {
      run(a.in[0], kernel_operand(a), y);
    } else {
      bool high = recipe == 2;
      Part px = D != DType::F32 || a.step.n->attrs.precision == ir::Precision::Highest ? Part::Value : Part::Hi;
      float *x0 = region<float>(a, kX0), *w0 = region<float>(a, kW0);
      const void* wk = kernel_operand(a);
      pack_weight_part<D>(wk, w0, wn, high ? Part::HiPlusLo : px);
      if (lhs_dilated(g) && !all_finite(w0, wn)) {
        conv_skip_holes<D>(a.in[0], w0, y, g, high ? Part::Value : px);
        high = false;
      } else {
        pack_input_part<D>(a.in[0], x0, g, px);
        run(x0, w0, y);
      }
      if (high) {
        float *x1 = region<float>(a, kX1), *w1 = region<float>(a, kW1), *y1 = region<float>(a, kY1);
        pack_input_part<D>(a.in[0], x1, g, Part::Lo);
        pack_weight_part<D>(wk, w1, wn, Part::Hi);
        run(x1, w1, y1);
        parallel_for(out_n, kParallelGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) y[i] += y1[i];
        });
      }
    }
  }
  if constexpr (D != DType::F32) {
    if (f32_out) return;
    S* o = static_cast<S*>(a.out);
    parallel_for(out_n, kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = DT<D>::store(y[i]);
    });
  }
}

// A mixed convolution (host plan, DEFAULT on CPUs with a native bf16 kernel): bf16 operands
// as stored, exact products and f32 sums on oneDNN's bf16 kernels, an f32 result. As the
// native bf16 GEMM, those kernels read bf16 subnormals as zero.
void conv_mixed_kernel(const KernelArgs& a) {
  Geo g = decode(a.step.v0);
  int64_t out_n = g.N * g.O * g.out_plane();
  float* y = static_cast<float*>(a.out);
  if (out_n == 0) return;
  if (g.C == 0 || g.k_plane() == 0) {
    std::fill(y, y + out_n, 0.0f);
    return;
  }
  if (g.gemm) {
    gemm_conv(g, a.in[0], kernel_operand(a), y, region<char>(a, kCol), region<float>(a, kOut), GemmType::BF16);
    return;
  }
  auto prim = lookup(a.step.v0, g);
  char* blk = region<char>(a, kBlk);
  std::unique_ptr<char[]> own;
  if (prim->blocked_bytes() > a.step.i2) own.reset(new char[prim->blocked_bytes()]), blk = own.get();
  run_prim(*prim, a.in[0], kernel_operand(a), y, blk);
}

// f64 and integers: direct loops, f64 sums / wrapping integer sums (oneDNN has neither).
template <DType D>
void conv_direct_kernel(const KernelArgs& a) {
  using S = typename DT<D>::S;
  using Acc = std::conditional_t<std::is_floating_point_v<S>, double, uint64_t>;
  Geo g = decode(a.step.v0);
  const S* x = static_cast<const S*>(a.in[0]);
  const S* w = static_cast<const S*>(kernel_operand(a));
  S* y = static_cast<S*>(a.out);
  direct_loop<Acc>(
      g, [&](int64_t i) { return static_cast<Acc>(x[i]); }, [&](int64_t i) { return static_cast<Acc>(w[i]); },
      [&](int64_t i, Acc acc) { y[g.out_at(i)] = static_cast<S>(acc); });
}

}  // namespace

bool conv_mixed_takes(const ir::Node& n) {
  const ir::Attrs& a = n.attrs;
  if (n.op != ir::OpCode::Convolution || a.groups != 1 || !gemm_has_bf16()) return false;
  for (size_t i = 0; i < a.lhs_dilation.size(); ++i)
    if (a.lhs_dilation[i] != 1 || a.pad_lo[i] < 0 || a.pad_hi[i] < 0) return false;
  return true;
}

void prepare_conv(const ir::Graph& graph, Step& s) {
  const ir::Node& n = *s.n;
  const ir::Node& l = graph.nodes()[n.operands[0]];
  const ir::Node& r = graph.nodes()[n.operands[1]];
  const ir::Attrs& at = n.attrs;
  Geo g{};
  g.S = static_cast<int64_t>(l.shape.size()) - 2;
  g.N = l.shape[0], g.C = l.shape[1], g.O = n.shape[at.result_transposed ? 0 : 1], g.G = at.groups;
  g.tres = at.result_transposed;
  bool neg = false, dil = false;
  for (int i = 0; i < 3; ++i) {
    int j = i - (3 - static_cast<int>(g.S));  // spatial index, < 0 for the padding dims
    bool real = j >= 0;
    g.X[i] = real ? l.shape[2 + j] : 1;
    g.K[i] = real ? r.shape[2 + j] : 1;
    g.Y[i] = real ? n.shape[2 + j] : 1;  // spatial dims: the same in either result layout
    g.str[i] = real ? at.window_strides[j] : 1;
    g.lo[i] = real ? at.pad_lo[j] : 0;
    g.hi[i] = real ? at.pad_hi[j] : 0;
    g.ld[i] = real ? at.lhs_dilation[j] : 1;
    g.rd[i] = real ? at.rhs_dilation[j] : 1;
    neg |= g.lo[i] < 0 || g.hi[i] < 0;
    dil |= g.ld[i] > 1;
  }
  g.materialize = neg || dil;
  // A mixed convolution (bf16 operands, f32 result) on oneDNN's bf16 kernels where they take
  // it; otherwise widened to f32 as any bf16 one.
  g.bf16 = l.dtype == DType::BF16 && n.dtype == DType::F32 && conv_mixed_takes(n);
  for (int i = 0; i < 3; ++i) {
    if (g.materialize) {
      g.Xp[i] = std::max<int64_t>(0, (g.X[i] - 1) * g.ld[i] + 1 + g.lo[i] + g.hi[i]);
      g.plo[i] = g.phi[i] = 0;
    } else {
      g.Xp[i] = g.X[i], g.plo[i] = g.lo[i], g.phi[i] = g.hi[i];
    }
  }
  static const int conv_gemm = [] {  // TORCH_TPU_CONV_GEMM=0: never, 1: always (G == 1), else auto
    const char* v = std::getenv("TORCH_TPU_CONV_GEMM");
    return v == nullptr || (std::strcmp(v, "0") != 0 && std::strcmp(v, "1") != 0) ? -1 : std::atoi(v);
  }();
  bool floating = ir::is_float(l.dtype) && l.dtype != DType::F64;
  g.gemm = floating && conv_gemm != 0 && gemm_conv_takes(g, conv_gemm == 1);
  s.v0 = encode(g);
  s.i1 = static_cast<int64_t>(ir::dtype_size(r.dtype));
  int64_t wc_bytes = 0;
  if (at.kernel_transposed || at.kernel_reversed) {  // the canonical kernel, copied per run
    std::vector<int64_t> ws = contiguous_strides(r.shape), src(r.shape.size());
    ir::Shape canon = r.shape;
    if (at.kernel_transposed) std::swap(canon[0], canon[1]);
    src[0] = ws[at.kernel_transposed ? 1 : 0];
    src[1] = ws[at.kernel_transposed ? 0 : 1];
    s.i3 = 0;
    for (size_t d = 2; d < r.shape.size(); ++d) {
      src[d] = at.kernel_reversed ? -ws[d] : ws[d];
      if (at.kernel_reversed && r.shape[d] > 0) s.i3 += (r.shape[d] - 1) * ws[d];
    }
    std::vector<int64_t> dst = contiguous_strides(canon);
    s.copies.push_back(make_copy_plan(canon, dst.data(), src.data()));
    wc_bytes = ir::numel(canon) * s.i1;
  }
  if (!ir::is_float(l.dtype) || l.dtype == DType::F64) {
    if (wc_bytes > 0) {
      s.offsets.assign(kNumRegions, 0);
      s.offsets[kWc] = s.scratch_bytes;
      s.scratch_bytes += (wc_bytes + 63) / 64 * 64;
    }
    TPU_DISPATCH_DTYPE(l.dtype, if constexpr (D != DType::Bool && D != DType::F16 && D != DType::BF16 &&
                                              D != DType::F32) s.fn = &conv_direct_kernel<D>;)
    TPU_CHECK(s.fn != nullptr, "[host convolution] no kernel for dtype ", ir::dtype_name(l.dtype));
    return;
  }
  bool high = l.dtype == DType::F32 && at.precision == ir::Precision::High;
  bool direct = (l.dtype == DType::F32 && at.precision == ir::Precision::Highest && !g.materialize) || g.bf16;
  s.i0 = direct ? 0 : high ? 2 : 1;
  int64_t xn = g.N * g.C * g.p_plane(), wn = g.O * (g.G ? g.C / g.G : 0) * g.k_plane();
  int64_t yn = g.N * g.O * g.out_plane();
  int64_t blk = 0;
  if (g.C > 0 && g.k_plane() > 0 && yn > 0 && !g.gemm) {
    // Only descriptors here, to size the blocked copies: the primitive is made (and cached) on
    // the executing thread, since oneDNN sizes a primitive's per-thread scratch by the OpenMP
    // thread count of the thread creating it (running a compile-thread primitive on the wider
    // worker team overran it: conv_transpose3d's samples crashed).
    Descs d;
    make_pd(g, &d);
    blk = d.blocked_bytes();
  }
  s.i2 = blk;
  int64_t cn = g.gemm ? g.N * g.out_plane() * g.C * g.k_plane() : 0;
  int64_t sizes[kNumRegions] = {direct ? 0 : xn, high ? xn : 0, direct ? 0 : wn, high ? wn : 0,
                                n.dtype == DType::F32 ? 0 : yn, high ? yn : 0, (blk + 3) / 4, 0,
                                cn, g.gemm && !g.tres ? yn : 0};
  s.offsets.assign(kNumRegions, 0);
  for (int i = 0; i < kNumRegions; ++i) {
    s.offsets[i] = s.scratch_bytes;
    s.scratch_bytes += i == kWc ? (wc_bytes + 63) / 64 * 64 : (sizes[i] * 4 + 63) / 64 * 64;
  }
  if (g.bf16) {
    s.fn = &conv_mixed_kernel;
    return;
  }
  switch (l.dtype) {
    case DType::F32: s.fn = &conv_kernel<DType::F32>; break;
    case DType::BF16: s.fn = &conv_kernel<DType::BF16>; break;
    case DType::F16: s.fn = &conv_kernel<DType::F16>; break;
    default: break;
  }
  TPU_CHECK(s.fn != nullptr, "[host convolution] no kernel for dtype ", ir::dtype_name(l.dtype));
}

}  // namespace torch_tpu::host
