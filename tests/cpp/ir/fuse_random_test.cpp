// The fusion partition on random graphs: elementwise chains, reductions over trailing,
// leading and size-1 dims, broadcasts back, reshapes and transposes, mixed with anchors
// (dots), several outputs. Every graph must partition (no "[fuse] cycle between clusters"),
// every live non-leaf node must land in exactly one cluster, and clusters must come in an
// order where each reads only values made earlier.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "ir/graph.h"
#include "ir/passes/fuse.h"

namespace torch_tpu::ir {
namespace {

// A random graph over values of shapes [4, 6], [4, 1], [1, 6], [4], [6], [24], [6, 4].
Graph random_graph(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  Graph g;
  std::vector<Value> vals = {g.param(DType::F32, {4, 6}), g.param(DType::F32, {4, 6}), g.param(DType::F32, {4, 1})};
  auto of_shape = [&](const Shape& s) {
    std::vector<Value> m;
    for (Value v : vals)
      if (g.shape(v) == s) m.push_back(v);
    return m;
  };
  auto any_2d = [&]() {
    std::vector<Value> m = of_shape({4, 6});
    return m[pick(m.size())];
  };
  int steps = 6 + static_cast<int>(pick(20));
  for (int i = 0; i < steps; ++i) {
    Value x = any_2d();
    Value r;
    switch (pick(12)) {
      case 0: r = g.unary(OpCode::Exp, x); break;
      case 1: r = g.binary(OpCode::Mul, x, any_2d()); break;
      case 2: r = g.binary(OpCode::Add, x, any_2d()); break;
      case 3: {  // row reduce (keepdim) and broadcast back
        Value s = g.reshape(g.reduce(x, Reducer::Sum, {1}), {4, 1});
        vals.push_back(s);
        r = g.binary(OpCode::Sub, x, g.broadcast(g.reshape(s, {4}), {4, 6}, {0}));
        break;
      }
      case 4: {  // column reduce and broadcast back
        Value s = g.reduce(x, Reducer::Max, {0});
        vals.push_back(s);
        r = g.binary(OpCode::Div, x, g.broadcast(s, {4, 6}, {1}));
        break;
      }
      case 5: {  // reduce over a size-1 dim (a reshape in disguise), then use it
        std::vector<Value> c = of_shape({4, 1});
        Value s = g.reduce(c[pick(c.size())], Reducer::Sum, {1});
        vals.push_back(s);
        r = g.binary(OpCode::Mul, x, g.broadcast(s, {4, 6}, {0}));
        break;
      }
      case 6: {  // keepdim sum
        Value s = g.reshape(g.reduce(g.unary(OpCode::Negate, x), Reducer::Sum, {1}), {4, 1});
        vals.push_back(s);
        r = g.binary(OpCode::Add, x, g.broadcast(g.reshape(g.reduce(s, Reducer::Sum, {1}), {4}), {4, 6}, {0}));
        break;
      }
      case 7: r = g.reshape(g.unary(OpCode::Tanh, g.reshape(x, {24})), {4, 6}); break;
      case 8: r = g.transpose(g.transpose(x, {1, 0}), {1, 0}); break;
      case 9: {  // an anchor
        Attrs d;
        d.lhs_contract = {1};
        d.rhs_contract = {0};
        Value w = g.transpose(any_2d(), {1, 0});  // [6, 4]
        Value m = g.dot(x, w, d);                  // [4, 4]
        r = g.binary(OpCode::Add, x, g.broadcast(g.reduce(m, Reducer::Sum, {1}), {4, 6}, {0}));
        break;
      }
      case 10: r = g.select(g.compare(Cmp::GT, x, any_2d()), x, any_2d()); break;
      default: r = g.binary(OpCode::Max, x, g.broadcast(g.reduce(any_2d(), Reducer::Min, {0, 1}), {4, 6}, {})); break;
    }
    vals.push_back(r);
  }
  std::vector<Value> outs = {vals.back()};
  for (int k = 0; k < 2; ++k) outs.push_back(vals[3 + pick(vals.size() - 3)]);
  g.set_outputs(outs);
  return g;
}

TEST(FuseRandom, EveryGraphPartitionsIntoAnOrderedCover) {
  for (uint32_t seed = 0; seed < 3000; ++seed) {
    Graph g = random_graph(seed);
    std::vector<Cluster> cs;
    ASSERT_NO_THROW(cs = partition(g)) << "seed " << seed;
    std::vector<int> where(g.nodes().size(), -1);
    for (size_t c = 0; c < cs.size(); ++c) {
      std::vector<int> members = cs[c].main;
      members.insert(members.end(), cs[c].post.begin(), cs[c].post.end());
      if (cs[c].sink >= 0) members.push_back(cs[c].sink);
      for (int id : members) {
        ASSERT_EQ(where[id], -1) << "seed " << seed << ": node " << id << " in two clusters";
        where[id] = static_cast<int>(c);
      }
    }
    for (size_t c = 0; c < cs.size(); ++c)
      for (int in : cs[c].inputs)
        ASSERT_LT(where[in], static_cast<int>(c)) << "seed " << seed << ": cluster " << c << " reads node " << in
                                                  << " made by a later or the same cluster";
  }
}

}  // namespace
}  // namespace torch_tpu::ir
