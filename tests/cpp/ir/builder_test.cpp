// The builder infers result shapes and dtypes for every op kind (shape rules in graph.cpp).
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using ir_test::dims_attr;
using ir_test::dot_attr;

void expect_type(const Graph& g, Value v, DType t, const Shape& s) {
  EXPECT_EQ(dtype_name(g.dtype(v)), std::string(dtype_name(t)));
  EXPECT_EQ(shape_str(g.shape(v)), shape_str(s));
}

TEST(IrBuilder, UnaryAndBinaryKeepOperandType) {
  Graph g;
  Value f = g.param(DType::F32, {2, 3}), i = g.param(DType::I32, {4}), b = g.param(DType::Bool, {});
  expect_type(g, g.unary(OpCode::Exp, f), DType::F32, {2, 3});
  expect_type(g, g.unary(OpCode::Erf, f), DType::F32, {2, 3});
  expect_type(g, g.unary(OpCode::Abs, i), DType::I32, {4});
  expect_type(g, g.unary(OpCode::Not, b), DType::Bool, {});
  expect_type(g, g.binary(OpCode::Add, f, f), DType::F32, {2, 3});
  expect_type(g, g.binary(OpCode::Rem, i, i), DType::I32, {4});
  expect_type(g, g.binary(OpCode::Xor, b, b), DType::Bool, {});
}

TEST(IrBuilder, ElementwiseOthers) {
  Graph g;
  Value x = g.param(DType::BF16, {2, 3}), y = g.param(DType::BF16, {2, 3});
  Value p = g.compare(Cmp::LT, x, y);
  expect_type(g, p, DType::Bool, {2, 3});
  expect_type(g, g.select(p, x, y), DType::BF16, {2, 3});
  Value lo = g.constant(0, DType::BF16), hi = g.constant(1, DType::BF16);
  expect_type(g, g.op(OpCode::Clamp, {lo, x, hi}), DType::BF16, {2, 3});
  expect_type(g, g.op(OpCode::Clamp, {y, x, y}), DType::BF16, {2, 3});
  expect_type(g, g.convert(x, DType::I64), DType::I64, {2, 3});
  EXPECT_EQ(g.convert(x, DType::BF16), x);  // no-op convert is elided
}

TEST(IrBuilder, Leaves) {
  Graph g;
  expect_type(g, g.constant(1.5, DType::F64, {4, 1}), DType::F64, {4, 1});
  expect_type(g, g.constant(3, DType::U8), DType::U8, {});
  expect_type(g, g.iota(DType::I32, {2, 5}, 1), DType::I32, {2, 5});
  const Node& c = g.node(g.constant(2.9, DType::I32));
  EXPECT_EQ(c.attrs.ivalue, 2);  // integers truncate, as static_cast does
  EXPECT_EQ(g.node(g.constant(-1, DType::Bool)).attrs.ivalue, 1);
}

TEST(IrBuilder, ShapeOps) {
  Graph g;
  Value x = g.param(DType::F32, {2, 3, 4});
  expect_type(g, g.broadcast(g.param(DType::F32, {3}), {2, 3}, {1}), DType::F32, {2, 3});
  expect_type(g, g.broadcast(g.param(DType::F32, {1, 3}), {5, 3}, {0, 1}), DType::F32, {5, 3});
  expect_type(g, g.broadcast_to(g.param(DType::I8, {3, 1}), {2, 3, 4}), DType::I8, {2, 3, 4});
  expect_type(g, g.reshape(x, {6, 4}), DType::F32, {6, 4});
  EXPECT_EQ(g.reshape(x, {2, 3, 4}), x);
  expect_type(g, g.transpose(x, {2, 0, 1}), DType::F32, {4, 2, 3});
  EXPECT_EQ(g.transpose(x, {0, 1, 2}), x);
  // a transpose of a transpose: one transpose, or none when the perms cancel
  Value t = g.transpose(x, {0, 2, 1});
  EXPECT_EQ(g.transpose(t, {0, 2, 1}), x);
  Value tt = g.transpose(t, {2, 0, 1});  // dims of t: (0, 2, 1) -> of x: (1, 0, 2)
  expect_type(g, tt, DType::F32, {3, 2, 4});
  EXPECT_EQ(g.node(tt).operands[0], x.id);
  EXPECT_EQ(g.node(tt).attrs.dims, (std::vector<int64_t>{1, 0, 2}));
  expect_type(g, g.slice(x, {0, 1, 0}, {2, 3, 4}, {1, 1, 3}), DType::F32, {2, 2, 2});
  expect_type(g, g.slice(x, {1, 0, 2}, {1, 3, 4}, {1, 2, 1}), DType::F32, {0, 2, 2});
  // a reshape that only drops / adds unit dims of a slice is the slice of the reshaped operand
  Value p5 = g.param(DType::F32, {2, 3, 6, 4, 1});
  Value s5 = g.slice(p5, {0, 0, 2, 0, 0}, {2, 3, 6, 4, 1}, {1, 1, 2, 1, 1});
  Value r4 = g.reshape(s5, {2, 1, 3, 2, 4});
  expect_type(g, r4, DType::F32, {2, 1, 3, 2, 4});
  ASSERT_EQ(g.node(r4).op, OpCode::Slice);
  EXPECT_EQ(g.node(r4).attrs.start, (std::vector<int64_t>{0, 0, 0, 2, 0}));
  EXPECT_EQ(g.node(r4).attrs.stride, (std::vector<int64_t>{1, 1, 1, 2, 1}));
  expect_type(g, Value{g.node(r4).operands[0]}, DType::F32, {2, 1, 3, 6, 4});
  // not when a dim the slice cuts to 1 would be dropped, or the reshape merges dims
  Value s1 = g.slice(p5, {0, 0, 2, 0, 0}, {2, 3, 3, 4, 1}, {1, 1, 1, 1, 1});
  EXPECT_EQ(g.node(g.reshape(s1, {2, 3, 4})).op, OpCode::Reshape);
  EXPECT_EQ(g.node(g.reshape(s5, {6, 2, 4})).op, OpCode::Reshape);
  // a reshape splitting a sliced dim (q cut from a qkv projection, split into heads): the slice
  // of the operand split at the same inner size
  Value qkv = g.param(DType::F32, {2, 8, 24});
  Value k = g.slice(qkv, {0, 0, 8}, {2, 8, 16}, {1, 1, 1});
  Value kh = g.reshape(k, {2, 8, 2, 4, 1});
  expect_type(g, kh, DType::F32, {2, 8, 2, 4, 1});
  ASSERT_EQ(g.node(kh).op, OpCode::Slice);
  EXPECT_EQ(g.node(kh).attrs.start, (std::vector<int64_t>{0, 0, 2, 0, 0}));
  EXPECT_EQ(g.node(kh).attrs.limit, (std::vector<int64_t>{2, 8, 4, 4, 1}));
  expect_type(g, Value{g.node(kh).operands[0]}, DType::F32, {2, 8, 6, 4, 1});
  Value whole = g.slice(qkv, {0, 0, 8}, {2, 8, 16}, {1, 1, 1});  // a split unsliced dim too
  Value wh = g.reshape(whole, {2, 2, 4, 2, 4});
  ASSERT_EQ(g.node(wh).op, OpCode::Slice);
  EXPECT_EQ(g.node(wh).attrs.start, (std::vector<int64_t>{0, 0, 0, 2, 0}));
  expect_type(g, Value{g.node(wh).operands[0]}, DType::F32, {2, 2, 4, 6, 4});
  // not when the slice starts inside an inner block, steps, or the inner size does not divide
  EXPECT_EQ(g.node(g.reshape(g.slice(qkv, {0, 0, 2}, {2, 8, 10}, {1, 1, 1}), {2, 8, 2, 4})).op, OpCode::Reshape);
  EXPECT_EQ(g.node(g.reshape(g.slice(qkv, {0, 0, 0}, {2, 8, 16}, {1, 1, 2}), {2, 8, 2, 4})).op, OpCode::Reshape);
  EXPECT_EQ(g.node(g.reshape(g.slice(qkv, {0, 0, 0}, {2, 8, 10}, {1, 1, 1}), {2, 8, 2, 5})).op, OpCode::Reshape);
  Value y = g.param(DType::F32, {2, 5, 4});
  expect_type(g, g.concat({x, y, x}, 1), DType::F32, {2, 11, 4});
  EXPECT_EQ(g.concat({x}, 0), x);
  expect_type(g, g.op(OpCode::Reverse, {x}, dims_attr({0, 2})), DType::F32, {2, 3, 4});
}

TEST(IrBuilder, Reductions) {
  Graph g;
  Value x = g.param(DType::F16, {2, 3, 4});
  expect_type(g, g.reduce(x, Reducer::Sum, {2, 0}), DType::F16, {3});
  expect_type(g, g.reduce(x, Reducer::Max, {0, 1, 2}), DType::F16, {});
  expect_type(g, g.reduce(x, Reducer::Prod, {}), DType::F16, {2, 3, 4});
  EXPECT_EQ(g.node(g.reduce(x, Reducer::Min, {2, 0})).attrs.dims, (std::vector<int64_t>{0, 2}));
  expect_type(g, g.reduce(g.param(DType::Bool, {5}), Reducer::Or, {0}), DType::Bool, {});
  expect_type(g, g.op(OpCode::ArgMax, {x}, dims_attr({1})), DType::I64, {2, 4});
  expect_type(g, g.op(OpCode::ArgMin, {x}, dims_attr({2})), DType::I64, {2, 3});
}

TEST(IrBuilder, Dot) {
  Graph g;
  Value a = g.param(DType::F32, {2, 3}), b = g.param(DType::F32, {3, 4});
  expect_type(g, g.dot(a, b, dot_attr({}, {}, {1}, {0})), DType::F32, {2, 4});
  // Batch dims first, then lhs free dims, then rhs free dims.
  Value l = g.param(DType::BF16, {5, 2, 7, 3}), r = g.param(DType::BF16, {7, 3, 6, 5});
  expect_type(g, g.dot(l, r, dot_attr({0, 2}, {3, 0}, {3}, {1})), DType::BF16, {5, 7, 2, 6});
  // Outer product: no contracting dims.
  expect_type(g, g.dot(g.param(DType::I32, {3}), g.param(DType::I32, {4}), dot_attr({}, {}, {}, {})),
              DType::I32, {3, 4});
}

TEST(IrBuilder, Rng) {
  Graph g;
  Value s = g.param(DType::U64, {2});
  expect_type(g, g.op(OpCode::RngUniform, {s}, {}, {3, 2}, DType::F32), DType::F32, {3, 2});
  expect_type(g, g.op(OpCode::RngNormal, {s}, {}, {}, DType::BF16), DType::BF16, {});
}

TEST(IrBuilder, EveryOpHasTableMetadata) {
  for (int i = 0; i < static_cast<int>(OpCode::kNumOps); ++i) {
    const OpInfo& info = op_info(static_cast<OpCode>(i));
    EXPECT_NE(info.name, nullptr);
    EXPECT_NE(std::string(info.hlo), "");
    EXPECT_GE(info.arity, -1);
  }
  EXPECT_TRUE(is_elementwise(OpCode::Add));
  EXPECT_TRUE(is_elementwise(OpCode::Select));
  EXPECT_FALSE(is_elementwise(OpCode::Reduce));
  EXPECT_TRUE(op_info(OpCode::Mul).traits & kCommutative);
  EXPECT_FALSE(op_info(OpCode::Sub).traits & kCommutative);
}

// Builders hold g.shape(x) / g.node(x) while adding nodes (linalg's eye(L, g.shape(l)) adds
// two iotas from one shape): those references must survive the graph's growth.
TEST(IrBuilder, ShapeReferencesSurviveGrowth) {
  Graph g;
  Value x = g.param(DType::F32, {3, 5});
  const Shape& s = g.shape(x);
  const Node& n = g.node(x);
  for (int i = 0; i < 5000; ++i) g.constant(i, DType::F32, s);  // distinct: not interned
  EXPECT_EQ(s, (Shape{3, 5}));
  EXPECT_EQ(n.shape, (Shape{3, 5}));
  EXPECT_EQ(g.nodes().size(), 5001u);
}

}  // namespace
}  // namespace torch_tpu::ir
