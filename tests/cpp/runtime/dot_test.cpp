// dot_general: layouts (batch/contract dims anywhere), dtypes, and the three F32
// precisions: DEFAULT equals sgemm on bf16-rounded inputs up to summation order (oneDNN and
// OpenBLAS block K differently), its input rounding is RNE bit for bit against an
// independent reference; relative errors against double are near 2^-8 / 2^-16 / 2^-22 for
// DEFAULT / HIGH / HIGHEST.
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "runtime/host/gemm.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

ir::Attrs dims(std::vector<int64_t> lb, std::vector<int64_t> rb, std::vector<int64_t> lc,
               std::vector<int64_t> rc, ir::Precision p = ir::Precision::Highest) {
  ir::Attrs a;
  a.lhs_batch = lb, a.rhs_batch = rb, a.lhs_contract = lc, a.rhs_contract = rc;
  a.precision = p;
  return a;
}

// Reference for lhs [B, K, M] (batch 0, contract 1) x rhs [N, B, K] (batch 1, contract 2).
double ref(const Tensor& l, const Tensor& r, int64_t b, int64_t m, int64_t n, int64_t B, int64_t K,
           int64_t M) {
  double acc = 0;
  for (int64_t k = 0; k < K; ++k) acc += l.get((b * K + k) * M + m) * r.get((n * B + b) * K + k);
  return acc;
}

TEST(HostDot, LayoutsAndDtypes) {
  int64_t B = 2, K = 5, M = 3, N = 4;
  for (DType d : all_dtypes()) {
    if (d == DType::Bool) continue;
    Tensor l = make(d, {B, K, M}, [](int64_t i) { return (i * 5) % 7 - 2; });
    Tensor r = make(d, {N, B, K}, [](int64_t i) { return (i * 3) % 5 - 1; });
    if (d == DType::U8 || d == DType::U64) {
      l = make(d, {B, K, M}, [](int64_t i) { return (i * 5) % 7; });
      r = make(d, {N, B, K}, [](int64_t i) { return (i * 3) % 5; });
    }
    for (auto p : {ir::Precision::Default, ir::Precision::High, ir::Precision::Highest}) {
      Graph g;
      Value pl = g.param(d, {B, K, M}), pr = g.param(d, {N, B, K});
      Value out = g.dot(pl, pr, dims({0}, {1}, {1}, {2}, p));
      g.set_outputs({out});
      ASSERT_EQ(g.shape(out), (Shape{B, M, N}));
      Tensor got = run(g, {l, r})[0];
      for (int64_t b = 0; b < B; ++b)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            Tensor w(d, {1});
            w.set(0, ref(l, r, b, m, n, B, K, M));  // small integers: exact in every dtype
            ASSERT_EQ(got.get((b * M + m) * N + n), w.get(0)) << ir::dtype_name(d);
          }
    }
  }
}

TEST(HostDot, IntegerWraps) {
  Graph g;
  Value pl = g.param(DType::I32, {1, 2}), pr = g.param(DType::I32, {2, 1});
  Value out = g.dot(pl, pr, dims({}, {}, {1}, {0}));
  g.set_outputs({out});
  auto r = run(g, {make(DType::I32, {1, 2}, [](int64_t) { return 65536; }),
                   make(DType::I32, {2, 1}, [](int64_t) { return 65536; })});
  EXPECT_EQ(r[0].geti(0), 0);  // 2 * 2^32 wraps to 0
}

struct Mats {
  int64_t M = 64, K = 300, N = 48;
  Tensor a, b;
  std::vector<double> exact;
  Mats() {
    a = make(DType::F32, {M, K}, [](int64_t i) { return std::sin(i * 0.37) + 0.1; });
    b = make(DType::F32, {K, N}, [](int64_t i) { return std::cos(i * 0.11) + 0.2; });
    exact.assign(M * N, 0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) exact[m * N + n] += a.get(m * K + k) * b.get(k * N + n);
  }
  Tensor run_prec(ir::Precision p) const {
    Graph g;
    Value pa = g.param(DType::F32, {M, K}), pb = g.param(DType::F32, {K, N});
    g.set_outputs({g.dot(pa, pb, dims({}, {}, {1}, {0}, p))});
    return run(g, {a, b})[0];
  }
  // max |got - exact| / sum |a||b| over outputs (a relative error per dot product).
  double rel_err(const Tensor& got) const {
    double worst = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double mag = 0;
        for (int64_t k = 0; k < K; ++k) mag += std::fabs(a.get(m * K + k) * b.get(k * N + n));
        worst = std::max(worst, std::fabs(got.get(m * N + n) - exact[m * N + n]) / mag);
      }
    return worst;
  }
};

TEST(HostDot, DefaultPrecisionIsBf16InputsFp32Accumulate) {
  Mats t;
  Tensor got = t.run_prec(ir::Precision::Default);
  std::vector<float> ar(t.M * t.K), br(t.K * t.N), c(t.M * t.N);
  for (size_t i = 0; i < ar.size(); ++i) ar[i] = round_bf16(static_cast<float>(t.a.get(i)));
  for (size_t i = 0; i < br.size(); ++i) br[i] = round_bf16(static_cast<float>(t.b.get(i)));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t.M, t.N, t.K, 1.0f, ar.data(), t.K,
              br.data(), t.N, 0.0f, c.data(), t.N);
  // Same exact products; only the f32 summation order differs: |diff| <= K 2^-24 sum|a||b|.
  for (int64_t m = 0; m < t.M; ++m)
    for (int64_t n = 0; n < t.N; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < t.K; ++k) mag += std::fabs(ar[m * t.K + k] * br[k * t.N + n]);
      double diff = std::fabs(got.get(m * t.N + n) - c[m * t.N + n]);
      ASSERT_LE(diff, t.K * std::ldexp(mag, -24)) << m << "," << n;
    }
}

// attrs.ivalue = 1: bf16 operands, f32 result, no final rounding (the host plan's DEFAULT form
// on CPUs with a native bf16 GEMM; widened to f32 elsewhere). Operands as stored and
// transposed; equals an f32 GEMM of the widened operands up to summation order.
TEST(HostDot, MixedBf16OperandsF32Result) {
  for (bool trans_rhs : {false, true}) {
    int64_t M = 40, K = 33, N = 24;
    Shape rs = trans_rhs ? Shape{N, K} : Shape{K, N};
    Tensor l = make(DType::BF16, {M, K}, [](int64_t i) { return std::sin(0.37 * i) * 3; });
    Tensor r = make(DType::BF16, rs, [](int64_t i) { return std::cos(0.11 * i) / 7; });
    Graph g;
    Value pl = g.param(DType::BF16, {M, K}), pr = g.param(DType::BF16, rs);
    ir::Attrs a = dims({}, {}, {1}, {trans_rhs ? 1 : 0}, ir::Precision::Default);
    a.ivalue = 1;
    Value out = g.dot(pl, pr, a);
    ASSERT_EQ(g.dtype(out), DType::F32);
    g.set_outputs({out});
    Tensor got = run(g, {l, r})[0];
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double want = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          double p = l.get(m * K + k) * r.get(trans_rhs ? n * K + k : k * N + n);
          want += p, mag += std::fabs(p);
        }
        ASSERT_NEAR(got.get(m * N + n), want, K * std::ldexp(mag, -24) + 1e-30) << m << "," << n;
      }
  }
  Graph g;  // only bf16 operands may ask for an f32 result
  Value x = g.param(DType::F32, {2, 3}), y = g.param(DType::F32, {3, 2});
  ir::Attrs a = dims({}, {}, {1}, {0});
  a.ivalue = 1;
  EXPECT_THROW(g.dot(x, y, a), std::exception);
}

// Nearest bf16 by comparing distances in double; ties go to the even pattern.
uint32_t ref_bf16_bits(uint32_t u) {
  uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
  auto val = [&](uint32_t b) {  // the pattern past max finite (inf) counts as 2^128
    return (b & 0x7FFFFFFFu) == 0x7F800000u ? std::copysign(std::ldexp(1.0, 128), bits_f32(b))
                                            : static_cast<double>(bits_f32(b));
  };
  double x = bits_f32(u), dl = std::fabs(x - val(lo)), dh = std::fabs(val(hi) - x);
  if (dl != dh) return dl < dh ? lo : hi;
  return (lo & 0x10000u) == 0 ? lo : hi;
}

TEST(HostDot, DefaultRoundsInputsToNearestEvenBitForBit) {
  // x [R, 1] x [[1]]: each output is DEFAULT's rounding of one input. Ties, carries into
  // the exponent, subnormals and a stride through all finite patterns.
  std::vector<uint32_t> bits = {0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3F807FFF, 0x3F7FFFFF,
                                0xBF808001, 0x7F7F7FFF, 0x00000001, 0x00008000, 0x00018000,
                                0x80408000, 0x4B7FFF80, 0x00000000, 0x80000000};
  for (uint64_t u = 0; u < (1ull << 32); u += 65537 * 7) bits.push_back(static_cast<uint32_t>(u));
  std::erase_if(bits, [](uint32_t u) { return (u & 0x7F800000u) == 0x7F800000u; });
  int64_t R = static_cast<int64_t>(bits.size());
  Graph g;
  Value px = g.param(DType::F32, {R, 1}), pone = g.param(DType::F32, {1, 1});
  g.set_outputs({g.dot(px, pone, dims({}, {}, {1}, {0}, ir::Precision::Default))});
  Tensor x = make(DType::F32, {R, 1}, [&](int64_t i) { return bits_f32(bits[i]); });
  Tensor got = run(g, {x, make(DType::F32, {1, 1}, [](int64_t) { return 1.0; })})[0];
  for (int64_t i = 0; i < R; ++i) {
    uint32_t want = ref_bf16_bits(bits[i]);
    // -0 products sum to +0 (the accumulator starts at +0): the sign of zero is not rounding.
    uint32_t g = f32_bits(static_cast<float>(got.get(i)));
    // A native bf16 GEMM (AVX512-BF16 / AMX dot products) treats subnormal bf16 inputs as
    // zero, as a TPU's matrix unit does; the rounding itself still happened in our packing.
    bool flushed = host::gemm_has_bf16() && (want & 0x7F800000u) == 0 && (g & 0x7FFFFFFFu) == 0;
    ASSERT_EQ((want == 0x80000000u && g == 0) || flushed ? want : g, want) << std::hex << bits[i];
    ASSERT_EQ(static_cast<uint32_t>(f32_to_bf16(bits_f32(bits[i]))) << 16, want) << std::hex << bits[i];
  }
}

TEST(HostDot, PrecisionErrorLevels) {
  Mats t;
  double e_def = t.rel_err(t.run_prec(ir::Precision::Default));
  double e_high = t.rel_err(t.run_prec(ir::Precision::High));
  double e_hst = t.rel_err(t.run_prec(ir::Precision::Highest));
  std::printf("dot rel err: default 2^%.1f high 2^%.1f highest 2^%.1f\n", std::log2(e_def),
              std::log2(e_high), std::log2(e_hst));
  EXPECT_GT(e_def, std::ldexp(1.0, -12));
  EXPECT_LT(e_def, std::ldexp(1.0, -7));
  EXPECT_GT(e_high, std::ldexp(1.0, -24));
  EXPECT_LT(e_high, std::ldexp(1.0, -14));
  EXPECT_LT(e_hst, std::ldexp(1.0, -20));
  EXPECT_LT(e_high, e_def / 16);
  EXPECT_LE(e_hst, e_high);
}

TEST(HostDot, TransposedOperandsAndEmptyContraction) {
  // lhs [K, M] (contract 0), rhs [N, K] (contract 1): BLAS transpose flags.
  int64_t K = 6, M = 3, N = 2;
  Tensor l = make(DType::F64, {K, M}, [](int64_t i) { return i * 0.5; });
  Tensor r = make(DType::F64, {N, K}, [](int64_t i) { return i - 3.0; });
  Graph g;
  Value pl = g.param(DType::F64, {K, M}), pr = g.param(DType::F64, {N, K});
  Value o1 = g.dot(pl, pr, dims({}, {}, {0}, {1}));
  Value el = g.param(DType::F32, {2, 0}), er = g.param(DType::F32, {0, 3});
  Value e = g.dot(el, er, dims({}, {}, {1}, {0}));
  g.set_outputs({o1, e});
  auto res = run(g, {l, r, Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {0, 3})});
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += l.get(k * M + m) * r.get(n * K + k);
      ASSERT_DOUBLE_EQ(res[0].get(m * N + n), acc);
    }
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(res[1].get(i), 0);
}

}  // namespace
}  // namespace torch_tpu::host::testing
