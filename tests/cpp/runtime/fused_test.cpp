// Fused loops of the host runtime: each graph runs fused and unfused (PlanOptions) and the
// results are compared: bit for bit for elementwise chains (every dtype) and for row
// reductions that fit a tile, allclose where only the summation order may differ. Also:
// broadcasts, outputs in the middle of a chain, in-place outputs, strided inputs, thread
// count independence, and compile latency for large graphs.
#include <omp.h>

#include <time.h>

#include <chrono>
#include <cstdio>

#include "ir/passes/fuse.h"
#include "runtime/host/gemm.h"
#include "runtime/host/host_runtime.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

using runtime::View;

std::vector<Tensor> run_opt(const Graph& g, std::vector<Tensor> inputs, PlanOptions opt) {
  auto exe = compile_host(g, opt);
  std::vector<View> in, out;
  for (Tensor& t : inputs) in.push_back(t.view());
  std::vector<Tensor> outs;
  for (Value v : g.outputs()) outs.emplace_back(g.dtype(v), g.shape(v));
  for (Tensor& t : outs) out.push_back(t.view());
  exe->run(in, out);
  return outs;
}

// Runs fused and unfused; expects identical bytes (tol < 0) or relative closeness.
void expect_same(const Graph& g, const std::vector<Tensor>& inputs, double tol = -1) {
  auto a = run_opt(g, inputs, PlanOptions{true}), b = run_opt(g, inputs, PlanOptions{false});
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (tol < 0) {
      size_t n = a[i].numel() * ir::dtype_size(a[i].dtype);
      ASSERT_EQ(std::memcmp(a[i].bytes.data(), b[i].bytes.data(), n), 0)
          << "output " << i << " (" << ir::dtype_name(a[i].dtype) << ") differs";
    } else {
      for (int64_t j = 0; j < a[i].numel(); ++j)
        ASSERT_TRUE(close(a[i].get(j), b[i].get(j), tol, tol)) << "output " << i << " at " << j
                                                              << ": " << a[i].get(j) << " vs " << b[i].get(j);
    }
  }
}

int fused_steps(const Graph& g) { return static_cast<int>(make_plan(g, {true})->steps.size()); }

Value bcast_scalar(Graph& g, double v, DType d, Shape s) { return g.broadcast(g.constant(v, d), s, {}); }

Tensor random_tensor(DType d, Shape s, uint64_t seed) {
  return make(d, std::move(s), [&](int64_t i) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    double u = static_cast<double>(h % 100000) / 100000.0;  // [0, 1)
    if (d == DType::Bool) return static_cast<double>(h & 1);
    if (!ir::is_float(d)) return std::floor(u * 200) - (d == DType::U8 || d == DType::U64 ? 0 : 100);
    return u * 8 - 4;
  });
}

TEST(HostFused, ElementwiseChainsEveryDtype) {
  for (Shape s : {Shape{37, 300}, Shape{300, 1000}, Shape{5}}) {
    for (DType d : all_dtypes()) {
      SCOPED_TRACE(std::string(ir::dtype_name(d)) + ir::shape_str(s));
      Graph g;
      Value a = g.param(d, s), b = g.param(d, s), row = g.param(d, {s.back()});
      Value rb = g.broadcast(row, s, {static_cast<int64_t>(s.size() - 1)});
      Value y;
      if (d == DType::Bool) {
        y = g.binary(OpCode::Xor, g.binary(OpCode::And, a, b), g.unary(OpCode::Not, rb));
        y = g.binary(OpCode::Or, y, g.compare(ir::Cmp::EQ, a, rb));
      } else {
        Value t = g.binary(OpCode::Mul, g.binary(OpCode::Add, a, b), rb);
        t = g.binary(OpCode::Max, g.binary(OpCode::Sub, t, b), a);
        if (ir::is_float(d)) {
          t = g.unary(OpCode::Tanh, g.binary(OpCode::Div, t, bcast_scalar(g, 3.0, d, s)));
          t = g.binary(OpCode::Add, t, g.unary(OpCode::Exp, g.unary(OpCode::Negate, g.unary(OpCode::Abs, a))));
        }
        Value lo = g.constant(-50, d), hi = g.constant(90, d);
        if (d == DType::U8 || d == DType::U64) lo = g.constant(3, d);
        t = g.op(OpCode::Clamp, {lo, t, hi});
        y = g.select(g.compare(ir::Cmp::LT, a, b), t, g.convert(g.convert(t, DType::F32), d));
      }
      g.set_outputs({y});
      EXPECT_EQ(ir::cluster_count(g), 1);
      EXPECT_EQ(fused_steps(g), 1);
      expect_same(g, {random_tensor(d, s, 1), random_tensor(d, s, 2), random_tensor(d, {s.back()}, 3)});
    }
  }
}

TEST(HostFused, Bf16GeluChainIsExact) {
  Graph g;
  Shape s = {1024, 512};
  Value x = g.param(DType::BF16, s);
  Value h = g.binary(OpCode::Mul, x, bcast_scalar(g, 0.7071067811865476, DType::BF16, s));
  Value y = g.binary(OpCode::Mul, g.binary(OpCode::Mul, x, bcast_scalar(g, 0.5, DType::BF16, s)),
                     g.binary(OpCode::Add, g.unary(OpCode::Erf, h), bcast_scalar(g, 1, DType::BF16, s)));
  g.set_outputs({y});
  EXPECT_EQ(fused_steps(g), 1);
  expect_same(g, {random_tensor(DType::BF16, s, 7)});
}

TEST(HostFused, Broadcasts) {
  Graph g;
  Value x = g.param(DType::F32, {2, 3, 5}), col = g.param(DType::F32, {2, 1, 1}),
        mid = g.param(DType::F32, {3}), sc = g.param(DType::F32, {}), t = g.param(DType::F32, {5, 3});
  Value y = g.binary(OpCode::Add, x, g.broadcast(col, {2, 3, 5}, {0, 1, 2}));
  y = g.binary(OpCode::Mul, y, g.broadcast(mid, {2, 3, 5}, {1}));
  y = g.binary(OpCode::Sub, y, g.broadcast(sc, {2, 3, 5}, {}));
  y = g.binary(OpCode::Add, y, g.broadcast(t, {2, 3, 5}, {2, 1}));  // a transposing map
  g.set_outputs({y});
  EXPECT_EQ(fused_steps(g), 1);
  expect_same(g, {random_tensor(DType::F32, {2, 3, 5}, 1), random_tensor(DType::F32, {2, 1, 1}, 2),
                  random_tensor(DType::F32, {3}, 3), random_tensor(DType::F32, {}, 4),
                  random_tensor(DType::F32, {5, 3}, 5)});
}

// Transposes that keep the last dim and slices with contiguous inner runs are read by their
// readers' loops in place (gathers): attention's [B, H, L, E] <-> [B, L, H, E] transposes and
// the q / k / v slices of a projection, rounded for a DEFAULT product in the same pass. A
// transpose or slice read outside the loop is one of its results; one no loop reads, or
// one that moves the last dim, runs as its own kernel. Same bits as unfused.
TEST(HostFused, TransposesAndSlicesAreReadInPlace) {
  {
    Graph g;  // transpose -> bf16 round trip: one loop, the transpose not materialized
    Value q = g.param(DType::F32, {2, 4, 16, 8});
    Value t = g.transpose(q, {0, 2, 1, 3});
    g.set_outputs({g.convert(g.convert(t, DType::BF16), DType::F32)});
    EXPECT_EQ(fused_steps(g), 1);
    expect_same(g, {random_tensor(DType::F32, {2, 4, 16, 8}, 21)});
  }
  {
    Graph g;  // slices of a projection (with a trailing unit dim), one also an output
    Value p = g.param(DType::F32, {2, 16, 12, 8, 1}), b = g.param(DType::F32, {2, 16, 4, 8, 1});
    std::vector<Value> outs;
    for (int64_t h = 0; h < 12; h += 4) {
      Value sl = g.slice(p, {0, 0, h, 0, 0}, {2, 16, h + 4, 8, 1}, {1, 1, 1, 1, 1});
      outs.push_back(g.binary(OpCode::Mul, g.binary(OpCode::Add, sl, b), sl));
      if (h == 4) outs.push_back(sl);
    }
    g.set_outputs(outs);
    EXPECT_EQ(fused_steps(g), 3);  // one loop per slice's readers (no slice kernels)
    expect_same(g, {random_tensor(DType::F32, {2, 16, 12, 8, 1}, 22), random_tensor(DType::F32, {2, 16, 4, 8, 1}, 23)});
  }
  {
    Graph g;  // a transpose feeding a reduction over the last dim, and a strided slice
    Value x = g.param(DType::F32, {4, 8, 16});
    Value t = g.transpose(x, {1, 0, 2});
    Value r = g.reduce(g.unary(OpCode::Exp, t), ir::Reducer::Sum, {2});
    Value s2 = g.slice(x, {1, 0, 0}, {4, 8, 16}, {2, 3, 1});  // rows 1, 3; cols 0, 3, 6
    g.set_outputs({r, g.unary(OpCode::Negate, s2)});
    EXPECT_EQ(fused_steps(g), 2);
    expect_same(g, {random_tensor(DType::F32, {4, 8, 16}, 24)});
  }
  {
    Graph g;  // transposes that move the last dim, or read by nothing fusible, stay kernels
    Value x = g.param(DType::F32, {32, 64});
    Value t = g.transpose(x, {1, 0});
    Value y = g.param(DType::F32, {2, 4, 16, 8});
    g.set_outputs({g.unary(OpCode::Exp, t), g.transpose(y, {0, 2, 1, 3})});
    EXPECT_EQ(fused_steps(g), 3);
    expect_same(g, {random_tensor(DType::F32, {32, 64}, 25), random_tensor(DType::F32, {2, 4, 16, 8}, 26)});
  }
}

TEST(HostFused, GatherMembersAcrossTiles) {
  // Odd sizes: tiles start and end inside a run and wrap several outer dims at once.
  Graph g;
  Value x = g.param(DType::F32, {3, 37, 5, 19});
  Value p = g.param(DType::F32, {3, 5, 41, 23});
  Value b = g.param(DType::F32, {5, 1, 19});
  Value t = g.transpose(x, {0, 2, 1, 3});                                            // [3, 5, 37, 19]
  Value sl = g.slice(p, {0, 0, 2, 3}, {3, 5, 39, 22}, {1, 1, 1, 1});                 // [3, 5, 37, 19]
  Value bc = g.broadcast(b, {3, 5, 37, 19}, {1, 2, 3});
  Value y = g.binary(OpCode::Add, g.binary(OpCode::Mul, t, sl), bc);
  g.set_outputs({g.convert(g.convert(y, DType::BF16), DType::F32), g.unary(OpCode::Negate, sl)});
  expect_same(g, {random_tensor(DType::F32, {3, 37, 5, 19}, 31), random_tensor(DType::F32, {3, 5, 41, 23}, 32),
                  random_tensor(DType::F32, {5, 1, 19}, 33)});
}

TEST(HostFused, OutputsInTheMiddleAndReshapes) {
  Graph g;
  Shape s = {64, 100};
  Value x = g.param(DType::F16, s);
  Value a = g.unary(OpCode::Exp, g.unary(OpCode::Negate, x));
  Value r = g.reshape(a, {6400});
  Value b = g.binary(OpCode::Add, r, g.reshape(x, {6400}));
  Value c = g.unary(OpCode::Sqrt, b);
  g.set_outputs({a, c, r, g.reshape(c, {100, 64})});
  EXPECT_EQ(fused_steps(g), 1);
  expect_same(g, {random_tensor(DType::F16, s, 9)});
}

TEST(HostFused, InPlaceOutputAliasesInput) {
  Graph g;
  Shape s = {100, 77};
  Value x = g.param(DType::F32, s), y = g.param(DType::F32, s);
  Value z = g.binary(OpCode::Mul, g.binary(OpCode::Add, x, y), g.unary(OpCode::Cos, x));
  g.set_outputs({z, g.unary(OpCode::Sin, z)});
  for (bool fuse : {true, false}) SCOPED_TRACE(fuse);
  Tensor x1 = random_tensor(DType::F32, s, 1), y1 = random_tensor(DType::F32, s, 2);
  Tensor x2 = x1, y2 = y1, w1(DType::F32, s), w2(DType::F32, s);
  compile_host(g, {true})->run({x1.view(), y1.view()}, {x1.view(), w1.view()});  // x += ...
  compile_host(g, {false})->run({x2.view(), y2.view()}, {x2.view(), w2.view()});
  EXPECT_EQ(x1.bytes, x2.bytes);
  EXPECT_EQ(w1.bytes, w2.bytes);
}

// An output bound over an input it is computed from (x.add_(y), an optimizer's moments) is
// written in place when the loop reads x element by element before producing it and nothing
// reads x after; otherwise through the arena. Either way the same bytes as unfused.
TEST(HostFused, InPlaceOutputsWrittenDirectlyOnlyWhenSafe) {
  Shape s = {100, 77};
  ir::Attrs d;
  d.lhs_contract = {1};
  d.rhs_contract = {1};
  d.precision = ir::Precision::Highest;
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    Graph g;
    Value x = g.param(DType::F32, s), y = g.param(DType::F32, s);
    Value z = g.binary(OpCode::Add, g.binary(OpCode::Mul, x, y), g.unary(OpCode::Cos, x));
    std::vector<Value> outs = {z};
    // 0: safe. 1: a member after z's reads x. 2: a later step (a dot) reads x. 3: x passes through.
    if (variant == 1) outs.push_back(g.binary(OpCode::Sub, g.unary(OpCode::Sin, z), x));
    if (variant == 2) outs.push_back(g.dot(z, x, d));
    if (variant == 3) outs.push_back(x);
    g.set_outputs(outs);
    auto plan = make_plan(g, {true});
    const std::vector<int>& over = plan->out_overwrites[0];
    EXPECT_EQ(std::count(over.begin(), over.end(), 0), variant == 0 ? 1 : 0);  // x is param 0
    EXPECT_EQ(std::count(over.begin(), over.end(), 1), 1);  // y: read by z's loop only, before z
    Tensor x1 = random_tensor(DType::F32, s, 1), y1 = random_tensor(DType::F32, s, 2);
    Tensor x2 = x1, y2 = y1;
    std::vector<Tensor> extra1, extra2;
    for (size_t k = 1; k < outs.size(); ++k) {
      extra1.emplace_back(DType::F32, g.shape(outs[k]));
      extra2.emplace_back(DType::F32, g.shape(outs[k]));
    }
    std::vector<runtime::View> o1 = {x1.view()}, o2 = {x2.view()};
    for (Tensor& t : extra1) o1.push_back(t.view());
    for (Tensor& t : extra2) o2.push_back(t.view());
    compile_host(g, {true})->run({x1.view(), y1.view()}, o1);  // x = z, in place
    compile_host(g, {false})->run({x2.view(), y2.view()}, o2);
    EXPECT_EQ(x1.bytes, x2.bytes);
    for (size_t k = 0; k < extra1.size(); ++k) EXPECT_EQ(extra1[k].bytes, extra2[k].bytes) << k;
  }
}

TEST(HostFused, StridedInput) {
  Graph g;
  Value x = g.param(DType::F32, {40, 30});
  g.set_outputs({g.unary(OpCode::Log1p, g.unary(OpCode::Abs, x))});
  Tensor base = random_tensor(DType::F32, {30, 40}, 3);
  Tensor a(DType::F32, {40, 30}), b(DType::F32, {40, 30});
  View tv{host::as_buffer(base.data()), DType::F32, {40, 30}, {1, 40}};
  compile_host(g, {true})->run({tv}, {a.view()});
  compile_host(g, {false})->run({tv}, {b.view()});
  EXPECT_EQ(a.bytes, b.bytes);
}

// Reductions over the last dim give the eager kernel's bits: short rows are reduced whole
// by its reduce_row, long rows in segments at reduce_row's split points, and one row
// longer than 2 * 32768 in the eager kernel's fixed blocks.
TEST(HostFused, RowReductionsMatchEager) {
  struct Case {
    Shape s;
    bool exact;  // all are: kept to document the modes
  };
  for (Case c : {Case{{64, 100}, true}, Case{{3, 5000}, true}, Case{{200000}, true},
                 Case{{3, 70001}, true}, Case{{2, 9000}, true}, Case{{1, 20000}, true}, Case{{4, 1, 9}, true}}) {
    for (DType d : {DType::F32, DType::BF16, DType::I32, DType::F64}) {
      for (auto red : {ir::Reducer::Sum, ir::Reducer::Max, ir::Reducer::Min}) {
        SCOPED_TRACE(ir::shape_str(c.s) + ir::dtype_name(d) + std::to_string(int(red)));
        Graph g;
        Value x = g.param(d, c.s);
        Value y = g.binary(OpCode::Mul, g.unary(OpCode::Abs, x), x);
        int64_t last = static_cast<int64_t>(c.s.size()) - 1;
        Value r = g.reduce(y, red, {last});
        Value post = g.binary(OpCode::Add, r, g.broadcast(g.constant(1, d), g.shape(r), {}));
        ir::Attrs am;
        am.dims = {last};
        Value am_v = g.op(OpCode::ArgMax, {g.unary(OpCode::Negate, y)}, am);
        g.set_outputs({post, am_v});
        EXPECT_EQ(ir::cluster_count(g), 2);  // the two sinks cannot share one loop
        expect_same(g, {random_tensor(d, c.s, 11)});
      }
    }
  }
}

Value layernorm(Graph& g, Value x, Value gamma, Value beta) {
  Shape s = g.shape(x), rows = {s[0]};
  double inv = 1.0 / static_cast<double>(s[1]);
  Value mean = g.binary(OpCode::Mul, g.reduce(x, ir::Reducer::Sum, {1}), bcast_scalar(g, inv, DType::F32, rows));
  Value xc = g.binary(OpCode::Sub, x, g.broadcast(mean, s, {0}));
  Value var = g.binary(OpCode::Mul, g.reduce(g.binary(OpCode::Mul, xc, xc), ir::Reducer::Sum, {1}),
                       bcast_scalar(g, inv, DType::F32, rows));
  Value rstd = g.unary(OpCode::Rsqrt, g.binary(OpCode::Add, var, bcast_scalar(g, 1e-5, DType::F32, rows)));
  Value y = g.binary(OpCode::Mul, xc, g.broadcast(rstd, s, {0}));
  return g.binary(OpCode::Add, g.binary(OpCode::Mul, y, g.broadcast(gamma, s, {1})),
                  g.broadcast(beta, s, {1}));
}

TEST(HostFused, LayerNormAndSoftmax) {
  Shape s = {1024, 512};
  {
    Graph g;
    Value x = g.param(DType::F32, s), gm = g.param(DType::F32, {512}), bt = g.param(DType::F32, {512});
    g.set_outputs({layernorm(g, x, gm, bt)});
    EXPECT_EQ(ir::cluster_count(g), 3);
    EXPECT_EQ(fused_steps(g), 1);  // one row chain of the three loops
    expect_same(g, {random_tensor(DType::F32, s, 1), random_tensor(DType::F32, {512}, 2),
                    random_tensor(DType::F32, {512}, 3)});
  }
  {
    Graph g;
    Value x = g.param(DType::F32, s);
    Value m = g.reduce(x, ir::Reducer::Max, {1});
    Value e = g.unary(OpCode::Exp, g.binary(OpCode::Sub, x, g.broadcast(m, s, {0})));
    Value sum = g.reduce(e, ir::Reducer::Sum, {1});
    g.set_outputs({g.binary(OpCode::Div, e, g.broadcast(sum, s, {0}))});
    EXPECT_EQ(ir::cluster_count(g), 3);
    EXPECT_EQ(fused_steps(g), 1);
    EXPECT_EQ(make_plan(g, PlanOptions{.fuse = true, .chain_rows = false})->steps.size(), 3u);
    expect_same(g, {random_tensor(DType::F32, s, 5)});
  }
}

// Row chains run loops tile by tile; a loop reading another's per-row results across rows
// (a row sum broadcast along columns, a scalar total) must not join, or it would read rows
// not computed yet. Rows of 256 with 16 rows per tile: several tiles on every thread count.
TEST(HostFused, RowChainsRefuseReadsAcrossRows) {
  Shape s = {256, 256};
  Graph g;
  Value x = g.param(DType::F32, s);
  Value r = g.reduce(g.binary(OpCode::Mul, x, x), ir::Reducer::Sum, {1});        // [256] per row
  Value local = g.binary(OpCode::Sub, x, g.broadcast(r, s, {0}));                // along rows: chains
  Value across = g.binary(OpCode::Mul, local, g.broadcast(r, s, {1}));           // r[j]: must not
  g.set_outputs({across, g.reduce(across, ir::Reducer::Max, {1})});
  EXPECT_EQ(ir::cluster_count(g), 2);
  EXPECT_EQ(fused_steps(g), 2);  // joined, the second loop would read r for rows of later tiles
  expect_same(g, {random_tensor(DType::F32, s, 7)});
}

TEST(HostFused, MatmulEpilogue) {
  Graph g;
  Value x = g.param(DType::F32, {64, 32}), w = g.param(DType::F32, {32, 48}), b = g.param(DType::F32, {48});
  ir::Attrs d;
  d.lhs_contract = {1};
  d.rhs_contract = {0};
  d.precision = ir::Precision::Highest;  // DEFAULT adds operand rounding (next test)
  Value h = g.binary(OpCode::Add, g.dot(x, w, d), g.broadcast(b, {64, 48}, {1}));
  g.set_outputs({g.binary(OpCode::Max, h, bcast_scalar(g, 0, DType::F32, {64, 48}))});
  EXPECT_EQ(fused_steps(g), 2);
  expect_same(g, {random_tensor(DType::F32, {64, 32}, 1), random_tensor(DType::F32, {32, 48}, 2),
                  random_tensor(DType::F32, {48}, 3)});
}

// A broadcast read by loops on both sides of a dot (a constant splat shared by two layers,
// as graphs CSE it) is re-read by each loop, not written to memory by the first: each loop
// has only its own result.
TEST(HostFused, SharedBroadcastIsCopiedPerLoop) {
  Graph g;
  Shape s = {64, 48};
  Value x = g.param(DType::F32, s), w = g.param(DType::F32, {48, 48});
  ir::Attrs d;
  d.lhs_contract = {1};
  d.rhs_contract = {0};
  d.precision = ir::Precision::Highest;
  Value half = bcast_scalar(g, 0.5, DType::F32, s);
  Value h1 = g.unary(OpCode::Tanh, g.binary(OpCode::Mul, x, half));
  Value h2 = g.unary(OpCode::Tanh, g.binary(OpCode::Mul, g.dot(h1, w, d), half));
  g.set_outputs({h2});
  auto plan = make_plan(g, {true});
  ASSERT_EQ(plan->steps.size(), 3u);  // loop, dot, loop
  for (const Step& st : plan->steps) EXPECT_EQ(st.results.size(), 1u) << ir::op_info(st.n->op).name;
  expect_same(g, {random_tensor(DType::F32, s, 1), random_tensor(DType::F32, {48, 48}, 2)});
}

// Broadcasts of one element read by add/sub/mul/div/max/min (either side) or select (either
// value) are read as scalars: no tile is filled, the loop lists no Broadcast for them, and the
// bytes equal the unfused run's. A splat read by another op (compare, pow) stays a broadcast.
TEST(HostFused, SplatsAreReadAsScalars) {
  for (DType d : {DType::F32, DType::BF16, DType::F16}) {
    Graph g;
    Shape s = {37, 129};
    Value x = g.param(d, s), y = x;
    const OpCode ops[] = {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Div, OpCode::Max, OpCode::Min};
    double c = 0.75;
    for (OpCode op : ops) {
      y = g.binary(op, y, bcast_scalar(g, c, d, s));
      y = g.binary(op, bcast_scalar(g, c - 2.0, d, s), y);
      c += 0.5;
    }
    Value p = g.compare(ir::Cmp::GT, x, bcast_scalar(g, 0.0, d, s));  // compare: stays a broadcast
    y = g.select(p, y, bcast_scalar(g, -3.0, d, s));
    y = g.select(p, bcast_scalar(g, 5.0, d, s), y);
    g.set_outputs({y});
    auto plan = make_plan(g, {true});
    ASSERT_EQ(plan->steps.size(), 1u) << ir::dtype_name(d);
    std::string members = fused_members(plan->steps[0]);
    size_t first = members.find("Broadcast");
    EXPECT_NE(first, std::string::npos) << members;                              // the compare's
    EXPECT_EQ(members.find("Broadcast", first + 1), std::string::npos) << members;  // only
    expect_same(g, {random_tensor(d, s, 3)});
  }
  {  // NaN scalars in max/min, and a splat that is also a graph output
    Graph g;
    Shape s = {5, 33};
    Value x = g.param(DType::F32, s), nan = bcast_scalar(g, std::nan(""), DType::F32, s);
    Value two = bcast_scalar(g, 2.0, DType::F32, s);
    g.set_outputs({g.binary(OpCode::Max, x, nan), g.binary(OpCode::Min, nan, x), g.binary(OpCode::Mul, x, two), two});
    expect_same(g, {random_tensor(DType::F32, s, 4)});
  }
}

// DEFAULT f32 dots and convolutions round their operands through explicit converts in the
// planned graph: each value is rounded once (w feeds two dots, t a dot and a transposed dot),
// the rounding of t runs in the loop computing t, and the numbers equal the packed path's.
TEST(HostFused, DefaultPrecisionRoundsEachOperandOnce) {
  Graph g;
  Value x = g.param(DType::F32, {64, 32}), w = g.param(DType::F32, {32, 48}), u = g.param(DType::F32, {64, 32});
  ir::Attrs d;
  d.lhs_contract = {1};
  d.rhs_contract = {0};
  Value t = g.unary(OpCode::Tanh, x);
  ir::Attrs tt;  // t^T t: contract the rows
  tt.lhs_contract = {0};
  tt.rhs_contract = {0};
  g.set_outputs({g.dot(t, w, d), g.dot(u, w, d), g.dot(t, t, tt)});
  // Steps: {tanh, round(t)}, round(w), round(u), three dots. (With a native bf16 GEMM the
  // rounding writes bf16 copies that the dots read as they are; without, f32 copies.)
  EXPECT_EQ(fused_steps(g), 6);
  std::vector<Tensor> in = {random_tensor(DType::F32, {64, 32}, 1), random_tensor(DType::F32, {32, 48}, 2),
                            random_tensor(DType::F32, {64, 32}, 3)};
  auto run = [&](bool in_graph) {
    PlanOptions o;
    o.round_operands_in_graph = in_graph;
    return run_opt(g, in, o);
  };
  auto a = run(true), b = run(false);
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(a[i].bytes.data(), b[i].bytes.data(), a[i].numel() * 4), 0) << "output " << i;
}

// convert(convert(x, bf16), f32) runs as one rounding pass when the bf16 value has no other
// reader; the bits must be the two converts' (NaN quieted with its top payload bits, ties to
// even, the max finite value up to inf, subnormals rounded on their bit patterns, -0 kept).
TEST(HostFused, Bf16RoundTripIsOnePassWithTheSameBits) {
  const uint32_t special[] = {0x7FC00001u, 0x7F800001u, 0xFFFFFFFFu, 0x7F800000u, 0xFF800000u, 0x7F7FFFFFu,
                              0x3F808000u, 0x3F818000u, 0x3F808001u, 0x00008000u, 0x00018000u, 0x807FFFFFu,
                              0x80000000u, 0x00000001u, 0x477FFFFFu, 0xC0490FDBu};
  const int64_t n = 5000;  // more than one tile
  Tensor x = random_tensor(DType::F32, {n}, 7);
  for (size_t i = 0; i < std::size(special); ++i) {
    float f;
    std::memcpy(&f, &special[i], 4);
    x.set(static_cast<int64_t>(i * 301), f);
  }
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    Graph g;
    Value p = g.param(DType::F32, {n});
    Value h = g.convert(g.unary(OpCode::Negate, p), DType::BF16);
    Value r = g.convert(h, DType::F32);
    if (variant == 0) g.set_outputs({g.binary(OpCode::Add, r, p)});
    if (variant == 1) g.set_outputs({r, h});                                         // bf16 value read outside
    if (variant == 2) g.set_outputs({g.binary(OpCode::Mul, r, g.convert(g.unary(OpCode::Abs, h), DType::F32))});
    auto plan = make_plan(g, {true});
    std::string members;
    for (const Step& s : plan->steps)
      if (s.fused) members += fused_members(s);
    EXPECT_EQ(members.find("RoundBf16") != std::string::npos, variant == 0) << members;
    expect_same(g, {x});
  }
}

// A constant of many elements joins its readers' loop as a broadcast of a 0-d constant (no
// step filling it in memory per run); the same bits as unfused, also where one loop reads it
// twice and where an anchor (a dot) reads it.
TEST(HostFused, ShapedConstantsJoinTheirLoops) {
  for (int64_t n : {int64_t{5000}, int64_t{300000}}) {  // below and above the folded-leaf size
    SCOPED_TRACE(n);
    Graph g;
    Value x = g.param(DType::F32, {n});
    Value one = g.constant(1.0, DType::F32, {n}), half = g.constant(0.5, DType::F32, {n});
    Value y = g.binary(OpCode::Sub, one, g.binary(OpCode::Mul, x, half));
    Value c = g.compare(ir::Cmp::LT, g.unary(OpCode::Abs, x), half);
    g.set_outputs({g.select(c, y, one)});
    auto plan = make_plan(g, {true});
    EXPECT_EQ(plan->steps.size(), 1u);
    expect_same(g, {random_tensor(DType::F32, {n}, 11)});
  }
  Graph g;
  Value x = g.param(DType::F32, {64, 32});
  ir::Attrs d;
  d.lhs_contract = {1};
  d.rhs_contract = {0};
  d.precision = ir::Precision::Highest;
  g.set_outputs({g.dot(x, g.constant(0.25, DType::F32, {32, 16}), d)});
  expect_same(g, {random_tensor(DType::F32, {64, 32}, 12)});
}

TEST(HostFused, ResultsDoNotDependOnThreadCount) {
  Graph g;
  Shape s = {3, 300000};
  Value x = g.param(DType::F32, s);
  Value y = g.unary(OpCode::Sin, x);
  g.set_outputs({g.reduce(y, ir::Reducer::Sum, {1}), g.reduce(g.reshape(y, {900000}), ir::Reducer::Sum, {0})});
  Tensor in = random_tensor(DType::F32, s, 4);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = run_opt(g, {in}, PlanOptions{true});
  omp_set_num_threads(std::max(2, saved));
  auto many = run_opt(g, {in}, PlanOptions{true});
  omp_set_num_threads(saved);
  EXPECT_EQ(one[0].bytes, many[0].bytes);
  EXPECT_EQ(one[1].bytes, many[1].bytes);
}

// Random graphs over a [rows, cols] space (elementwise ops, broadcasts from rows / cols /
// scalars, row reductions and their post ops, reshapes, converts, selects, clamps,
// transposes, outputs anywhere): fused and unfused must agree bit for bit.
TEST(HostFused, RandomGraphsMatchUnfused) {
  uint64_t st = 12345;
  auto rnd = [&](int n) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((st >> 33) % static_cast<uint64_t>(n));
  };
  for (int iter = 0; iter < 300; ++iter) {
    SCOPED_TRACE(iter);
    int64_t R = 1 + rnd(40), C = 1 + rnd(300);
    if (iter % 50 == 7) C = 70000;  // chunked (long-row) sinks
    Shape S = {R, C}, Rows = {R}, Cols = {C};
    Graph g;
    std::vector<Value> full = {g.param(DType::F32, S), g.param(DType::F32, S)},
                       rows = {g.param(DType::F32, Rows)}, cols = {g.param(DType::F32, Cols)};
    auto pick = [&](std::vector<Value>& v) { return v[rnd(static_cast<int>(v.size()))]; };
    int nops = 3 + rnd(25);
    for (int k = 0; k < nops; ++k) {
      switch (rnd(12)) {
        case 0: full.push_back(g.unary(rnd(2) ? OpCode::Tanh : OpCode::Sin, pick(full))); break;
        case 1: full.push_back(g.binary(rnd(2) ? OpCode::Add : OpCode::Mul, pick(full), pick(full))); break;
        case 2: full.push_back(g.broadcast(pick(rows), S, {0})); break;
        case 3: full.push_back(g.broadcast(pick(cols), S, {1})); break;
        case 4: full.push_back(g.binary(OpCode::Sub, pick(full), g.broadcast(g.constant(0.25 * rnd(8), DType::F32), S, {})));
          break;
        case 5: rows.push_back(g.reduce(pick(full), rnd(2) ? ir::Reducer::Sum : ir::Reducer::Max, {1})); break;
        case 6: rows.push_back(g.binary(OpCode::Mul, pick(rows), pick(rows))); break;
        case 7: full.push_back(g.reshape(g.unary(OpCode::Cos, g.reshape(pick(full), {R * C})), S)); break;
        case 8: full.push_back(g.convert(g.convert(pick(full), DType::BF16), DType::F32)); break;
        case 9: full.push_back(g.select(g.compare(ir::Cmp::LT, pick(full), pick(full)), pick(full), pick(full)));
          break;
        case 10: full.push_back(g.op(OpCode::Clamp, {g.constant(-0.5, DType::F32), pick(full), g.constant(0.7, DType::F32)}));
          break;
        default:
          if (R == C) full.push_back(g.transpose(pick(full), {1, 0}));
          else cols.push_back(g.reduce(g.transpose(pick(full), {1, 0}), ir::Reducer::Sum, {1}));
          break;
      }
    }
    std::vector<Value> outs = {full.back()};
    for (int k = rnd(3); k > 0; --k) outs.push_back(pick(rnd(2) ? full : rows));
    g.set_outputs(outs);
    std::vector<Tensor> in;
    for (const ir::Node& n : g.nodes())
      if (n.is_param) in.push_back(random_tensor(n.dtype, n.shape, 100 + n.param_index + iter));
    expect_same(g, in);
  }
}

// A chain of `n` nodes mixing elementwise ops, broadcasts and reductions.
Graph big_graph(int n) {
  Graph g;
  Shape s = {64, 128};
  Value x = g.param(DType::F32, s), bias = g.param(DType::F32, {128});
  Value cur = x;
  for (int i = 0; static_cast<int>(g.nodes().size()) < n; ++i) {
    switch (i % 6) {
      case 0: cur = g.binary(OpCode::Add, cur, g.broadcast(bias, s, {1})); break;
      case 1: cur = g.unary(OpCode::Tanh, cur); break;
      case 2: cur = g.binary(OpCode::Mul, cur, bcast_scalar(g, 1.0 + i * 1e-3, DType::F32, s)); break;
      case 3: cur = g.binary(OpCode::Sub, cur, g.broadcast(g.reduce(cur, ir::Reducer::Max, {1}), s, {0})); break;
      case 4: cur = g.binary(OpCode::Add, cur, x); break;
      default: cur = g.unary(OpCode::Exp, g.unary(OpCode::Negate, g.unary(OpCode::Abs, cur))); break;
    }
  }
  g.set_outputs({cur});
  return g;
}

// Thread CPU time in microseconds: compile work is single-threaded, and CPU time is not
// inflated when the machine is shared.
double cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

TEST(HostFused, CompileLatency) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a time budget: sanitized code runs several times slower (make test-asan)";
#endif
  for (int n : {300, 3000}) {
    Graph g = big_graph(n);
    double t0 = cpu_us();
    int clusters = ir::cluster_count(g);
    double t1 = cpu_us();
    auto plan = make_plan(g, {true});
    double t2 = cpu_us();
    auto unfused = make_plan(g, {false});
    double t3 = cpu_us();
    std::printf("[compile] %zu nodes: partition %.0f us (%d clusters), fused plan (incl. partition) "
                "%.0f us, unfused plan %.0f us (thread CPU time)\n",
                g.nodes().size(), t1 - t0, clusters, t2 - t1, t3 - t2);
    EXPECT_LT(t2 - t1, n * 20.0);  // ~1 us per node measured; generous for slow machines
  }
  // Hash-consing stays linear: 20k distinct nodes plus 20k repeats.
  double t0 = cpu_us();
  Graph g;
  Value x = g.param(DType::F32, {4});
  std::vector<Value> vs;
  for (int i = 0; i < 20000; ++i) vs.push_back(g.constant(i, DType::F32, {4}));
  for (int i = 0; i < 20000; ++i) ASSERT_EQ(g.constant(i, DType::F32, {4}).id, vs[i].id);
  g.set_outputs({x});
  double us = cpu_us() - t0;
  std::printf("[compile] 40k constant() calls with CSE: %.0f us\n", us);
  EXPECT_LT(us, 1e6);
}

}  // namespace
}  // namespace torch_tpu::host::testing
