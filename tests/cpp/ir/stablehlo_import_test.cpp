// The StableHLO importer: JAX's pretty and generic text, Pallas interpret-mode loops, the
// round trip through our own printer, constants, and its errors. Results run on the host
// runtime and compare with values computed here.
#include <gtest/gtest.h>

#include <cmath>

#include "../runtime/runtime_test_util.h"
#include "ir/stablehlo_import.h"
#include "stablehlo_samples.h"
#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using host::testing::make;
using host::testing::run;
using ir_test::expect_error;

int count_ops(const Graph& g, OpCode op) {
  int n = 0;
  for (const Node& x : g.nodes()) n += !x.is_param && x.op == op;
  return n;
}

TEST(StablehloImport, ForiLoopUnrolls) {
  ImportedGraph im = import_stablehlo(samples::kForiLoop);
  EXPECT_EQ(im.num_args, 1);
  EXPECT_TRUE(im.constants.empty());
  auto x = make(DType::F32, {4, 3}, [](int64_t i) { return 0.5 * i - 1; });
  auto y = run(im.graph, {x})[0];
  ASSERT_EQ(y.shape, (Shape{3}));
  for (int j = 0; j < 3; ++j) {
    double want = 0;
    for (int i = 0; i < 4; ++i) want += x.get(i * 3 + j) * 2;
    EXPECT_NEAR(y.get(j), want, 1e-5);
  }
  EXPECT_EQ(count_ops(im.graph, OpCode::Gather), 0);  // indices folded to static slices
}

// JAX's variadic optimization_barrier: one single-operand barrier node per operand, kept in
// the graph (XLA must not fuse across it), printed back, and the identity on the host.
TEST(StablehloImport, OptimizationBarrierKeepsANodePerOperand) {
  const char* text = R"mlir(module @jit_f {
  func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> (tensor<3xf32>) {
    %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<3xf32>, tensor<3xf32>
    %1 = stablehlo.multiply %0#0, %0#1 : tensor<3xf32>
    return %1 : tensor<3xf32>
  }
})mlir";
  ImportedGraph im = import_stablehlo(text);
  EXPECT_EQ(count_ops(im.graph, OpCode::OptimizationBarrier), 2);
  EXPECT_NE(im.graph.to_stablehlo().find("\"stablehlo.optimization_barrier\"(%arg0)"), std::string::npos);
  auto a = make(DType::F32, {3}, [](int64_t i) { return 1.5 * i - 1; });
  auto b = make(DType::F32, {3}, [](int64_t i) { return 2.0 + i; });
  auto y = run(im.graph, {a, b})[0];
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y.get(i), a.get(i) * b.get(i));
}

TEST(StablehloImport, PallasRmsNorm) {
  ImportedGraph im = import_stablehlo(samples::kPallasRmsNorm);
  auto x = make(DType::F32, {16, 32}, [](int64_t i) { return std::sin(0.37 * i); });
  auto w = make(DType::F32, {32}, [](int64_t i) { return 1 + 0.01 * i; });
  auto y = run(im.graph, {x, w})[0];
  for (int r = 0; r < 16; ++r) {
    double ms = 0;
    for (int c = 0; c < 32; ++c) ms += x.get(r * 32 + c) * x.get(r * 32 + c);
    ms /= 32;
    for (int c = 0; c < 32; ++c)
      EXPECT_NEAR(y.get(r * 32 + c), x.get(r * 32 + c) / std::sqrt(ms + 1e-6) * w.get(c), 1e-5);
  }
  // The unrolled grid writes two row blocks: one concatenate of the two tiles, no splices of
  // the NaN-initialized output left.
  EXPECT_EQ(count_ops(im.graph, OpCode::Concat), 1);
}

TEST(StablehloImport, GenericFormBatchedDot) {
  ImportOptions o;
  o.default_precision = Precision::Highest;
  ImportedGraph im = import_stablehlo(samples::kGenericBatchedDot, o);
  auto a = make(DType::F32, {2, 3, 4}, [](int64_t i) { return 0.1 * i; });
  auto b = make(DType::F32, {2, 4, 5}, [](int64_t i) { return 1 - 0.05 * i; });
  auto y = run(im.graph, {a, b})[0];
  for (int bb = 0; bb < 2; ++bb)
    for (int i = 0; i < 3; ++i) {
      double best = -INFINITY;
      for (int k = 0; k < 5; ++k) {
        double s = 0;
        for (int j = 0; j < 4; ++j) s += a.get(bb * 12 + i * 4 + j) * b.get(bb * 20 + j * 5 + k);
        best = std::max(best, s);
      }
      EXPECT_NEAR(y.get(bb * 3 + i), best, 1e-4);
    }
}

TEST(StablehloImport, PadSliceReverseConstantArgmax) {
  ImportedGraph im = import_stablehlo(samples::kPadFlipArgmax);
  ASSERT_EQ(im.constants.size(), 1u);  // dense<[1, 2, 3, 4, 5]>: an extra parameter
  EXPECT_EQ(im.constants[0].param_index, 2);
  EXPECT_EQ(im.constants[0].shape, (Shape{5}));
  auto x = make(DType::F32, {3, 3}, [](int64_t i) { return i + 1; });
  auto w = make(DType::F32, {5}, [](int64_t i) { return i == 3 ? 9 : i; });
  host::testing::Tensor c(DType::F32, {5});
  std::memcpy(c.data(), im.constants[0].bytes.data(), 20);
  auto out = run(im.graph, {x, w, c});
  // y = pad(x, rows (1, 0), cols (0, 2)) + [1..5]
  auto y = [&](int r, int k) { return (r >= 1 && k < 3 ? x.get((r - 1) * 3 + k) : 0.0) + (k + 1); };
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(out[0].get(r * 4 + 0), y(r, 0));
    EXPECT_EQ(out[0].get(r * 4 + 1), y(r, 2));
    EXPECT_EQ(out[0].get(r * 4 + 2), y(r, 4));
    EXPECT_EQ(out[0].get(r * 4 + 3), y(3 - r, 1));
  }
  EXPECT_EQ(out[1].geti(0), 3);
}

// Our printer's output imports back into the same graph.
TEST(StablehloImport, RoundTripThroughPrinter) {
  Graph g;
  Value x = g.param(DType::F32, {4, 6});
  Value i = g.param(DType::I32, {4, 6});
  Value e = g.unary(OpCode::Exp, g.binary(OpCode::Mul, x, g.constant(0.5, DType::F32, {4, 6})));
  Value t = g.transpose(e, {1, 0});
  Value s = g.slice(t, {1, 0}, {5, 4}, {2, 1});
  Value r = g.reduce(g.unary(OpCode::Tanh, x), Reducer::Max, {1});
  Value c = g.compare(Cmp::LT, g.convert(i, DType::F32), x);
  Value sel = g.select(c, x, g.unary(OpCode::Negate, x));
  Value b = g.broadcast(r, {4, 6}, {0});
  Value cat = g.concat({sel, b}, 0);
  Attrs dn;
  dn.lhs_contract = {1};
  dn.rhs_contract = {1};
  Value d = g.dot(x, x, dn);
  Value io = g.iota(DType::I32, {3}, 0);
  g.set_outputs({s, cat, d, g.reshape(io, {3, 1}), g.binary(OpCode::Add, i, i)});
  ImportedGraph im = import_stablehlo(g.to_stablehlo());
  EXPECT_EQ(im.graph.hash(), g.hash());
  EXPECT_EQ(im.graph.to_stablehlo(), g.to_stablehlo());
  auto x0 = make(DType::F32, {4, 6}, [](int64_t k) { return std::cos(k); });
  auto i0 = make(DType::I32, {4, 6}, [](int64_t k) { return k % 3 - 1; });
  auto want = run(g, {x0, i0}), got = run(im.graph, {x0, i0});
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got[k].bytes, want[k].bytes) << "output " << k;
}

TEST(StablehloImport, DynamicIndicesUseGatherAndSelect) {
  const char* text = R"mlir(
func.func @main(%x: tensor<5x4xf32>, %u: tensor<2x4xf32>, %i: tensor<i32>) -> (tensor<2x4xf32>, tensor<5x4xf32>) {
  %z = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_slice %x, %i, %z, sizes = [2, 4] : (tensor<5x4xf32>, tensor<i32>, tensor<i32>) -> tensor<2x4xf32>
  %1 = stablehlo.dynamic_update_slice %x, %u, %i, %z : (tensor<5x4xf32>, tensor<2x4xf32>, tensor<i32>, tensor<i32>) -> tensor<5x4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<5x4xf32>
})mlir";
  ImportedGraph im = import_stablehlo(text);
  auto x = make(DType::F32, {5, 4}, [](int64_t k) { return k; });
  auto u = make(DType::F32, {2, 4}, [](int64_t k) { return -1 - k; });
  for (int start : {1, 4, -2}) {
    auto i = make(DType::I32, {}, [&](int64_t) { return start; });
    auto out = run(im.graph, {x, u, i});
    int s = std::min(std::max(start, 0), 3);  // clamped as StableHLO says
    for (int k = 0; k < 8; ++k) EXPECT_EQ(out[0].get(k), x.get(s * 4 + k));
    for (int k = 0; k < 20; ++k) {
      int row = k / 4;
      double want = row >= s && row < s + 2 ? u.get((row - s) * 4 + k % 4) : x.get(k);
      EXPECT_EQ(out[1].get(k), want) << "start " << start << " element " << k;
    }
  }
}

TEST(StablehloImport, CaseOnAValueSelectsBetweenBranches) {
  const char* text = R"mlir(
func.func @main(%x: tensor<3xf32>, %i: tensor<i32>) -> tensor<3xf32> {
  %0 = "stablehlo.case"(%i) ({
    %a = stablehlo.negate %x : tensor<3xf32>
    stablehlo.return %a : tensor<3xf32>
  }, {
    %b = stablehlo.exponential %x : tensor<3xf32>
    stablehlo.return %b : tensor<3xf32>
  }) : (tensor<i32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
})mlir";
  ImportedGraph im = import_stablehlo(text);
  auto x = make(DType::F32, {3}, [](int64_t k) { return k; });
  for (int idx : {0, 1, 7}) {
    auto i = make(DType::I32, {}, [&](int64_t) { return idx; });
    auto y = run(im.graph, {x, i})[0];
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(y.get(k), idx == 0 ? -k : std::exp(k), 1e-5);
  }
}

TEST(StablehloImport, ConstantsHexAndSplats) {
  const char* text = R"mlir(
func.func @main() -> (tensor<2xf32>, tensor<2x2xi32>, tensor<3xbf16>, tensor<i1>) {
  %0 = stablehlo.constant dense<0x7FC00000> : tensor<2xf32>
  %1 = stablehlo.constant dense<[[1, -2], [3, 4]]> : tensor<2x2xi32>
  %2 = stablehlo.constant dense<"0x803F0040803F"> : tensor<3xbf16>
  %3 = stablehlo.constant dense<true> : tensor<i1>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2x2xi32>, tensor<3xbf16>, tensor<i1>
})mlir";
  ImportedGraph im = import_stablehlo(text);
  ASSERT_EQ(im.constants.size(), 2u);
  std::vector<host::testing::Tensor> in;
  for (const auto& c : im.constants) {
    host::testing::Tensor t(c.dtype, c.shape);
    std::memcpy(t.data(), c.bytes.data(), c.bytes.size());
    in.push_back(t);
  }
  auto out = run(im.graph, in);
  EXPECT_TRUE(std::isnan(out[0].get(1)));
  EXPECT_EQ(out[1].geti(1), -2);
  EXPECT_EQ(out[1].geti(3), 4);
  EXPECT_EQ(out[2].get(0), 1.0);
  EXPECT_EQ(out[2].get(1), 2.0);
  EXPECT_EQ(out[3].geti(0), 1);
}

TEST(StablehloImport, Errors) {
  expect_error([] {
    import_stablehlo("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                     "  %0 = stablehlo.cosine %x : tensor<4xf32>\n"
                     "  %1 = stablehlo.popcnt %0 : tensor<4xf32>\n"
                     "  return %1 : tensor<4xf32>\n}");
  }, "[stablehlo import] unsupported op 'stablehlo.popcnt' at line 3");
  expect_error([] {
    import_stablehlo("func.func @main(%x: tensor<?xf32>) -> tensor<4xf32> {\n  return %x : tensor<4xf32>\n}");
  }, "dynamic shape");
  expect_error([] {
    import_stablehlo("func.func @main(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {\n"
                     "  %0:2 = stablehlo.while(%a = %x, %k = %n) : tensor<4xf32>, tensor<i32>\n"
                     "  cond {\n    %c = stablehlo.constant dense<0> : tensor<i32>\n"
                     "    %p = stablehlo.compare GT, %k, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
                     "    stablehlo.return %p : tensor<i1>\n  } do {\n"
                     "    %c1 = stablehlo.constant dense<1> : tensor<i32>\n"
                     "    %k2 = stablehlo.subtract %k, %c1 : tensor<i32>\n"
                     "    stablehlo.return %a, %k2 : tensor<4xf32>, tensor<i32>\n  }\n"
                     "  return %0#0 : tensor<4xf32>\n}");
  }, "'stablehlo.while' at line 2: its trip count is not known at import time");
  expect_error([] {
    import_stablehlo("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                     "  %0 = stablehlo.custom_call @tpu_custom_call(%x) : (tensor<4xf32>) -> tensor<4xf32>\n"
                     "  return %0 : tensor<4xf32>\n}");
  }, "unsupported op 'stablehlo.custom_call'");
  expect_error([] {
    import_stablehlo("func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                     "  %0 = stablehlo.add %x, %y : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}");
  }, "use of undefined value %y");
}

}  // namespace
}  // namespace torch_tpu::ir
