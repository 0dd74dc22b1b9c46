// The axis ops in the IR: gather / scatter / scatter_add, sort / argsort, cumsum / cumprod.
// Type inference, rejected inputs, and their StableHLO text.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "ir/graph.h"
#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using ir_test::dims_attr;
using ir_test::expect_error;

Attrs sort_attr(int64_t dim, bool descending) {
  Attrs a = dims_attr({dim});
  a.ivalue = descending;
  return a;
}

void expect_type(const Graph& g, Value v, DType t, const Shape& s) {
  EXPECT_EQ(dtype_name(g.dtype(v)), std::string(dtype_name(t)));
  EXPECT_EQ(shape_str(g.shape(v)), shape_str(s));
}

TEST(IrIndexing, TypeInference) {
  Graph g;
  Value x = g.param(DType::BF16, {5, 4, 3});
  Value i64 = g.param(DType::I64, {7, 4, 3}), i32 = g.param(DType::I32, {2, 2, 9});
  Value u = g.param(DType::BF16, {7, 4, 3});
  expect_type(g, g.op(OpCode::Gather, {x, i64}, dims_attr({0})), DType::BF16, {7, 4, 3});
  expect_type(g, g.op(OpCode::Gather, {x, i32}, dims_attr({2})), DType::BF16, {2, 2, 9});
  expect_type(g, g.op(OpCode::Scatter, {x, i64, u}, dims_attr({0})), DType::BF16, {5, 4, 3});
  expect_type(g, g.op(OpCode::ScatterAdd, {x, i64, u}, dims_attr({0})), DType::BF16, {5, 4, 3});
  // Empty indices may index an empty axis.
  Value e = g.param(DType::F32, {0, 3}), ei = g.param(DType::I64, {0, 3});
  expect_type(g, g.op(OpCode::Gather, {e, ei}, dims_attr({0})), DType::F32, {0, 3});
  expect_type(g, g.op(OpCode::Sort, {x}, sort_attr(1, true)), DType::BF16, {5, 4, 3});
  expect_type(g, g.op(OpCode::ArgSort, {x}, sort_attr(2, false)), DType::I64, {5, 4, 3});
  Value b = g.param(DType::Bool, {3});
  expect_type(g, g.op(OpCode::Sort, {b}, sort_attr(0, false)), DType::Bool, {3});
  expect_type(g, g.op(OpCode::Cumsum, {x}, dims_attr({1})), DType::BF16, {5, 4, 3});
  expect_type(g, g.op(OpCode::Cumprod, {i64}, dims_attr({0})), DType::I64, {7, 4, 3});
  // Different sort directions are different nodes (attrs take part in hash-consing).
  EXPECT_NE(g.op(OpCode::Sort, {x}, sort_attr(1, true)).id,
            g.op(OpCode::Sort, {x}, sort_attr(1, false)).id);
  g.set_outputs({x});
  g.verify();
}

TEST(IrIndexing, Errors) {
  Graph g;
  Value x = g.param(DType::F32, {5, 4}), i = g.param(DType::I64, {3, 4});
  Value f = g.param(DType::F32, {3, 4}), i16 = g.param(DType::I16, {3, 4});
  Value wide = g.param(DType::I64, {3, 5}), r1 = g.param(DType::I64, {3});
  expect_error([&] { g.op(OpCode::Gather, {x, f}, dims_attr({0})); },
               "[gather] indices must be i32 or i64; got f32");
  expect_error([&] { g.op(OpCode::Gather, {x, i16}, dims_attr({0})); }, "got i16");
  expect_error([&] { g.op(OpCode::Gather, {x, r1}, dims_attr({0})); },
               "[gather] indices rank mismatch; got [3], expected rank 2");
  expect_error([&] { g.op(OpCode::Gather, {x, wide}, dims_attr({0})); },
               "[gather] indices larger than the operand outside the axis; got [3, 5]");
  expect_error([&] { g.op(OpCode::Gather, {x, i}, dims_attr({2})); },
               "[gather] dimension out of range; got 2");
  expect_error([&] { g.op(OpCode::Gather, {x, i}, dims_attr({0, 1})); },
               "[gather] needs exactly one dimension; got 2");
  Value empty = g.param(DType::F32, {0, 4});
  expect_error([&] { g.op(OpCode::Gather, {empty, i}, dims_attr({0})); },
               "[gather] cannot index an empty axis 0");
  expect_error([&] { g.op(OpCode::Scatter, {x, i, x}, dims_attr({0})); },
               "[scatter] updates shape mismatch; got [5, 4], expected the indices shape [3, 4]");
  expect_error([&] { g.op(OpCode::ScatterAdd, {x, i, i}, dims_attr({0})); },
               "[scatter] updates dtype mismatch; got i64, expected f32");
  expect_error([&] { g.op(OpCode::Scatter, {x, i}, dims_attr({0})); },
               "[scatter] wrong operand count; got 2, expected 3");
  Attrs sum = dims_attr({0});
  sum.reducer = Reducer::Sum;
  expect_error([&] { g.op(OpCode::ScatterReduce, {x, i, x}, sum); },
               "[scatter] updates shape mismatch");
  Value u = g.param(DType::F32, {3, 4});
  expect_error([&] { g.op(OpCode::ScatterReduce, {x, i, u}, sum); },
               "[scatter] scatter_reduce needs a prod, max or min reducer; got reducer 0");
  Attrs bad = dims_attr({0});
  bad.ivalue = 2;
  expect_error([&] { g.op(OpCode::Sort, {x}, bad); }, "[sort] attrs.ivalue must be 0");
  expect_error([&] { g.op(OpCode::ArgSort, {x}, dims_attr({})); },
               "[sort] needs exactly one dimension");
  Value b = g.param(DType::Bool, {3});
  expect_error([&] { g.op(OpCode::Cumsum, {b}, dims_attr({0})); }, "[cumsum] unsupported dtype i1");
  expect_error([&] { g.op(OpCode::Cumprod, {x}, dims_attr({-1})); },
               "[reduce_window] dimension out of range; got -1");
}

TEST(IrIndexing, ScatterReducePrintsItsCombiner) {
  const std::pair<Reducer, const char*> rows[] = {{Reducer::Prod, "multiply"}, {Reducer::Max, "maximum"}, {Reducer::Min, "minimum"}};
  for (auto [r, op] : rows) {
    Graph g;
    Value x = g.param(DType::F32, {6}), i = g.param(DType::I32, {3}), u = g.param(DType::F32, {3});
    Attrs at = dims_attr({0});
    at.reducer = r;
    Value y = g.op(OpCode::ScatterReduce, {x, i, u}, at);
    EXPECT_EQ(g.dtype(y), DType::F32);
    g.set_outputs({y});
    std::string s = g.to_stablehlo();
    EXPECT_NE(s.find(std::string("\"stablehlo.") + op + "\"(%t3_1, %t3_2)"), std::string::npos) << s;
  }
}

TEST(IrIndexing, GatherPrintsFullCoordinates) {
  Graph g;
  Value x = g.param(DType::F32, {5, 4}), i = g.param(DType::I32, {3, 4});
  g.set_outputs({g.op(OpCode::Gather, {x, i}, dims_attr({0}))});
  EXPECT_EQ(g.to_stablehlo(), R"(module @main {
  func.func public @main(%arg0: tensor<5x4xf32>, %arg1: tensor<3x4xi32>) -> (tensor<3x4xf32>) {
    %t2_0 = "stablehlo.reshape"(%arg1) : (tensor<3x4xi32>) -> tensor<3x4x1xi32>
    %t2_1 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<3x4xi32>
    %t2_2 = "stablehlo.reshape"(%t2_1) : (tensor<3x4xi32>) -> tensor<3x4x1xi32>
    %t2_3 = "stablehlo.concatenate"(%t2_0, %t2_2) {dimension = 2 : i64} : (tensor<3x4x1xi32>, tensor<3x4x1xi32>) -> tensor<3x4x2xi32>
    %2 = "stablehlo.gather"(%arg0, %t2_3) {dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 2>, slice_sizes = array<i64: 1, 1>, indices_are_sorted = false} : (tensor<5x4xf32>, tensor<3x4x2xi32>) -> tensor<3x4xf32>
    return %2 : tensor<3x4xf32>
  }
}
)");
}

TEST(IrIndexing, ScatterAddPrintsAddRegion) {
  Graph g;
  Value x = g.param(DType::BF16, {6}), i = g.param(DType::I64, {3}), u = g.param(DType::BF16, {3});
  g.set_outputs({g.op(OpCode::ScatterAdd, {x, i, u}, dims_attr({0}))});
  EXPECT_EQ(g.to_stablehlo(), R"(module @main {
  func.func public @main(%arg0: tensor<6xbf16>, %arg1: tensor<3xi64>, %arg2: tensor<3xbf16>) -> (tensor<6xbf16>) {
    %t3_0 = "stablehlo.reshape"(%arg1) : (tensor<3xi64>) -> tensor<3x1xi64>
    %3 = "stablehlo.scatter"(%arg0, %t3_0, %arg2) ({
    ^bb0(%t3_1: tensor<bf16>, %t3_2: tensor<bf16>):
      %t3_3 = "stablehlo.add"(%t3_1, %t3_2) : (tensor<bf16>, tensor<bf16>) -> tensor<bf16>
      "stablehlo.return"(%t3_3) : (tensor<bf16>) -> ()
    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<6xbf16>, tensor<3x1xi64>, tensor<3xbf16>) -> tensor<6xbf16>
    return %3 : tensor<6xbf16>
  }
}
)");
}

TEST(IrIndexing, ArgSortIsVariadicSortWithNanComparator) {
  Graph g;
  Value x = g.param(DType::F32, {2, 3});
  g.set_outputs({g.op(OpCode::ArgSort, {x}, sort_attr(1, false))});
  EXPECT_EQ(g.to_stablehlo(), R"(module @main {
  func.func public @main(%arg0: tensor<2x3xf32>) -> (tensor<2x3xi64>) {
    %t1_0 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<2x3xi64>
    %t1_1:2 = "stablehlo.sort"(%arg0, %t1_0) ({
    ^bb0(%t1_2: tensor<f32>, %t1_3: tensor<f32>, %t1_4: tensor<i64>, %t1_5: tensor<i64>):
      %t1_6 = "stablehlo.compare"(%t1_2, %t1_3) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %t1_7 = "stablehlo.compare"(%t1_2, %t1_2) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %t1_8 = "stablehlo.compare"(%t1_3, %t1_3) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %t1_9 = "stablehlo.and"(%t1_7, %t1_8) : (tensor<i1>, tensor<i1>) -> tensor<i1>
      %t1_10 = "stablehlo.or"(%t1_6, %t1_9) : (tensor<i1>, tensor<i1>) -> tensor<i1>
      "stablehlo.return"(%t1_10) : (tensor<i1>) -> ()
    }) {dimension = 1 : i64, is_stable = true} : (tensor<2x3xf32>, tensor<2x3xi64>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
    return %t1_1#1 : tensor<2x3xi64>
  }
}
)");
}

TEST(IrIndexing, CumsumIsReduceWindow) {
  Graph g;
  Value x = g.param(DType::F16, {2, 5});
  g.set_outputs({g.op(OpCode::Cumsum, {x}, dims_attr({1}))});
  EXPECT_EQ(g.to_stablehlo(), R"(module @main {
  func.func public @main(%arg0: tensor<2x5xf16>) -> (tensor<2x5xf16>) {
    %t1_0 = "stablehlo.convert"(%arg0) : (tensor<2x5xf16>) -> tensor<2x5xf32>
    %t1_1 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %t1_2 = "stablehlo.reduce_window"(%t1_0, %t1_1) ({
    ^bb0(%t1_3: tensor<f32>, %t1_4: tensor<f32>):
      %t1_5 = "stablehlo.add"(%t1_3, %t1_4) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t1_5) : (tensor<f32>) -> ()
    }) {window_dimensions = array<i64: 1, 5>, padding = dense<[[0, 0], [4, 0]]> : tensor<2x2xi64>} : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xf32>
    %1 = "stablehlo.convert"(%t1_2) : (tensor<2x5xf32>) -> tensor<2x5xf16>
    return %1 : tensor<2x5xf16>
  }
}
)");
}

// One graph with every axis op, every variant; tools/ can feed it to mlir-opt.
Graph all_axis_ops() {
  Graph g;
  Value x = g.param(DType::F32, {4, 3}), i = g.param(DType::I64, {2, 3});
  Value u = g.param(DType::F32, {2, 3}), b = g.param(DType::Bool, {4, 3});
  Value k = g.param(DType::I32, {4});
  std::vector<Value> outs = {
      g.op(OpCode::Gather, {x, i}, dims_attr({0})),
      g.op(OpCode::Gather, {k, g.param(DType::I32, {7})}, dims_attr({0})),
      g.op(OpCode::Scatter, {x, i, u}, dims_attr({0})),
      g.op(OpCode::ScatterAdd, {b, i, g.param(DType::Bool, {2, 3})}, dims_attr({0})),
      g.op(OpCode::Sort, {x}, sort_attr(0, true)),
      g.op(OpCode::Sort, {k}, sort_attr(0, false)),
      g.op(OpCode::ArgSort, {b}, sort_attr(1, true)),
      g.op(OpCode::Cumsum, {x}, dims_attr({0})),
      g.op(OpCode::Cumprod, {k}, dims_attr({0})),
      g.op(OpCode::Cumsum, {g.param(DType::BF16, {0, 3})}, dims_attr({0})),
  };
  g.set_outputs(outs);
  return g;
}

TEST(IrIndexing, EveryVariantPrints) {
  std::string s = all_axis_ops().to_stablehlo();
  for (const char* op : {"gather", "scatter", "sort", "reduce_window"})
    EXPECT_NE(s.find(std::string("\"stablehlo.") + op + "\"("), std::string::npos) << op;
  EXPECT_NE(s.find("compare_type = #stablehlo<comparison_type UNSIGNED>"), std::string::npos);
  EXPECT_NE(s.find("window_dimensions = array<i64: 1, 1>, padding = dense<[[0, 0], [0, 0]]>"),
            std::string::npos) << s;  // empty axis: a window of 1
  if (const char* dump = std::getenv("TPU_DUMP_AXIS_OPS_MLIR")) {  // for mlir-opt checks
    FILE* f = std::fopen(dump, "w");
    ASSERT_NE(f, nullptr);
    std::fputs(s.c_str(), f);
    std::fclose(f);
  }
}

}  // namespace
}  // namespace torch_tpu::ir
