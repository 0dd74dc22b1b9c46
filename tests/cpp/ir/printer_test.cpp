// Graph::to_stablehlo: golden text for small graphs, literal formatting, and a sweep that
// prints every op in the table.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/custom_call.h"
#include "ir/graph.h"
#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using ir_test::dims_attr;
using ir_test::dot_attr;
using ir_test::expect_error;

TEST(IrPrinter, MulAddRelu) {
  Graph g;
  Value a = g.param(DType::F32, {2, 3}), b = g.param(DType::F32, {2, 3}),
        c = g.param(DType::F32, {2, 3});
  Value x = g.binary(OpCode::Add, g.binary(OpCode::Mul, a, b), c);
  Value zero = g.constant(0.0, DType::F32, {2, 3});
  g.set_outputs({g.select(g.compare(Cmp::GT, x, zero), x, zero)});
  EXPECT_EQ(g.to_stablehlo(), R"(module @main {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<2x3xf32>) -> (tensor<2x3xf32>) {
    %3 = "stablehlo.multiply"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %4 = "stablehlo.add"(%3, %arg2) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %5 = "stablehlo.constant"() {value = dense<0.0> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
    %6 = "stablehlo.compare"(%4, %5) {comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
    %7 = "stablehlo.select"(%6, %4, %5) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return %7 : tensor<2x3xf32>
  }
}
)");
}

TEST(IrPrinter, ReduceMax) {
  Graph g;
  Value a = g.param(DType::F32, {2, 3});
  g.set_outputs({g.reduce(a, Reducer::Max, {1}), a});
  EXPECT_EQ(g.to_stablehlo(), R"(module @main {
  func.func public @main(%arg0: tensor<2x3xf32>) -> (tensor<2xf32>, tensor<2x3xf32>) {
    %t1_0 = "stablehlo.constant"() {value = dense<0xFF800000> : tensor<f32>} : () -> tensor<f32>
    %1 = "stablehlo.reduce"(%arg0, %t1_0) ({
    ^bb0(%t1_1: tensor<f32>, %t1_2: tensor<f32>):
      %t1_4 = "stablehlo.maximum"(%t1_1, %t1_2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %t1_5 = "stablehlo.compare"(%t1_1, %t1_1) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %t1_6 = "stablehlo.select"(%t1_5, %t1_1, %t1_4) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
      %t1_7 = "stablehlo.compare"(%t1_2, %t1_2) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %t1_3 = "stablehlo.select"(%t1_7, %t1_2, %t1_6) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t1_3) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    return %1, %arg0 : tensor<2xf32>, tensor<2x3xf32>
  }
}
)");
}

TEST(IrPrinter, Dot) {
  Graph g;
  Value a = g.param(DType::F32, {4, 2, 3}), b = g.param(DType::F32, {4, 3, 5});
  g.set_outputs({g.dot(a, b, dot_attr({0}, {0}, {2}, {1}, Precision::High))});
  EXPECT_EQ(g.to_stablehlo(), R"(module @main {
  func.func public @main(%arg0: tensor<4x2x3xf32>, %arg1: tensor<4x3x5xf32>) -> (tensor<4x2x5xf32>) {
    %2 = "stablehlo.dot_general"(%arg0, %arg1) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision HIGH>, #stablehlo<precision HIGH>]} : (tensor<4x2x3xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
    return %2 : tensor<4x2x5xf32>
  }
}
)");
}

// The text of the single constant in a graph.
std::string constant_text(double v, DType t) {
  Graph g;
  g.set_outputs({g.constant(v, t)});
  std::string s = g.to_stablehlo();
  size_t b = s.find("dense<") + 6;
  return s.substr(b, s.find('>', b) - b);
}

TEST(IrPrinter, Literals) {
  EXPECT_EQ(constant_text(1.0, DType::F32), "1.0");
  EXPECT_EQ(constant_text(-0.0, DType::F32), "-0.0");
  EXPECT_EQ(constant_text(0.1, DType::F32), "0.100000001");  // f32 nearest, round-trips
  EXPECT_EQ(constant_text(0.1, DType::F64), "0.10000000000000001");
  EXPECT_EQ(constant_text(1e20, DType::F64), "1.0e+20");
  EXPECT_EQ(constant_text(NAN, DType::F32), "0x7FC00000");
  EXPECT_EQ(constant_text(INFINITY, DType::F32), "0x7F800000");
  EXPECT_EQ(constant_text(-INFINITY, DType::F64), "0xFFF0000000000000");
  EXPECT_EQ(constant_text(NAN, DType::BF16), "0x7FC0");
  EXPECT_EQ(constant_text(1e6, DType::F16), "0x7C00");  // overflows f16
  EXPECT_EQ(constant_text(1e300, DType::F32), "0x7F800000");
  EXPECT_EQ(constant_text(-7, DType::I8), "-7");
  EXPECT_EQ(constant_text(255, DType::U8), "255");
  EXPECT_EQ(constant_text(1, DType::Bool), "true");
  EXPECT_EQ(constant_text(0, DType::Bool), "false");
}

TEST(IrPrinter, ArgMaxIsVariadicReduce) {
  Graph g;
  Value a = g.param(DType::I32, {2, 3});
  g.set_outputs({g.op(OpCode::ArgMax, {a}, dims_attr({1}))});
  std::string s = g.to_stablehlo();
  EXPECT_NE(s.find(R"(%t1_0 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<2x3xi64>)"),
            std::string::npos) << s;
  EXPECT_NE(s.find("dense<-2147483648> : tensor<i32>"), std::string::npos) << s;  // init value
  EXPECT_NE(s.find(R"(%t1_3:2 = "stablehlo.reduce"(%arg0, %t1_0, %t1_1, %t1_2) ({)"),
            std::string::npos) << s;
  EXPECT_NE(s.find("-> (tensor<2xi32>, tensor<2xi64>)"), std::string::npos) << s;
  EXPECT_NE(s.find("return %t1_3#1 : tensor<2xi64>"), std::string::npos) << s;
}

TEST(IrPrinter, RngUsesPhilox) {
  Graph g;
  Value st = g.param(DType::U64, {2});
  g.set_outputs({g.op(OpCode::RngUniform, {st}, {}, {3}, DType::F32)});
  std::string s = g.to_stablehlo();
  EXPECT_NE(s.find(R"(%t1_0:2 = "stablehlo.rng_bit_generator"(%arg0) {rng_algorithm = #stablehlo<rng_algorithm PHILOX>} : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3xui32>))"),
            std::string::npos) << s;
  EXPECT_NE(s.find(R"(%1 = "stablehlo.subtract")"), std::string::npos) << s;
}

// Every op in the table prints, and each row emits the op's own name.
TEST(IrPrinter, EveryOpPrints) {
  Graph g;
  Value f = g.param(DType::F32, {2, 3}), i = g.param(DType::I32, {2, 3});
  Value b = g.param(DType::Bool, {2, 3}), st = g.param(DType::U64, {2});
  std::vector<Value> outs;
  for (int k = 0; k < static_cast<int>(OpCode::kNumOps); ++k) {
    OpCode op = static_cast<OpCode>(k);
    const OpInfo& info = op_info(op);
    Value x = (info.dtypes & F) ? f : (info.dtypes & I) ? i : b;
    if (info.kind == OpKind::kUnary) outs.push_back(g.unary(op, x));
    if (info.kind == OpKind::kBinary) outs.push_back(g.binary(op, x, x));
  }
  outs.push_back(g.op(OpCode::Clamp, {g.constant(0, DType::F32), f, g.constant(1, DType::F32)}));
  outs.push_back(g.select(b, f, f));
  outs.push_back(g.convert(f, DType::BF16));
  outs.push_back(g.iota(DType::I64, {4}, 0));
  outs.push_back(g.broadcast_to(g.param(DType::F32, {3}), {2, 3}));
  outs.push_back(g.transpose(f, {1, 0}));
  outs.push_back(g.slice(f, {0, 0}, {1, 3}, {1, 2}));
  outs.push_back(g.concat({f, f}, 1));
  outs.push_back(g.op(OpCode::Reverse, {f}, dims_attr({1})));
  outs.push_back(g.reshape(f, {6}));
  for (Reducer r : {Reducer::Sum, Reducer::Prod, Reducer::Max, Reducer::Min})
    outs.push_back(g.reduce(f, r, {0}));
  outs.push_back(g.reduce(b, Reducer::And, {0, 1}));
  outs.push_back(g.reduce(i, Reducer::Or, {1}));
  outs.push_back(g.op(OpCode::ArgMin, {f}, dims_attr({0})));
  outs.push_back(g.dot(g.convert(f, DType::BF16), g.convert(g.transpose(f, {1, 0}), DType::BF16),
                       dot_attr({}, {}, {1}, {0})));
  Value ix = g.param(DType::I64, {2, 3});
  outs.push_back(g.op(OpCode::Gather, {f, ix}, dims_attr({1})));
  outs.push_back(g.op(OpCode::Scatter, {f, ix, f}, dims_attr({0})));
  outs.push_back(g.op(OpCode::ScatterAdd, {i, ix, i}, dims_attr({1})));
  ir::Attrs smax = dims_attr({0});
  smax.reducer = Reducer::Max;
  outs.push_back(g.op(OpCode::ScatterReduce, {f, ix, f}, smax));
  outs.push_back(g.op(OpCode::Sort, {f}, dims_attr({1})));
  outs.push_back(g.op(OpCode::ArgSort, {i}, dims_attr({0})));
  outs.push_back(g.op(OpCode::Cumsum, {f}, dims_attr({1})));
  outs.push_back(g.op(OpCode::Cumprod, {i}, dims_attr({0})));
  Value sq = g.param(DType::F32, {3, 3});
  outs.push_back(g.op(OpCode::TriangularSolve, {sq, g.transpose(f, {1, 0})}, dims_attr({1, 1, 0, 0})));
  outs.push_back(g.op(OpCode::CustomCall, {sq}, custom_call_attrs(CustomCallTarget::Getrf, 0)));
  {
    Attrs w;
    w.window_strides = w.lhs_dilation = w.rhs_dilation = {1};
    w.pad_lo = w.pad_hi = {0};
    Value x3 = g.reshape(f, {1, 2, 3});
    outs.push_back(g.conv(x3, g.reshape(f, {3, 2, 1}), w));
    w.window = {1, 2, 2};
    w.window_strides = w.lhs_dilation = w.rhs_dilation = {1, 1, 1};
    w.pad_lo = w.pad_hi = {0, 0, 0};
    w.reducer = Reducer::Max;
    outs.push_back(g.reduce_window(x3, w));
  }
  outs.push_back(g.op(OpCode::OptimizationBarrier, {f}));
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    outs.push_back(g.op(OpCode::RngUniform, {st}, {}, {2}, t));
    outs.push_back(g.op(OpCode::RngNormal, {st}, {}, {}, t));
  }
  g.set_outputs(outs);
  std::string s = g.to_stablehlo();
  for (int k = 0; k < static_cast<int>(OpCode::kNumOps); ++k) {
    if (static_cast<OpCode>(k) == OpCode::Atan) continue;  // printed as atan2 (printer.cpp)
    std::string hlo = op_info(static_cast<OpCode>(k)).hlo;
    if (hlo.rfind("reduce_arg", 0) == 0) hlo = "reduce";
    if (hlo.find('.') == std::string::npos) hlo = "stablehlo." + hlo;
    EXPECT_NE(s.find("\"" + hlo + "\"("), std::string::npos) << hlo;
  }
  EXPECT_NE(s.find("\"chlo.erf\"(%arg0)"), std::string::npos);
  EXPECT_NE(s.find("compare_type = #stablehlo<comparison_type SIGNED>"), std::string::npos);
}

TEST(IrPrinter, RejectsMalformedGraph) {
  Graph g;
  g.param(DType::F32, {2});
  expect_error([&] { g.to_stablehlo(); }, "[verify] graph has no outputs");
}

}  // namespace
}  // namespace torch_tpu::ir
