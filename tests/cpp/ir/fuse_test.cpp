// Fusion decisions on a device that runs nothing: how many kernels (clusters) small
// graphs become, and what each cluster holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ir/passes/fuse.h"

namespace torch_tpu::ir {
namespace {

Value scalar(Graph& g, double v, Value like) {
  Shape s = g.shape(like);
  return g.broadcast(g.constant(v, g.dtype(like)), s, {});
}
Value relu(Graph& g, Value x) { return g.binary(OpCode::Max, x, scalar(g, 0, x)); }

TEST(Fuse, ElementwiseChainIntoReduction) {
  Graph g;
  Value a = g.param(DType::F32, {8, 16}), b = g.param(DType::F32, {8, 16}),
        c = g.param(DType::F32, {8, 16});
  Value y = relu(g, g.binary(OpCode::Add, g.binary(OpCode::Mul, a, b), c));
  g.set_outputs({g.reduce(y, Reducer::Sum, {0, 1})});
  auto cl = partition(g);
  ASSERT_EQ(cl.size(), 1u);
  EXPECT_EQ(cl[0].main.size(), 4u);  // mul, add, broadcast(0), max
  EXPECT_GE(cl[0].sink, 0);
  EXPECT_EQ(cl[0].inputs.size(), 4u);  // a, b, c, the constant
  EXPECT_EQ(cl[0].outputs, std::vector<int>{g.outputs()[0].id});
}

TEST(Fuse, MatmulBiasRelu) {
  Graph g;
  Value x = g.param(DType::F32, {4, 8}), w = g.param(DType::F32, {8, 16}),
        b = g.param(DType::F32, {16});
  Attrs d;
  d.lhs_contract = {1};
  d.rhs_contract = {0};
  Value h = g.binary(OpCode::Add, g.dot(x, w, d), g.broadcast(b, {4, 16}, {1}));
  g.set_outputs({relu(g, h)});
  auto cl = partition(g);
  ASSERT_EQ(cl.size(), 2u);
  EXPECT_TRUE(cl[0].anchor);  // the dot runs first
  EXPECT_FALSE(cl[1].anchor);
  EXPECT_EQ(cl[1].main.size(), 4u);  // broadcast(b), add, broadcast(0), max
}

Value layernorm(Graph& g, Value x, Value gamma, Value beta) {
  const Shape s = g.shape(x);  // a copy: building nodes reallocates the graph
  Shape rows = {s[0]};
  double inv = 1.0 / static_cast<double>(s[1]);
  Value mean = g.binary(OpCode::Mul, g.reduce(x, Reducer::Sum, {1}),
                        g.broadcast(g.constant(inv, DType::F32), rows, {}));
  Value xc = g.binary(OpCode::Sub, x, g.broadcast(mean, s, {0}));
  Value var = g.binary(OpCode::Mul, g.reduce(g.binary(OpCode::Mul, xc, xc), Reducer::Sum, {1}),
                       g.broadcast(g.constant(inv, DType::F32), rows, {}));
  Value rstd = g.unary(OpCode::Rsqrt, g.binary(OpCode::Add, var,
                                              g.broadcast(g.constant(1e-5, DType::F32), rows, {})));
  Value y = g.binary(OpCode::Mul, xc, g.broadcast(rstd, s, {0}));
  return g.binary(OpCode::Add, g.binary(OpCode::Mul, y, g.broadcast(gamma, s, {1})),
                  g.broadcast(beta, s, {1}));
}

TEST(Fuse, LayerNormIsThreeLoops) {
  Graph g;
  Value x = g.param(DType::F32, {32, 64}), gamma = g.param(DType::F32, {64}),
        beta = g.param(DType::F32, {64});
  g.set_outputs({layernorm(g, x, gamma, beta)});
  auto cl = partition(g);
  // sum(x) -> mean; (x - mean)^2 summed -> rstd; (x - mean) * rstd * gamma + beta.
  ASSERT_EQ(cl.size(), 3u);
  EXPECT_EQ(cl[0].post.size(), 2u);  // broadcast(1/n), mul
  EXPECT_GE(cl[1].sink, 0);
  EXPECT_EQ(cl[1].outputs.size(), 2u);  // xc (read by the last loop) and rstd
  EXPECT_LT(cl[2].sink, 0);
  EXPECT_EQ(cluster_count(g), 3);
}

TEST(Fuse, SoftmaxIsThreeLoops) {
  Graph g;
  Value x = g.param(DType::F32, {8, 100});
  Value m = g.reduce(x, Reducer::Max, {1});
  Value e = g.unary(OpCode::Exp, g.binary(OpCode::Sub, x, g.broadcast(m, {8, 100}, {0})));
  Value s = g.reduce(e, Reducer::Sum, {1});
  g.set_outputs({g.binary(OpCode::Div, e, g.broadcast(s, {8, 100}, {0}))});
  EXPECT_EQ(cluster_count(g), 3);  // max; exp(x - max) and its sum; e / sum
}

TEST(Fuse, GeluChainIsOneLoop) {
  Graph g;
  Value x = g.param(DType::BF16, {64, 128});
  Value xf = g.convert(x, DType::F32);
  Value erf = g.unary(OpCode::Erf, g.binary(OpCode::Mul, xf, scalar(g, 0.7071067811865476, xf)));
  Value y = g.binary(OpCode::Mul, g.binary(OpCode::Mul, xf, scalar(g, 0.5, xf)),
                     g.binary(OpCode::Add, erf, scalar(g, 1.0, xf)));
  g.set_outputs({g.convert(y, DType::BF16)});
  EXPECT_EQ(cluster_count(g), 1);
}

TEST(Fuse, AnchorsStayAlone) {
  Graph g;
  Value x = g.param(DType::F32, {4, 6});
  Value t = g.transpose(g.unary(OpCode::Exp, x), {1, 0});
  Value r = g.unary(OpCode::Log, t);
  g.set_outputs({g.reduce(r, Reducer::Sum, {0})});  // leading dim: not a fused sink here
  auto cl = partition(g);
  // exp | transpose | log | reduce over a leading dim (anchor)
  ASSERT_EQ(cl.size(), 4u);
  EXPECT_TRUE(cl[1].anchor);
  EXPECT_TRUE(cl[3].anchor);
}

TEST(Fuse, TransposeKeepingTheLastDimJoinsItsReader) {
  Graph g;
  Value x = g.param(DType::F32, {2, 4, 16, 8});
  Value t = g.transpose(x, {0, 2, 1, 3});  // runs of 8 contiguous elements
  Value y = g.unary(OpCode::Exp, t);
  Value s = g.slice(x, {0, 0, 0, 0}, {2, 4, 16, 4}, {1, 1, 1, 1});  // runs of 4: too short
  g.set_outputs({y, g.unary(OpCode::Log, s)});
  EXPECT_TRUE(fuses_as_gather(g, g.nodes()[t.id]));
  EXPECT_FALSE(fuses_as_gather(g, g.nodes()[s.id]));
  auto cl = partition(g);
  ASSERT_EQ(cl.size(), 3u);  // transpose + exp | slice | log
  int with_t = -1;
  for (size_t i = 0; i < cl.size(); ++i)
    if (std::find(cl[i].main.begin(), cl[i].main.end(), t.id) != cl[i].main.end()) with_t = static_cast<int>(i);
  ASSERT_GE(with_t, 0);
  EXPECT_FALSE(cl[with_t].anchor);
  EXPECT_EQ(cl[with_t].inputs, std::vector<int>{x.id});
  GatherMap m;
  ASSERT_TRUE(gather_map(g, g.nodes()[t.id], m));
  EXPECT_EQ(m.shape, (std::vector<int64_t>{2, 16, 4, 8}));
  EXPECT_EQ(m.stride, (std::vector<int64_t>{512, 8, 128, 1}));
  EXPECT_EQ(m.base, 0);
}

TEST(Fuse, OutputInTheMiddleAndDeadNodes) {
  Graph g;
  Value x = g.param(DType::F32, {10});
  Value a = g.unary(OpCode::Exp, x);
  Value b = g.unary(OpCode::Log, a);
  g.unary(OpCode::Sin, b);  // dead
  g.set_outputs({a, g.unary(OpCode::Tanh, b)});
  auto cl = partition(g);
  ASSERT_EQ(cl.size(), 1u);
  EXPECT_EQ(cl[0].main.size(), 3u);
  EXPECT_EQ(cl[0].outputs.size(), 2u);
}

TEST(Fuse, NoCycleThroughAReduction) {
  // y = x * 2 and z = y - broadcast(sum(y)): z cannot join y's loop (it needs the whole sum).
  Graph g;
  Value x = g.param(DType::F32, {16, 32});
  Value y = g.binary(OpCode::Mul, x, scalar(g, 2.0, x));
  Value s = g.reduce(y, Reducer::Sum, {1});
  Value z = g.binary(OpCode::Sub, y, g.broadcast(s, {16, 32}, {0}));
  g.set_outputs({z});
  auto cl = partition(g);
  ASSERT_EQ(cl.size(), 2u);
  EXPECT_EQ(cl[0].sink, s.id);
  EXPECT_TRUE(std::find(cl[1].inputs.begin(), cl[1].inputs.end(), y.id) != cl[1].inputs.end());
}

TEST(Fuse, NoCycleThroughABroadcastOfABroadcast) {
  // The post stage of a reduction feeds anchors (concat, slice) whose result is broadcast
  // twice into a compare; a node reading both the compare's reduction and that post stage
  // must not join the post stage (found by HF whisper's generate in fused mode: isin of a
  // broadcast; the inner broadcast had no cluster yet, so the path through it was missed).
  Graph g;
  Value x = g.param(DType::F32, {2, 4}), q = g.param(DType::F32, {2, 1, 3});
  Value u = g.unary(OpCode::Negate, g.reduce(g.unary(OpCode::Exp, x), Reducer::Sum, {1}));  // [2], post
  Value k = g.slice(g.concat({u, u}, 0), {0}, {2}, {1});                                    // anchors
  Value inner = g.broadcast(k, {2, 1}, {0});
  Value outer = g.broadcast(inner, {2, 1, 3}, {0, 1});
  Value hit = g.reduce(g.convert(g.compare(Cmp::EQ, outer, q), DType::F32), Reducer::Sum, {2});
  Value r = g.reshape(hit, {2});
  g.set_outputs({g.binary(OpCode::Add, u, r)});
  auto cl = partition(g);  // throws "[fuse] cycle between clusters" on the bug
  std::set<int> seen;
  for (const Cluster& c : cl) {
    for (int in : c.inputs) EXPECT_TRUE(seen.count(in) || g.nodes()[in].is_param || g.nodes()[in].operands.empty())
        << "cluster reads node " << in << " before it is made";
    for (int v : c.main) seen.insert(v);
    if (c.sink >= 0) seen.insert(c.sink);
    for (int v : c.post) seen.insert(v);
  }
}

TEST(Fuse, ReshapeInsideAndAroundLoops) {
  Graph g;
  Value x = g.param(DType::F32, {4, 8});
  Value r = g.reshape(g.unary(OpCode::Exp, x), {32});
  Value s = g.reduce(g.unary(OpCode::Negate, r),
                     Reducer::Sum, {0});
  g.set_outputs({g.reshape(s, {1})});
  auto cl = partition(g);
  ASSERT_EQ(cl.size(), 1u);
  EXPECT_EQ(cl[0].post.size(), 1u);  // the reshape of the sum is an alias in the post stage
}

}  // namespace
}  // namespace torch_tpu::ir
