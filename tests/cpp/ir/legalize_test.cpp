// Layout legalization by structure (no device): which IR each view kind becomes, what a
// write needs, and the errors on bad bindings. The numbers are checked against the host
// runtime in tests/cpp/runtime/legalize_test.cpp.
#include "ir/passes/legalize.h"

#include <algorithm>

#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using ir_test::expect_error;

StorageView sv(int storage, int64_t numel, Shape sizes, std::vector<int64_t> strides = {},
               int64_t offset = 0) {
  return StorageView{storage, numel, std::move(sizes), std::move(strides), offset};
}

// Op codes of the non-parameter nodes, in order.
std::vector<OpCode> ops_of(const Graph& g) {
  std::vector<OpCode> v;
  for (const Node& n : g.nodes())
    if (!n.is_param) v.push_back(n.op);
  return v;
}

bool has_op(const Graph& g, OpCode op) {
  auto v = ops_of(g);
  return std::find(v.begin(), v.end(), op) != v.end();
}

// The IR of one read: a graph returning view `v` of storage 0 (pass-through output).
Graph read_graph(const StorageView& v, DType d = DType::F32) {
  Graph g;
  g.set_outputs({g.param(d, v.sizes)});
  Legalized l = legalize(g, {v}, {StorageView{}});
  EXPECT_EQ(l.param_storage, (std::vector<int>{0}));
  EXPECT_EQ(l.graph.shape(Value{0}), (Shape{v.storage_numel}));
  return l.graph;
}

TEST(LegalizeIr, WholeDenseReadIsAReshape) {
  EXPECT_EQ(ops_of(read_graph(sv(0, 12, {3, 4}))), (std::vector<OpCode>{OpCode::Reshape}));
  EXPECT_EQ(ops_of(read_graph(sv(0, 12, {12}))), (std::vector<OpCode>{}));
  EXPECT_EQ(ops_of(read_graph(sv(0, 12, {3, 1, 4}, {4, 1, 1}))), (std::vector<OpCode>{OpCode::Reshape}));
}

TEST(LegalizeIr, ReadKinds) {
  using O = OpCode;
  // A contiguous range: slice + reshape.
  EXPECT_EQ(ops_of(read_graph(sv(0, 20, {2, 3}, {3, 1}, 5))), (std::vector<O>{O::Slice, O::Reshape}));
  // A strided range: one strided slice.
  EXPECT_EQ(ops_of(read_graph(sv(0, 10, {5}, {2}))), (std::vector<O>{O::Slice}));
  // A column slice of a row-major matrix: the whole storage as [4, 4], sliced.
  EXPECT_EQ(ops_of(read_graph(sv(0, 16, {4, 2}, {4, 1}, 1))), (std::vector<O>{O::Reshape, O::Slice}));
  // A transpose of the whole storage: reshape + transpose.
  EXPECT_EQ(ops_of(read_graph(sv(0, 12, {4, 3}, {1, 4}))), (std::vector<O>{O::Reshape, O::Transpose}));
  // A negative stride: a slice, then reverse.
  EXPECT_EQ(ops_of(read_graph(sv(0, 10, {4}, {-2}, 7))), (std::vector<O>{O::Slice, O::Reverse}));
  // A broadcast row: slice + broadcast.
  EXPECT_EQ(ops_of(read_graph(sv(0, 9, {3, 4}, {0, 1}, 2))), (std::vector<O>{O::Slice, O::Broadcast}));
  // A view that wraps around a box row from its aligned start is padded, never gathered.
  Graph wrap = read_graph(sv(0, 22, {2, 5}, {10, 1}, 7));
  EXPECT_TRUE(has_op(wrap, O::Concat));
  EXPECT_FALSE(has_op(wrap, O::Gather));
  // Overlapping dims: a gather with indices from iota.
  Graph over = read_graph(sv(0, 8, {3, 4}, {2, 1}));
  EXPECT_TRUE(has_op(over, O::Gather));
  EXPECT_TRUE(has_op(over, O::Iota));
  // Empty: a constant, no parameter use.
  EXPECT_EQ(ops_of(read_graph(sv(0, 5, {0, 3}))), (std::vector<O>{O::Constant}));
}

TEST(LegalizeIr, EveryOtherPlusOneInPlace) {  // x[::2] += 1: no gather or scatter
  Graph g;
  Value x = g.param(DType::F32, {5});
  g.set_outputs({g.binary(OpCode::Add, x, g.broadcast(g.constant(1, DType::F32), {5}, {}))});
  StorageView v = sv(0, 10, {5}, {2});
  Legalized l = legalize(g, {v}, {v});
  EXPECT_EQ(l.graph.num_params(), 1);
  EXPECT_EQ(l.donated, (std::vector<int>{0}));
  EXPECT_EQ(l.graph.shape(l.graph.outputs()[0]), (Shape{10}));
  EXPECT_FALSE(has_op(l.graph, OpCode::Gather));
  EXPECT_FALSE(has_op(l.graph, OpCode::Scatter));
  EXPECT_NO_THROW(l.graph.to_stablehlo());
}

TEST(LegalizeIr, WholeWriteNeedsNoOldValueAndPartialWriteDoes) {
  Graph g;
  g.set_outputs({g.param(DType::F32, {3, 4}), g.param(DType::F32, {3, 4})});
  // Output 0 replaces storage 1 (dense), output 1 replaces storage 2 through a transpose:
  // neither needs an old value. Writing part of storage 2 instead makes its old value a
  // parameter, donated to its output.
  Legalized l = legalize(g, {sv(0, 12, {3, 4}), sv(0, 12, {3, 4})},
                         {sv(1, 12, {3, 4}), sv(2, 12, {3, 4}, {1, 3})});
  EXPECT_EQ(l.param_storage, (std::vector<int>{0}));
  EXPECT_EQ(l.output_storage, (std::vector<int>{1, 2}));
  EXPECT_EQ(l.donated, (std::vector<int>{-1, -1}));
  Legalized p = legalize(g, {sv(0, 12, {3, 4}), sv(0, 12, {3, 4})},
                         {sv(1, 12, {3, 4}), sv(2, 20, {3, 4}, {5, 1}, 1)});
  EXPECT_EQ(p.param_storage, (std::vector<int>{0, 2}));
  EXPECT_EQ(p.donated, (std::vector<int>{-1, 1}));
  EXPECT_TRUE(has_op(p.graph, OpCode::Concat));
  EXPECT_NO_THROW(p.graph.to_stablehlo());
}

TEST(LegalizeIr, OverlappingWriteIsAScatter) {
  Graph g;
  g.set_outputs({g.param(DType::I32, {3, 4})});
  Legalized l = legalize(g, {StorageView{}}, {sv(0, 8, {3, 4}, {2, 1})});
  EXPECT_EQ(l.param_storage, (std::vector<int>{-1, 0}));
  EXPECT_TRUE(has_op(l.graph, OpCode::Scatter));
  EXPECT_NO_THROW(l.graph.to_stablehlo());
}

TEST(LegalizeIr, Errors) {
  Graph g;
  g.set_outputs({g.param(DType::F32, {4})});
  expect_error([&] { legalize(g, {sv(0, 6, {4}, {2})}, {StorageView{}}); },
               "[legalize] view reaches outside its storage; got elements 0..6, expected within 0..5");
  expect_error([&] { legalize(g, {sv(0, 6, {4}, {-1}, 2)}, {StorageView{}}); },
               "[legalize] view reaches outside its storage; got elements -1..2");
  expect_error([&] { legalize(g, {}, {StorageView{}}); },
               "[legalize] wrong number of parameter views; got 0, expected 1");
  expect_error([&] { legalize(g, {sv(0, 6, {2, 2})}, {StorageView{}}); },
               "[legalize] parameter 0 view does not match the graph; got sizes [2, 2], expected [4]");
  expect_error([&] { legalize(g, {sv(0, 6, {4}, {1, 1})}, {StorageView{}}); },
               "[legalize] view strides do not match its rank; got 2 strides, expected 1");
  expect_error([&] { legalize(g, {sv(0, 6, {4})}, {sv(0, 8, {4})}); },
               "[legalize] storage 0 is seen with two sizes; got 8 for output 0, expected 6");
  Graph h;
  h.set_outputs({h.convert(h.param(DType::F32, {4}), DType::I32)});
  expect_error([&] { legalize(h, {sv(0, 4, {4})}, {sv(0, 4, {4})}); },
               "[legalize] storage 0 is seen with two dtypes; got i32 for output 0, expected f32");
}

}  // namespace
}  // namespace torch_tpu::ir
