// decompose_linalg (ir/passes/decompose_linalg.h): each LAPACK custom_call target, f32 and
// f64, batched, run on the host runtime (LAPACK: the reference) and on the pjrt runtime
// (decomposed into XLA-side computations, compiled by the installed plugin; skipped with
// the reason when there is none). Results must agree within a few hundred ulps; eigen and
// singular vectors up to sign, a full_matrices complement by orthonormality. Without a
// plugin the IR checks still run: no LAPACK target is left and the graph prints.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/error.h"
#include "ir/custom_call.h"
#include "ir/passes/decompose_linalg.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

using ir::CustomCallTarget;

// The pjrt runtime, or nullptr with `why` set (no plugin installed).
runtime::Runtime* pjrt_or_null(std::string* why) {
  try {
    return &runtime::pjrt_runtime();
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

std::vector<Tensor> run_pjrt(runtime::Runtime& rt, const Graph& g, std::vector<Tensor> inputs) {
  auto exe = rt.compile(g);
  std::vector<runtime::Buffer*> bufs;
  struct Release {  // also when run() throws (tests that expect the plugin to reject a graph)
    runtime::Runtime& rt;
    std::vector<runtime::Buffer*>& bufs;
    ~Release() {
      for (runtime::Buffer* b : bufs) rt.deallocate(b);
    }
  } release{rt, bufs};
  std::vector<runtime::View> in, out;
  auto device_view = [&](const Tensor& t) {
    runtime::Buffer* b = rt.allocate(0, std::max<size_t>(t.numel() * ir::dtype_size(t.dtype), 1));
    bufs.push_back(b);
    return runtime::View{b, t.dtype, t.shape, {}};
  };
  for (Tensor& t : inputs) {
    in.push_back(device_view(t));
    rt.write(in.back(), reinterpret_cast<const std::byte*>(t.data()));
  }
  std::vector<Tensor> outs;
  for (Value v : g.outputs()) outs.emplace_back(g.dtype(v), g.shape(v));
  for (Tensor& t : outs) out.push_back(device_view(t));
  exe->run(in, out);
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].numel()) rt.read(out[i], reinterpret_cast<std::byte*>(outs[i].data()));
  return outs;
}

// A graph of one call: params `in`, outputs = the results listed in `results`.
Graph call_graph(CustomCallTarget t, const std::vector<std::pair<DType, Shape>>& in, std::vector<int64_t> params,
                 const std::vector<int64_t>& results) {
  Graph g;
  std::vector<Value> ps;
  for (const auto& [d, s] : in) ps.push_back(g.param(d, s));
  std::vector<Value> outs;
  for (int64_t r : results) outs.push_back(g.op(OpCode::CustomCall, ps, ir::custom_call_attrs(t, r, params)));
  g.set_outputs(outs);
  return g;
}

// A well-conditioned general matrix batch (diagonally dominant) or a symmetric one.
Tensor matrix(DType d, const Shape& s, int kind, int seed) {
  int64_t r = s[s.size() - 2], c = s.back();
  return make(d, s, [&](int64_t i) {
    int64_t b = i / (r * c), row = (i / c) % r, col = i % c;
    int64_t lo = std::min(row, col), hi = std::max(row, col);
    int64_t key = kind == 1 ? (lo * 131 + hi * 17) : (row * 131 + col * 17);
    double h = std::sin(static_cast<double>(key + 1009 * b) * 12.9898 + seed * 78.233) * 43758.5453;
    double v = 2 * (h - std::floor(h)) - 1;  // pseudo-random in [-1, 1) (full rank)
    if (kind == 2 && row == col) v += static_cast<double>(r);  // positive-definite
    if (kind == 0 && row == col && r == c) v += 2.0 * (1 + (row % 2));
    return v;
  });
}

double tol(DType d) { return d == DType::F64 ? 1e-11 : 2e-4; }
// Eigen/singular vectors vs LAPACK: XLA's Jacobi alone was 4e-8 off in f64 (its stopping
// test misses off-diagonal mass below sqrt(eps) |A|); with the polishing step of
// decompose_linalg.cpp (eigh) they agree to rounding / gap.
double vec_tol(DType d) { return d == DType::F64 ? 1e-12 : 3e-6; }

void expect_close(const Tensor& got, const Tensor& want, double rel, const std::string& what, bool abs_vals = false) {
  ASSERT_EQ(got.shape, want.shape) << what;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.get(i), w = want.get(i);
    if (abs_vals) g = std::fabs(g), w = std::fabs(w);
    EXPECT_TRUE(close(g, w, rel, rel)) << what << " " << ir::shape_str(want.shape) << " " << ir::dtype_name(want.dtype)
                                       << " at " << i << ": got " << g << ", expected " << w;
    if (::testing::Test::HasFailure()) {
      if (std::getenv("DEBUG_LINALG"))
        for (int64_t j = 0; j < want.numel(); ++j) std::printf("%3ld %12.6g %12.6g\n", (long)j, got.get(j), want.get(j));
      return;
    }
  }
}

void expect_equal_ints(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_EQ(got.geti(i), want.geti(i)) << what << " at " << i;
}

class DecomposeLinalg : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = pjrt_or_null(&why_);
  }
  // The IR checks always; the pjrt run only with a plugin. Returns {host, pjrt} outputs.
  std::pair<std::vector<Tensor>, std::vector<Tensor>> both(const Graph& g, const std::vector<Tensor>& in) {
    Graph d = ir::decompose_linalg(g);
    EXPECT_FALSE(ir::has_lapack_calls(d));
    std::string text = d.to_stablehlo();
    EXPECT_EQ(text.find("lapack_"), std::string::npos);
    EXPECT_EQ(text.find("lu_pivots_to_permutation"), std::string::npos);
    if (!rt_) return {};
    return {run(g, in), run_pjrt(*rt_, g, in)};
  }
  runtime::Runtime* rt_ = nullptr;
  std::string why_;
};

#define SKIP_WITHOUT_PLUGIN(res) \
  if (res.first.empty()) GTEST_SKIP() << "IR checked; no pjrt run: " << why_

const DType kDts[] = {DType::F32, DType::F64};

TEST_F(DecomposeLinalg, PotrfFactorAndInfo) {
  for (DType d : kDts)
    for (int lower : {1, 0}) {
      Shape s = {2, 5, 5};
      Tensor a = matrix(d, s, 2, 1);
      a.set(25 + 2 * 5 + 2, -40);  // batch 1: the leading minor of order 3 is not positive-definite
      auto res = both(call_graph(CustomCallTarget::Potrf, {{d, s}}, {lower}, {0, 1}), {a});
      SKIP_WITHOUT_PLUGIN(res);
      for (int64_t i = 0; i < 25; ++i)  // batch 0 only: batch 1's factor is LAPACK's partial one
        EXPECT_TRUE(close(res.second[0].get(i), res.first[0].get(i), tol(d), tol(d))) << i;
      expect_equal_ints(res.second[1], res.first[1], "potrf info");
      EXPECT_EQ(res.second[1].geti(1), 3);
    }
}

TEST_F(DecomposeLinalg, GetrfLuPivotsInfo) {
  for (DType d : kDts)
    for (Shape s : {Shape{3, 4, 4}, Shape{2, 5, 3}, Shape{2, 3, 5}, Shape{2, 4, 0}, Shape{0, 4}}) {
      Tensor a = matrix(d, s, 0, 2);
      auto res = both(call_graph(CustomCallTarget::Getrf, {{d, s}}, {}, {0, 1, 2}), {a});
      SKIP_WITHOUT_PLUGIN(res);
      expect_close(res.second[0], res.first[0], tol(d), "getrf lu");
      expect_equal_ints(res.second[1], res.first[1], "getrf pivots");
      expect_equal_ints(res.second[2], res.first[2], "getrf info");
    }
}

TEST_F(DecomposeLinalg, GetrfSingularInfo) {
  // [[1, 2, 3], [2, 4, 6], [0, 1, 1]]: U(3, 3) is exactly zero, info 3; and a zero column.
  Tensor a = make(DType::F64, {2, 3, 3}, [](int64_t i) {
    static const double v[] = {1, 2, 3, 2, 4, 6, 0, 1, 1, 0, 1, 2, 0, 3, 4, 0, 5, 7};
    return v[i];
  });
  auto res = both(call_graph(CustomCallTarget::Getrf, {{DType::F64, {2, 3, 3}}}, {}, {0, 1, 2}), {a});
  SKIP_WITHOUT_PLUGIN(res);
  expect_close(res.second[0], res.first[0], 1e-14, "getrf lu");
  expect_equal_ints(res.second[1], res.first[1], "getrf pivots");
  expect_equal_ints(res.second[2], res.first[2], "getrf info");
  EXPECT_EQ(res.second[2].geti(0), 3);
  EXPECT_EQ(res.second[2].geti(1), 1);
}

TEST_F(DecomposeLinalg, PivotsToPermutation) {
  Tensor p = make(DType::I32, {2, 3}, [](int64_t i) {
    static const int v[] = {3, 3, 5, 1, 4, 3};
    return v[i];
  });
  auto res = both(call_graph(CustomCallTarget::LuPivotsToPermutation, {{DType::I32, {2, 3}}}, {5}, {0}), {p});
  SKIP_WITHOUT_PLUGIN(res);
  expect_equal_ints(res.second[0], res.first[0], "permutation");
}

TEST_F(DecomposeLinalg, GeqrfOrgqrOrmqr) {
  for (DType d : kDts)
    for (Shape s : {Shape{2, 5, 3}, Shape{4, 4}}) {
      Tensor a = matrix(d, s, 0, 3);
      auto qr = both(call_graph(CustomCallTarget::Geqrf, {{d, s}}, {}, {0, 1}), {a});
      SKIP_WITHOUT_PLUGIN(qr);
      expect_close(qr.second[0], qr.first[0], tol(d), "geqrf");
      expect_close(qr.second[1], qr.first[1], tol(d), "geqrf tau");
      Shape ts = qr.first[1].shape;
      auto q = both(call_graph(CustomCallTarget::Orgqr, {{d, s}, {d, ts}}, {}, {0}), qr.first);
      expect_close(q.second[0], q.first[0], tol(d), "orgqr");
      Shape cs = s;
      cs.back() = 2;
      Tensor c = matrix(d, cs, 0, 4);
      for (int left : {1, 0})
        for (int trans : {0, 1}) {
          Tensor cc = left ? c : matrix(d, [&] { Shape x = s; x[x.size() - 2] = 2; x.back() = s[s.size() - 2]; return x; }(), 0, 5);
          auto o = both(call_graph(CustomCallTarget::Ormqr, {{d, s}, {d, ts}, {d, cc.shape}}, {left, trans}, {0}),
                        {qr.first[0], qr.first[1], cc});
          expect_close(o.second[0], o.first[0], tol(d), "ormqr left=" + std::to_string(left) + " T=" +
                                                             std::to_string(trans));
        }
    }
}

TEST_F(DecomposeLinalg, SyevdUpToSign) {
  for (DType d : kDts)
    for (int lower : {1, 0}) {
      Shape s = {2, 5, 5};
      Tensor a = matrix(d, s, 1, 5);
      auto res = both(call_graph(CustomCallTarget::Syevd, {{d, s}}, {lower, 1}, {0, 1, 2}), {a});
      SKIP_WITHOUT_PLUGIN(res);
      expect_close(res.second[0], res.first[0], tol(d), "syevd w");
      expect_close(res.second[1], res.first[1], vec_tol(d), "syevd |v|", /*abs_vals=*/true);
      expect_equal_ints(res.second[2], res.first[2], "syevd info");
    }
}

// U^T U (or V V^T) of the pjrt result is the identity.
void expect_orthonormal(const Tensor& u, bool columns, double rel) {
  int64_t r = u.shape[u.shape.size() - 2], c = u.shape.back(), n = columns ? c : r, len = columns ? r : c;
  int64_t batch = u.numel() / (r * c);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t k = 0; k < len; ++k) {
          int64_t x = columns ? k * c + i : i * c + k, y = columns ? k * c + j : j * c + k;
          s += u.get(b * r * c + x) * u.get(b * r * c + y);
        }
        EXPECT_NEAR(s, i == j ? 1.0 : 0.0, rel) << "batch " << b << " (" << i << ", " << j << ")";
      }
}

TEST_F(DecomposeLinalg, GesddUpToSign) {
  for (DType d : kDts)
    for (Shape s : {Shape{2, 4, 4}, Shape{2, 5, 3}, Shape{3, 5}})
      for (int full : {0, 1}) {
        Tensor a = matrix(d, s, 0, 6);
        auto res = both(call_graph(CustomCallTarget::Gesdd, {{d, s}}, {full, 1}, {0, 1, 2, 3}), {a});
        SKIP_WITHOUT_PLUGIN(res);
        expect_close(res.second[0], res.first[0], tol(d), "gesdd s");
        int64_t k = res.first[0].shape.back();
        bool square = s[s.size() - 2] == s.back();
        if (!full || square) {
          expect_close(res.second[1], res.first[1], vec_tol(d), "gesdd |u|", true);
          expect_close(res.second[2], res.first[2], vec_tol(d), "gesdd |vh|", true);
        }
        expect_orthonormal(res.second[1], true, vec_tol(d));
        expect_orthonormal(res.second[2], false, vec_tol(d));
        expect_equal_ints(res.second[3], res.first[3], "gesdd info");
        (void)k;
      }
}

TEST_F(DecomposeLinalg, GesddValuesOnly) {
  Shape s = {2, 3, 5};
  Tensor a = matrix(DType::F32, s, 0, 7);
  auto res = both(call_graph(CustomCallTarget::Gesdd, {{DType::F32, s}}, {0, 0}, {0, 3}), {a});
  SKIP_WITHOUT_PLUGIN(res);
  expect_close(res.second[0], res.first[0], tol(DType::F32), "svdvals");
}

TEST_F(DecomposeLinalg, LdlStaysALapackCallUnlessEmpty) {
  Shape s = {3, 3};
  Graph g = call_graph(CustomCallTarget::Sytrf, {{DType::F32, s}}, {1}, {0, 2});
  Graph d = ir::decompose_linalg(g);
  EXPECT_TRUE(ir::has_lapack_calls(d));
  EXPECT_NE(d.to_stablehlo().find("lapack_ssytrf_ffi"), std::string::npos);
  if (rt_) {  // the plugin rejects it, naming the target
    try {
      run_pjrt(*rt_, g, {matrix(DType::F32, s, 1, 8)});
      ADD_FAILURE() << "expected the plugin to reject lapack_ssytrf_ffi";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("lapack_ssytrf_ffi"), std::string::npos) << e.what();
    }
  }
  // Without elements there is nothing to factor: zero results, info 0 (as the host).
  EXPECT_FALSE(ir::has_lapack_calls(
      ir::decompose_linalg(call_graph(CustomCallTarget::Sytrf, {{DType::F64, {0, 3, 3}}}, {1}, {0, 1, 2}))));
  Graph z = call_graph(CustomCallTarget::Sytrf, {{DType::F64, {2, 0, 0}}}, {1}, {2});
  Graph zd = ir::decompose_linalg(z);
  EXPECT_FALSE(ir::has_lapack_calls(zd));
  if (!rt_) GTEST_SKIP() << "IR checked; no pjrt run: " << why_;
  auto res = std::make_pair(run(z, {Tensor(DType::F64, {2, 0, 0})}), run_pjrt(*rt_, z, {Tensor(DType::F64, {2, 0, 0})}));
  SKIP_WITHOUT_PLUGIN(res);
  expect_equal_ints(res.second[0], res.first[0], "sytrf info of 0x0 matrices");
}

// The attention calls (custom_calls.def sdpa_fwd / sdpa_bwd): their decomposition run on the
// host runtime (and on pjrt with a plugin) against the host kernel, causal (more queries than
// keys: the last rows see every key) and not, bf16 rounding of the probabilities on and off,
// heads outermost ([B, H, rows, width]) or inner ([B, rows, H, width]).
TEST_F(DecomposeLinalg, SdpaMatchesTheHostKernel) {
  auto rnd = [](const Shape& s, int seed) {
    return make(DType::F32, s, [&](int64_t i) {
      double h = std::sin(static_cast<double>(i + 1) * 12.9898 + seed * 78.233) * 43758.5453;
      return 2 * (h - std::floor(h)) - 1;
    });
  };
  const float scale = 0.7f;
  uint32_t bits;
  std::memcpy(&bits, &scale, sizeof bits);
  for (bool inner : {false, true}) {
    // B 2, H 3, L 7, S 5, E 4, Ev 6
    const Shape qs = inner ? Shape{2, 7, 3, 4} : Shape{2, 3, 7, 4}, ks = inner ? Shape{2, 5, 3, 4} : Shape{2, 3, 5, 4};
    const Shape vs = inner ? Shape{2, 5, 3, 6} : Shape{2, 3, 5, 6}, os = inner ? Shape{2, 7, 3, 6} : Shape{2, 3, 7, 6};
    const Shape ls{2, 3, 7};
    for (bool causal : {true, false}) {
      for (bool round : {false, true}) {
        const std::vector<int64_t> params{causal, static_cast<int64_t>(bits), round, inner ? 3 : 0};
        const std::string what = std::string(causal ? "causal" : "full") + (round ? " rounded" : "") +
                                 (inner ? " heads-inner" : "");
        const double rel = round ? 1e-2 : 2e-5;  // a bf16 tie may round the other way
        Graph f = call_graph(CustomCallTarget::SdpaFwd, {{DType::F32, qs}, {DType::F32, ks}, {DType::F32, vs}}, params,
                             {0, 1});
        std::vector<Tensor> in{rnd(qs, 1), rnd(ks, 2), rnd(vs, 3)};
        std::vector<Tensor> want = run(f, in);
        Graph fd = ir::decompose_linalg(f);
        EXPECT_EQ(fd.to_stablehlo().find("custom_call"), std::string::npos) << what;
        std::vector<Tensor> got = run(fd, in);
        expect_close(got[0], want[0], rel, "sdpa_fwd out " + what);
        expect_close(got[1], want[1], round ? 1e-2 : 2e-5, "sdpa_fwd logsumexp " + what);
        Graph b = call_graph(CustomCallTarget::SdpaBwd,
                             {{DType::F32, qs}, {DType::F32, ks}, {DType::F32, vs}, {DType::F32, os}, {DType::F32, ls}},
                             params, {0, 1, 2});
        std::vector<Tensor> bin{in[0], in[1], in[2], rnd(os, 4), want[1]};
        std::vector<Tensor> bwant = run(b, bin), bgot = run(ir::decompose_linalg(b), bin);
        for (int i = 0; i < 3; ++i) expect_close(bgot[i], bwant[i], rel, "sdpa_bwd result " + std::to_string(i) + " " + what);
        if (rt_) {
          std::vector<Tensor> pf = run_pjrt(*rt_, f, in), pb = run_pjrt(*rt_, b, bin);
          expect_close(pf[0], want[0], rel, "pjrt sdpa_fwd out " + what);
          for (int i = 0; i < 3; ++i)
            expect_close(pb[i], bwant[i], rel, "pjrt sdpa_bwd result " + std::to_string(i) + " " + what);
        }
      }
    }
  }
}

}  // namespace
}  // namespace torch_tpu::host::testing
