// triangular_solve and custom_call in the IR: result types of every target, rejected
// inputs, and the printed StableHLO (multi-result custom_call, the node's selected result).
#include <gtest/gtest.h>

#include "ir/custom_call.h"
#include "ir/graph.h"
#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using ir_test::dims_attr;
using ir_test::expect_error;
using T = CustomCallTarget;

Value call(Graph& g, T t, std::vector<Value> ops, int64_t i, std::vector<int64_t> p = {}) {
  return g.op(OpCode::CustomCall, std::move(ops), custom_call_attrs(t, i, std::move(p)));
}

TEST(IrLinalg, TriangularSolveTypes) {
  Graph g;
  Value a = g.param(DType::F64, {2, 3, 3}), b = g.param(DType::F64, {2, 3, 5}), c = g.param(DType::F64, {2, 5, 3});
  Value x = g.op(OpCode::TriangularSolve, {a, b}, dims_attr({1, 1, 0, 0}));
  EXPECT_EQ(g.shape(x), (Shape{2, 3, 5}));
  EXPECT_EQ(g.dtype(x), DType::F64);
  EXPECT_EQ(g.shape(g.op(OpCode::TriangularSolve, {a, c}, dims_attr({0, 0, 1, 2}))), (Shape{2, 5, 3}));
  expect_error([&] { g.op(OpCode::TriangularSolve, {a, c}, dims_attr({1, 1, 0, 0})); }, "needs 5x5 (left side)");
  expect_error([&] { g.op(OpCode::TriangularSolve, {a, b}, dims_attr({1, 1, 0})); }, "attrs.dims must be");
  expect_error([&] { g.op(OpCode::TriangularSolve, {a, b}, dims_attr({1, 1, 0, 3})); }, "transpose_a out of range");
  Value i = g.param(DType::I32, {3, 3}), f = g.param(DType::F32, {2, 3, 5});
  expect_error([&] { g.op(OpCode::TriangularSolve, {i, i}, dims_attr({1, 1, 0, 0})); }, "expected f32 or f64");
  expect_error([&] { g.op(OpCode::TriangularSolve, {a, f}, dims_attr({1, 1, 0, 0})); }, "operand dtypes differ");
  expect_error([&] { g.op(OpCode::TriangularSolve, {g.param(DType::F64, {2, 3, 4}), b}, dims_attr({1, 1, 0, 0})); },
               "a must be square");
}

TEST(IrLinalg, CustomCallResultTypes) {
  Graph g;
  Value a = g.param(DType::F32, {4, 5, 3});  // batch 4, m 5, n 3
  Value sq = g.param(DType::F32, {4, 3, 3});
  EXPECT_EQ(g.shape(call(g, T::Getrf, {a}, 0)), (Shape{4, 5, 3}));
  EXPECT_EQ(g.shape(call(g, T::Getrf, {a}, 1)), (Shape{4, 3}));
  EXPECT_EQ(g.dtype(call(g, T::Getrf, {a}, 1)), DType::I32);
  EXPECT_EQ(g.shape(call(g, T::Getrf, {a}, 2)), (Shape{4}));
  EXPECT_EQ(g.shape(call(g, T::Geqrf, {a}, 1)), (Shape{4, 3}));
  Value tau = call(g, T::Geqrf, {a}, 1);
  EXPECT_EQ(g.shape(call(g, T::Orgqr, {a, tau}, 0)), (Shape{4, 5, 3}));
  Value c = g.param(DType::F32, {4, 5, 2});
  EXPECT_EQ(g.shape(call(g, T::Ormqr, {a, tau, c}, 0, {1, 0})), (Shape{4, 5, 2}));
  EXPECT_EQ(g.shape(call(g, T::Potrf, {sq}, 1, {1})), (Shape{4}));
  EXPECT_EQ(g.shape(call(g, T::Syevd, {sq}, 0, {1, 1})), (Shape{4, 3}));
  EXPECT_EQ(g.shape(call(g, T::Syevd, {sq}, 1, {1, 0})), (Shape{4, 3, 0}));
  EXPECT_EQ(g.shape(call(g, T::Gesdd, {a}, 0, {1, 1})), (Shape{4, 3}));
  EXPECT_EQ(g.shape(call(g, T::Gesdd, {a}, 1, {1, 1})), (Shape{4, 5, 5}));
  EXPECT_EQ(g.shape(call(g, T::Gesdd, {a}, 1, {0, 1})), (Shape{4, 5, 3}));
  EXPECT_EQ(g.shape(call(g, T::Gesdd, {a}, 2, {1, 1})), (Shape{4, 3, 3}));
  EXPECT_EQ(g.shape(call(g, T::Gesdd, {a}, 3, {1, 1})), (Shape{4}));
  Value piv = call(g, T::Sytrf, {sq}, 1, {1});
  EXPECT_EQ(g.shape(piv), (Shape{4, 3}));
  EXPECT_EQ(g.shape(call(g, T::Sytrs, {sq, piv, g.param(DType::F32, {4, 3, 7})}, 0, {1})), (Shape{4, 3, 7}));
  EXPECT_EQ(g.shape(call(g, T::LuPivotsToPermutation, {piv}, 0, {6})), (Shape{4, 6}));
}

TEST(IrLinalg, CustomCallRejects) {
  Graph g;
  Value a = g.param(DType::F32, {5, 3}), i = g.param(DType::I64, {3, 3});
  expect_error([&] { call(g, T::Getrf, {a}, 3); }, "result index out of range");
  expect_error([&] { call(g, T::Potrf, {a}, 0, {1}); }, "matrix must be square");
  expect_error([&] { call(g, T::Potrf, {a}, 0); }, "needs attrs.dims = {result index, params}");
  expect_error([&] { call(g, T::Getrf, {i}, 0); }, "expected f32 or f64");
  expect_error([&] { call(g, T::Getrf, {a, a}, 0); }, "wrong operand count");
  expect_error([&] { call(g, T::Orgqr, {a, g.param(DType::F32, {4})}, 0); }, "reflectors");
  expect_error([&] { call(g, T::Orgqr, {a, g.param(DType::F32, {2, 3})}, 0); }, "batch dims mismatch");
  expect_error([&] { call(g, T::LuPivotsToPermutation, {g.param(DType::I32, {4})}, 0, {3}); }, "less than the 4 pivots");
  Attrs bad;
  bad.ivalue = 99;
  bad.dims = {0};
  expect_error([&] { g.op(OpCode::CustomCall, {a}, bad); }, "unknown target id 99");
}

TEST(IrLinalg, PrintsStableHlo) {
  Graph g;
  Value a = g.param(DType::F64, {3, 3}), b = g.param(DType::F64, {3, 2});
  Value lu = call(g, T::Getrf, {a}, 0), info = call(g, T::Getrf, {a}, 2);
  Value x = g.op(OpCode::TriangularSolve, {lu, b}, dims_attr({1, 1, 1, 0}));
  g.set_outputs({x, info});
  std::string s = g.to_stablehlo();
  EXPECT_NE(s.find("%t2_0:3 = \"stablehlo.custom_call\"(%arg0) {call_target_name = \"lapack_dgetrf_ffi\", "
                   "api_version = 4 : i32, backend_config = {}} : (tensor<3x3xf64>) -> (tensor<3x3xf64>, "
                   "tensor<3xi32>, tensor<i32>)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("\"stablehlo.triangular_solve\"(%t2_0#0, %arg1) {left_side = true, lower = true, "
                   "unit_diagonal = true, transpose_a = #stablehlo<transpose NO_TRANSPOSE>}"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("return %4, %t3_0#2"), std::string::npos) << s;
  Graph h;
  Value m = h.param(DType::F32, {2, 4, 4});
  h.set_outputs({call(h, T::Syevd, {m}, 0, {1, 0})});
  EXPECT_NE(h.to_stablehlo().find("backend_config = {lower = 1 : i64, compute_v = 0 : i64}"), std::string::npos);
}

// XLA's expander targets (pjrt only): geqrf/orgqr result types, Eigh's (v, w); printed with
// api_version 1 and XLA's string config.
TEST(IrLinalg, XlaTargets) {
  Graph g;
  Value a = g.param(DType::F32, {2, 5, 3}), sq = g.param(DType::F64, {4, 4});
  Value qr = call(g, T::XlaQr, {a}, 0), tau = call(g, T::XlaQr, {a}, 1);
  EXPECT_EQ(g.shape(tau), (Shape{2, 3}));
  Value q = call(g, T::XlaHouseholderProduct, {qr, tau}, 0);
  EXPECT_EQ(g.shape(q), (Shape{2, 5, 3}));
  Value v = call(g, T::XlaEigh, {sq}, 0, {0}), w = call(g, T::XlaEigh, {sq}, 1, {0});
  EXPECT_EQ(g.shape(v), (Shape{4, 4}));
  EXPECT_EQ(g.shape(w), (Shape{4}));
  expect_error([&] { call(g, T::XlaEigh, {a}, 0, {1}); }, "must be square");
  EXPECT_TRUE(is_xla_target(T::XlaEigh));
  EXPECT_FALSE(is_xla_target(T::LuPivotsToPermutation));
  g.set_outputs({q, v, w});
  std::string s = g.to_stablehlo();
  EXPECT_NE(s.find("{call_target_name = \"Qr\", api_version = 1 : i32} : (tensor<2x5x3xf32>) -> "
                   "(tensor<2x5x3xf32>, tensor<2x3xf32>)"), std::string::npos) << s;
  EXPECT_NE(s.find("call_target_name = \"ProductOfElementaryHouseholderReflectors\", api_version = 1 : i32}"),
            std::string::npos) << s;
  EXPECT_NE(s.find("{call_target_name = \"Eigh\", api_version = 1 : i32, backend_config = \"0,1,100,1e-14\"}"),
            std::string::npos) << s;
}

}  // namespace
}  // namespace torch_tpu::ir
