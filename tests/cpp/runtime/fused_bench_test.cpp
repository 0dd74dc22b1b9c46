// Micro-benchmark of fused vs unfused host execution (disabled by default; run with
//   tpu_cpp_tests --gtest_also_run_disabled_tests --gtest_filter='*FusedBench*').
// Prints the median time of each graph fused and unfused; numbers are recorded in
// docs/decisions/fused-host-kernels.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>

#include "ir/passes/fuse.h"
#include "runtime/host/host_runtime.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

using runtime::View;

Value splat(Graph& g, double v, DType d, const Shape& s) { return g.broadcast(g.constant(v, d), s, {}); }

// tanh-approximate GELU, as PyTorch's gelu(approximate="tanh") decomposes.
Value gelu(Graph& g, Value x) {
  Shape s = g.shape(x);
  DType d = g.dtype(x);
  Value x3 = g.binary(OpCode::Mul, g.binary(OpCode::Mul, x, x), x);
  Value inner = g.binary(OpCode::Mul, splat(g, 0.7978845608028654, d, s),
                         g.binary(OpCode::Add, x, g.binary(OpCode::Mul, splat(g, 0.044715, d, s), x3)));
  Value t = g.binary(OpCode::Add, splat(g, 1.0, d, s), g.unary(OpCode::Tanh, inner));
  return g.binary(OpCode::Mul, g.binary(OpCode::Mul, splat(g, 0.5, d, s), x), t);
}

Value linear(Graph& g, Value x, Value w, Value b) {
  ir::Attrs d;
  d.lhs_contract = {1};
  d.rhs_contract = {0};
  Value y = g.dot(x, w, d);
  Shape s = g.shape(y);
  return g.binary(OpCode::Add, y, g.broadcast(b, s, {1}));
}

Value layernorm(Graph& g, Value x, Value gamma, Value beta) {
  Shape s = g.shape(x), rows = {s[0]};
  DType d = g.dtype(x);
  double inv = 1.0 / static_cast<double>(s[1]);
  Value mean = g.binary(OpCode::Mul, g.reduce(x, ir::Reducer::Sum, {1}), splat(g, inv, d, rows));
  Value xc = g.binary(OpCode::Sub, x, g.broadcast(mean, s, {0}));
  Value var = g.binary(OpCode::Mul, g.reduce(g.binary(OpCode::Mul, xc, xc), ir::Reducer::Sum, {1}),
                       splat(g, inv, d, rows));
  Value rstd = g.unary(OpCode::Rsqrt, g.binary(OpCode::Add, var, splat(g, 1e-5, d, rows)));
  Value y = g.binary(OpCode::Mul, xc, g.broadcast(rstd, s, {0}));
  return g.binary(OpCode::Add, g.binary(OpCode::Mul, y, g.broadcast(gamma, s, {1})),
                  g.broadcast(beta, s, {1}));
}

// Minimum over interleaved runs of a and b (the machine may be shared: the minimum is the
// least disturbed run, and interleaving exposes both to the same load).
std::pair<double, double> min_ms(runtime::Executable& a, runtime::Executable& b,
                                 std::vector<Tensor>& in, std::vector<Tensor>& out) {
  std::vector<View> iv, ov;
  for (Tensor& t : in) iv.push_back(t.view());
  for (Tensor& t : out) ov.push_back(t.view());
  a.run(iv, ov);  // warm up (arena, pages)
  b.run(iv, ov);
  double ma = 1e30, mb = 1e30;
  for (int i = 0; i < 21; ++i)
    for (int k = 0; k < 2; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      (k ? b : a).run(iv, ov);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      (k ? mb : ma) = std::min(k ? mb : ma, ms);
    }
  return {ma, mb};
}

void bench(const char* name, const Graph& g) {
  std::vector<Tensor> in, out;
  for (const ir::Node& n : g.nodes())
    if (n.is_param) in.push_back(make(n.dtype, n.shape, [](int64_t i) { return ((i * 7919) % 1000) / 250.0 - 2; }));
  for (Value v : g.outputs()) out.emplace_back(g.dtype(v), g.shape(v));
  auto fused = compile_host(g, {true}), unfused = compile_host(g, {false});
  auto [u, f] = min_ms(*unfused, *fused, in, out);
  std::printf("[bench] %-34s %2d thr %2d kernels (unfused %2d): unfused %7.3f ms  fused %7.3f ms  x%.2f\n",
              name, omp_get_max_threads(), ir::cluster_count(g),
              static_cast<int>(make_plan(g, {false})->steps.size()), u, f, u / f);
}

TEST(FusedBench, DISABLED_GeluMlpLayerNormSoftmax) {
  for (DType d : {DType::F32, DType::BF16}) {
    if (const char* t = std::getenv("BENCH_THREADS")) omp_set_num_threads(std::atoi(t));
    std::string dn = ir::dtype_name(d);
    {
      Graph g;  // bias + GELU epilogue of the MLP's first linear: [1024, 2048]
      Value h = g.param(d, {1024, 2048}), b = g.param(d, {2048});
      g.set_outputs({gelu(g, g.binary(OpCode::Add, h, g.broadcast(b, {1024, 2048}, {1})))});
      bench(("bias+gelu [1024,2048] " + dn).c_str(), g);
    }
    {
      Graph g;  // GELU MLP block: linear 512->2048, gelu, linear 2048->512, residual
      Value x = g.param(d, {1024, 512}), w1 = g.param(d, {512, 2048}), b1 = g.param(d, {2048}),
            w2 = g.param(d, {2048, 512}), b2 = g.param(d, {512});
      Value y = linear(g, gelu(g, linear(g, x, w1, b1)), w2, b2);
      g.set_outputs({g.binary(OpCode::Add, x, y)});
      bench(("gelu MLP [1024,512] " + dn).c_str(), g);
    }
    for (int64_t w : {512, 128}) {
      Graph g;
      Value x = g.param(d, {1024, w}), gm = g.param(d, {w}), bt = g.param(d, {w});
      g.set_outputs({layernorm(g, x, gm, bt)});
      bench(("layernorm [1024," + std::to_string(w) + "] " + dn).c_str(), g);
    }
    {
      Graph g;
      Shape s = {1024, 512};
      Value x = g.param(d, s);
      Value m = g.reduce(x, ir::Reducer::Max, {1});
      Value e = g.unary(OpCode::Exp, g.binary(OpCode::Sub, x, g.broadcast(m, s, {0})));
      Value sum = g.reduce(e, ir::Reducer::Sum, {1});
      g.set_outputs({g.binary(OpCode::Div, e, g.broadcast(sum, s, {0}))});
      bench(("softmax [1024,512] " + dn).c_str(), g);
    }
  }
  {
    Graph g;  // the GPT's MLP epilogue: bias, erf-GELU, bf16 copy for the next dot
    Shape s = {1024, 512};
    Value h = g.param(DType::F32, s), b = g.param(DType::F32, {512});
    Value y = g.binary(OpCode::Add, h, g.broadcast(b, s, {1}));
    Value e = g.unary(OpCode::Erf, g.binary(OpCode::Mul, y, splat(g, 0.7071067811865476, DType::F32, s)));
    Value gl = g.binary(OpCode::Mul, g.binary(OpCode::Mul, y, splat(g, 0.5, DType::F32, s)),
                        g.binary(OpCode::Add, e, splat(g, 1.0, DType::F32, s)));
    g.set_outputs({y, gl, g.convert(gl, DType::BF16)});
    bench("bias+erf-gelu+bf16 [1024,512]", g);
  }
  {
    Graph g;
    Value h = g.param(DType::F32, {1024, 512});
    g.set_outputs({g.unary(OpCode::Erf, h)});
    bench("erf [1024,512]", g);
  }
  {
    Graph g;  // a large elementwise chain: 8M elements
    Value x = g.param(DType::F32, {8192, 1024}), y = g.param(DType::F32, {8192, 1024});
    Value z = g.binary(OpCode::Add, g.binary(OpCode::Mul, x, y), x);
    g.set_outputs({g.reduce(g.binary(OpCode::Max, z, splat(g, 0, DType::F32, {8192, 1024})), ir::Reducer::Sum, {0, 1})});
    bench("(x*y+x).relu().sum() [8192,1024]", g);
  }
}

}  // namespace
}  // namespace torch_tpu::host::testing

namespace torch_tpu::host::testing {
namespace {
// The tile interpreter's throughput on a chain of 20 f32 multiply / add members (no
// transcendentals), in cache (64K elements) and from memory (1M): ns per element and member.
// Numbers: docs/decisions/fused-host-kernels.md.
TEST(FusedBench, DISABLED_ChainThroughput) {
  for (int64_t n : {int64_t{65536}, int64_t{1} << 20}) {
    Graph g;
    Value x = g.param(DType::F32, {n}), y = g.param(DType::F32, {n});
    Value v = x;
    const int ops = 20;
    for (int i = 0; i < ops / 2; ++i) v = g.binary(OpCode::Add, g.binary(OpCode::Mul, v, y), x);
    g.set_outputs({v});
    std::vector<Tensor> in = {make(DType::F32, {n}, [](int64_t i) { return (i % 7) * 0.1; }),
                              make(DType::F32, {n}, [](int64_t i) { return (i % 5) * 0.1; })};
    std::vector<Tensor> out = {Tensor(DType::F32, {n})};
    auto fused = compile_host(g, {true});
    std::vector<View> iv, ov;
    for (Tensor& t : in) iv.push_back(t.view());
    for (Tensor& t : out) ov.push_back(t.view());
    fused->run(iv, ov);
    double best = 1e30;
    for (int i = 0; i < 50; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      fused->run(iv, ov);
      best = std::min(best, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("[chain] n=%ld %d ops, %d thr: %.3f ns per element-op\n", (long)n, ops, omp_get_max_threads(), best / n / ops);
  }
}
}  // namespace
}  // namespace torch_tpu::host::testing

namespace torch_tpu::host::testing {
namespace {
// A dot and the elementwise loop that reads its result (the GPT's fc1 + bias + erf-GELU + bf16
// copy): the pair as planned, the dot alone and the loop alone (its input a parameter, warm),
// in one process, interleaved. Their difference is what running the loop right after each
// GEMM part (an epilogue) could save at most.
TEST(FusedBench, DISABLED_DotThenLoop) {
  auto time_ms = [](const Graph& g, int reps) { return min_run_ms(g, {true}, reps); };
  auto epilogue = [](Graph& g, Value h, Value b) {
    Shape s = g.shape(h);
    Value y = g.binary(OpCode::Add, h, g.broadcast(b, s, {1}));
    Value e = g.unary(OpCode::Erf, g.binary(OpCode::Mul, y, splat(g, 0.7071067811865476, DType::F32, s)));
    Value gl = g.binary(OpCode::Mul, g.binary(OpCode::Mul, y, splat(g, 0.5, DType::F32, s)),
                        g.binary(OpCode::Add, e, splat(g, 1.0, DType::F32, s)));
    return std::vector<Value>{y, gl, g.convert(g.convert(gl, DType::BF16), DType::F32)};
  };
  ir::Attrs d;
  d.lhs_contract = {1};
  d.rhs_contract = {0};
  d.precision = ir::Precision::Highest;
  Graph both, dot, loop;
  {
    Value x = both.param(DType::F32, {1024, 128}), w = both.param(DType::F32, {128, 512}), b = both.param(DType::F32, {512});
    both.set_outputs(epilogue(both, both.dot(x, w, d), b));
  }
  {
    Value x = dot.param(DType::F32, {1024, 128}), w = dot.param(DType::F32, {128, 512});
    dot.set_outputs({dot.dot(x, w, d)});
  }
  {
    Value h = loop.param(DType::F32, {1024, 512}), b = loop.param(DType::F32, {512});
    loop.set_outputs(epilogue(loop, h, b));
  }
  double tb = 1e30, td = 1e30, tl = 1e30;
  for (int r = 0; r < 5; ++r) {
    tb = std::min(tb, time_ms(both, 20));
    td = std::min(td, time_ms(dot, 20));
    tl = std::min(tl, time_ms(loop, 20));
  }
  std::printf("[bench] dot 1024x128x512 + GELU loop: pair %.3f ms, dot %.3f, loop %.3f (sum %.3f)\n", tb, td, tl, td + tl);
}
}  // namespace
}  // namespace torch_tpu::host::testing

namespace torch_tpu::host::testing {
namespace {
// The DEFAULT-precision operand rounding loops of a compiled GPT step: convert(convert(x, bf16),
// f32) over 128K f32 elements, read dense, through a transpose (attention's heads), and through
// a slice + transpose (q cut from the qkv projection); ns per element.
TEST(FusedBench, DISABLED_RoundTrip) {
  auto round = [](Graph& g, Value x) { return g.convert(g.convert(x, DType::BF16), DType::F32); };
  Graph dense, tr, sl;
  dense.set_outputs({round(dense, dense.param(DType::F32, {1024, 128}))});
  tr.set_outputs({round(tr, tr.transpose(tr.param(DType::F32, {8, 4, 128, 32}), {0, 2, 1, 3}))});
  {
    Value p = sl.param(DType::F32, {8, 128, 384});
    Value q = sl.reshape(sl.slice(p, {0, 0, 0}, {8, 128, 128}, {1, 1, 1}), {8, 128, 4, 32});
    sl.set_outputs({round(sl, sl.transpose(q, {0, 2, 1, 3}))});
  }
  double td = 1e30, tt = 1e30, ts = 1e30;
  for (int r = 0; r < 5; ++r) {
    td = std::min(td, min_run_ms(dense, {true}, 50));
    tt = std::min(tt, min_run_ms(tr, {true}, 50));
    ts = std::min(ts, min_run_ms(sl, {true}, 50));
  }
  const double n = 1024.0 * 128;
  std::printf("[bench] bf16 round trip, %d thr, ns/element: dense %.3f, transposed %.3f, sliced+transposed %.3f\n",
              omp_get_max_threads(), td * 1e6 / n, tt * 1e6 / n, ts * 1e6 / n);
}
}  // namespace
}  // namespace torch_tpu::host::testing
