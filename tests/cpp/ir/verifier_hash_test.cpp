// Graph::verify on graphs built with unchecked_node, structural hashing, and hash-consing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "ir/graph.h"
#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using ir_test::dims_attr;
using ir_test::expect_error;

Node make(OpCode op, std::vector<int> operands, Shape shape, DType dtype = DType::F32) {
  Node n;
  n.op = op;
  n.operands = std::move(operands);
  n.shape = std::move(shape);
  n.dtype = dtype;
  return n;
}

TEST(IrVerifier, AcceptsBuiltGraph) {
  Graph g;
  Value a = g.param(DType::F32, {2, 3});
  Value r = g.reduce(g.binary(OpCode::Mul, a, a), Reducer::Sum, {1});
  g.set_outputs({r, a});
  EXPECT_NO_THROW(g.verify());
}

TEST(IrVerifier, RejectsOperandDefinedLater) {
  Graph g;
  Value a = g.param(DType::F32, {2});
  g.unchecked_node(make(OpCode::Add, {a.id, 2}, {2}));
  Value late = g.unchecked_node(make(OpCode::Negate, {a.id}, {2}));
  g.set_outputs({late});
  expect_error([&] { g.verify(); }, "[verify] node 1 (add) uses operand 2 that is not defined before it");
}

TEST(IrVerifier, RejectsWrongRecordedType) {
  Graph g;
  Value a = g.param(DType::F32, {2, 3});
  g.set_outputs({g.unchecked_node(make(OpCode::Exp, {a.id}, {3, 2}))});
  expect_error([&] { g.verify(); }, "[verify] node 1 (exponential) has type f32[3, 2], expected f32[2, 3]");
  Graph h;
  Value b = h.param(DType::F32, {2});
  h.set_outputs({h.unchecked_node(make(OpCode::Compare, {b.id, b.id}, {2}, DType::F32))});
  expect_error([&] { h.verify(); }, "has type f32[2], expected i1[2]");
}

TEST(IrVerifier, RejectsBadArityAndOperands) {
  Graph g;
  Value a = g.param(DType::F32, {2});
  g.set_outputs({g.unchecked_node(make(OpCode::Add, {a.id}, {2}))});
  expect_error([&] { g.verify(); }, "[add] wrong operand count; got 1, expected 2");
  Graph h;
  Value b = h.param(DType::F32, {2});
  h.set_outputs({h.unchecked_node(make(OpCode::Sub, {b.id, -1}, {2}))});
  expect_error([&] { h.verify(); }, "uses operand -1");
  Graph k;
  Value c = k.param(DType::F32, {2});
  k.set_outputs({k.unchecked_node(make(OpCode::Mul, {c.id, c.id}, {2}, DType::I32))});
  expect_error([&] { k.verify(); }, "has type i32[2], expected f32[2]");
}

TEST(IrVerifier, RejectsMissingOrBadOutputs) {
  Graph g;
  g.param(DType::F32, {2});
  expect_error([&] { g.verify(); }, "[verify] graph has no outputs");
  g.set_outputs({Value{5}});
  expect_error([&] { g.verify(); }, "[verify] output id 5 out of range");
}

TEST(IrVerifier, RejectsBadAttrsRecorded) {
  Graph g;
  Value a = g.param(DType::F32, {2, 3});
  Node t = make(OpCode::Transpose, {a.id}, {3, 2});
  t.attrs = dims_attr({1, 1});
  g.set_outputs({g.unchecked_node(t)});
  expect_error([&] { g.verify(); }, "[transpose] repeated dimension 1");
}

// Builds p0 f32[2,3], p1 f32[2,3] -> reduce(p0 * p1 + 1, sum, {1}); `tweak` changes one thing.
Graph build(const std::function<void(Graph&, Value&, Value&)>& tweak = nullptr) {
  Graph g;
  Value a = g.param(DType::F32, {2, 3}), b = g.param(DType::F32, {2, 3});
  if (tweak) tweak(g, a, b);
  Value m = g.binary(OpCode::Mul, a, b);
  Value s = g.binary(OpCode::Add, m, g.constant(1.0, g.dtype(m), g.shape(m)));
  g.set_outputs({g.reduce(s, Reducer::Sum, {1})});
  return g;
}

TEST(IrHash, EqualGraphsHashEqual) {
  EXPECT_EQ(build().hash(), build().hash());
  Graph g = build();
  EXPECT_EQ(g.hash(), g.hash());
}

TEST(IrHash, OneDifferenceChangesTheHash) {
  uint64_t base = build().hash();
  auto differs = [&](const char* what, const std::function<void(Graph&, Value&, Value&)>& f) {
    EXPECT_NE(build(f).hash(), base) << what;
  };
  differs("dtype", [](Graph& g, Value& a, Value& b) {
    a = g.param(DType::F16, {2, 3});
    b = g.param(DType::F16, {2, 3});
  });
  differs("shape", [](Graph& g, Value& a, Value& b) {
    a = g.param(DType::F32, {2, 4});
    b = g.param(DType::F32, {2, 4});
  });
  differs("extra op", [](Graph& g, Value& a, Value&) { a = g.unary(OpCode::Exp, a); });
  auto only_op = [](OpCode op) {
    Graph g;
    Value a = g.param(DType::F32, {2}), b = g.param(DType::F32, {2});
    g.set_outputs({g.binary(op, a, b)});
    return g.hash();
  };
  EXPECT_EQ(only_op(OpCode::Add), only_op(OpCode::Add));
  EXPECT_NE(only_op(OpCode::Add), only_op(OpCode::Mul));
  EXPECT_NE(only_op(OpCode::Max), only_op(OpCode::Min));
}

TEST(IrHash, AttrsAndOutputsCount) {
  auto with = [](Reducer r, std::vector<int64_t> dims, double c) {
    Graph g;
    Value a = g.param(DType::F32, {2, 3});
    g.set_outputs({g.reduce(g.binary(OpCode::Add, a, g.constant(c, DType::F32, {2, 3})), r, dims)});
    return g.hash();
  };
  uint64_t base = with(Reducer::Sum, {1}, 1.0);
  EXPECT_EQ(with(Reducer::Sum, {1}, 1.0), base);
  EXPECT_NE(with(Reducer::Max, {1}, 1.0), base);
  EXPECT_NE(with(Reducer::Sum, {0}, 1.0), base);
  EXPECT_NE(with(Reducer::Sum, {1}, 2.0), base);
  EXPECT_NE(with(Reducer::Sum, {1}, -0.0), with(Reducer::Sum, {1}, 0.0));
  Graph g = build();
  uint64_t one = g.hash();
  g.set_outputs({g.outputs()[0], g.outputs()[0]});
  EXPECT_NE(g.hash(), one);
}

TEST(IrHash, ConsingDedupsPureNodes) {
  Graph g;
  Value a = g.param(DType::F32, {2}), b = g.param(DType::F32, {2});
  Value x = g.binary(OpCode::Add, a, b);
  size_t n = g.nodes().size();
  EXPECT_EQ(g.binary(OpCode::Add, a, b), x);
  EXPECT_EQ(g.constant(2, DType::F32, {2}), g.constant(2, DType::F32, {2}));
  EXPECT_EQ(g.compare(Cmp::LT, a, b), g.compare(Cmp::LT, a, b));
  EXPECT_EQ(g.nodes().size(), n + 2);
  // Different attrs, dtypes or shapes are different nodes.
  EXPECT_NE(g.compare(Cmp::LT, a, b), g.compare(Cmp::LE, a, b));
  EXPECT_NE(g.constant(2, DType::F32, {2}), g.constant(2, DType::F64, {2}));
  EXPECT_NE(g.constant(2, DType::F32, {2}), g.constant(2, DType::F32, {}));
  EXPECT_NE(g.constant(0.0, DType::F32), g.constant(-0.0, DType::F32));
  EXPECT_EQ(g.constant(NAN, DType::F32), g.constant(NAN, DType::F32));
  // Parameters are never merged.
  EXPECT_NE(g.param(DType::F32, {2}), g.param(DType::F32, {2}));
}

TEST(IrHash, RngNodesAreNeverMerged) {
  Graph g;
  Value s = g.param(DType::U64, {2});
  Value u1 = g.op(OpCode::RngUniform, {s}, {}, {4}, DType::F32);
  Value u2 = g.op(OpCode::RngUniform, {s}, {}, {4}, DType::F32);
  EXPECT_NE(u1, u2);
  EXPECT_NE(g.op(OpCode::RngNormal, {s}, {}, {4}, DType::F32),
            g.op(OpCode::RngNormal, {s}, {}, {4}, DType::F32));
  // ...but their pure consumers still are.
  EXPECT_EQ(g.unary(OpCode::Exp, u1), g.unary(OpCode::Exp, u1));
}

}  // namespace
}  // namespace torch_tpu::ir
