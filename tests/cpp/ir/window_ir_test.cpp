// convolution / reduce_window in the IR: shape inference, rejected inputs, hashing of the
// window attrs, and the StableHLO text.
#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using ir_test::expect_error;

Attrs conv_attrs(std::vector<int64_t> stride, std::vector<int64_t> lo, std::vector<int64_t> hi,
                 std::vector<int64_t> ld, std::vector<int64_t> rd, int64_t groups = 1) {
  Attrs a;
  a.window_strides = stride, a.pad_lo = lo, a.pad_hi = hi, a.lhs_dilation = ld, a.rhs_dilation = rd;
  a.groups = groups;
  return a;
}

TEST(IrWindow, ConvShapes) {
  Graph g;
  Value x = g.param(DType::F32, {2, 4, 9, 7}), w = g.param(DType::F32, {6, 2, 3, 2});
  // (9 + 1 + 1 - 3) / 2 + 1 = 5; (7 + 0 + 0 - ((2 - 1) * 2 + 1)) / 1 + 1 = 5.
  Value y = g.conv(x, w, conv_attrs({2, 1}, {1, 0}, {1, 0}, {1, 1}, {1, 2}, 2));
  EXPECT_EQ(g.shape(y), (Shape{2, 6, 5, 5}));
  EXPECT_EQ(g.dtype(y), DType::F32);
  // lhs dilation 2 and negative padding: (9 - 1) * 2 + 1 - 1 - 2 = 14 - 3 + 1 = 12.
  Value z = g.conv(x, w, conv_attrs({1, 1}, {-1, 0}, {-2, 0}, {2, 1}, {1, 1}, 2));
  EXPECT_EQ(g.shape(z), (Shape{2, 6, 12, 6}));
  Value x1 = g.param(DType::BF16, {1, 3, 5}), w1 = g.param(DType::BF16, {2, 3, 7});
  EXPECT_EQ(g.shape(g.conv(x1, w1, conv_attrs({1}, {0}, {0}, {1}, {1}))), (Shape{1, 2, 0}));
  Value x3 = g.param(DType::F64, {1, 1, 4, 4, 4}), w3 = g.param(DType::F64, {1, 1, 2, 2, 2});
  EXPECT_EQ(g.shape(g.conv(x3, w3, conv_attrs({2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}))),
            (Shape{1, 1, 2, 2, 2}));
}

TEST(IrWindow, ConvErrors) {
  Graph g;
  Value x = g.param(DType::F32, {2, 4, 9}), w = g.param(DType::F32, {6, 3, 3});
  Value i = g.param(DType::Bool, {2, 4, 9}), wb = g.param(DType::BF16, {6, 4, 3});
  Attrs a = conv_attrs({1}, {0}, {0}, {1}, {1});
  expect_error([&] { g.conv(x, w, a); }, "[convolution] input features mismatch");
  expect_error([&] { g.conv(x, wb, a); }, "[convolution] operand dtypes differ");
  expect_error([&] { g.conv(i, i, a); }, "[convolution] unsupported dtype; got i1");
  expect_error([&] { g.conv(x, g.param(DType::F32, {6, 4}), a); }, "rhs rank mismatch");
  expect_error([&] { g.conv(g.param(DType::F32, {2, 4}), g.param(DType::F32, {6, 4}), a); },
               "lhs must be [N, C, spatial...]");
  expect_error([&] { g.conv(x, g.param(DType::F32, {6, 4, 3}), conv_attrs({0}, {0}, {0}, {1}, {1})); },
               "window_strides out of range; got 0");
  expect_error([&] { g.conv(x, g.param(DType::F32, {6, 4, 3}), conv_attrs({1, 1}, {0}, {0}, {1}, {1})); },
               "window_strides needs one entry per windowed dim; got 2, expected 1");
  expect_error([&] { g.conv(x, g.param(DType::F32, {6, 4, 3}), conv_attrs({1}, {-5}, {-5}, {1}, {1})); },
               "padded size of dim 0 is negative");
  expect_error([&] { g.conv(x, g.param(DType::F32, {5, 2, 3}), conv_attrs({1}, {0}, {0}, {1}, {1}, 2)); },
               "output features not divisible");
}

Attrs rw_attrs(std::vector<int64_t> win, std::vector<int64_t> stride, std::vector<int64_t> lo,
               std::vector<int64_t> hi, Reducer r) {
  Attrs a;
  a.window = win, a.window_strides = stride, a.pad_lo = lo, a.pad_hi = hi;
  a.lhs_dilation = a.rhs_dilation = std::vector<int64_t>(win.size(), 1);
  a.reducer = r;
  return a;
}

TEST(IrWindow, ReduceWindowShapesAndErrors) {
  Graph g;
  Value x = g.param(DType::F32, {2, 3, 8, 7});
  Value y = g.reduce_window(x, rw_attrs({1, 1, 3, 2}, {1, 1, 2, 2}, {0, 0, 1, 0}, {0, 0, 1, 1}, Reducer::Max));
  EXPECT_EQ(g.shape(y), (Shape{2, 3, 4, 4}));
  Attrs d = rw_attrs({1, 1, 2, 2}, {1, 1, 1, 1}, {0, 0, 1, 1}, {0, 0, 1, 1}, Reducer::Sum);
  d.lhs_dilation = {1, 1, 2, 2};  // base dilation: (8-1)*2+1 + 2 - 2 + 1 = 16
  EXPECT_EQ(g.shape(g.reduce_window(x, d)), (Shape{2, 3, 16, 14}));
  expect_error([&] { g.reduce_window(x, rw_attrs({1, 3}, {1, 1}, {0, 0}, {0, 0}, Reducer::Sum)); },
               "[reduce_window] window needs one entry per dim; got 2, expected 4");
  expect_error([&] { g.reduce_window(x, rw_attrs({1, 1, 0, 1}, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}, Reducer::Sum)); },
               "window dimension out of range; got 0");
  expect_error([&] { g.reduce_window(x, rw_attrs({1, 1, 1, 1}, {1, 1, 1, 1}, {0, 0, -1, 0}, {0, 0, 0, 0}, Reducer::Sum)); },
               "pad_lo out of range; got -1, expected >= 0");
  expect_error([&] { g.reduce_window(x, rw_attrs({1, 1, 1, 1}, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}, Reducer::Prod)); },
               "unsupported reducer");
}

TEST(IrWindow, AttrsHashAndCse) {
  Graph g;
  Value x = g.param(DType::F32, {1, 2, 6}), w = g.param(DType::F32, {2, 2, 3});
  Value a = g.conv(x, w, conv_attrs({1}, {0}, {0}, {1}, {1}));
  Value b = g.conv(x, w, conv_attrs({1}, {0}, {0}, {1}, {1}));
  Value c = g.conv(x, w, conv_attrs({1}, {0}, {0}, {1}, {2}));
  Value d = g.conv(x, w, conv_attrs({1}, {0}, {0}, {2}, {1}));
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == c);
  EXPECT_FALSE(a == d);
  EXPECT_NE(node_hash(g.node(a)), node_hash(g.node(c)));
  Attrs p = conv_attrs({1}, {0}, {0}, {1}, {1});
  p.precision = Precision::Highest;
  EXPECT_FALSE(a == g.conv(x, w, p));
  Value x2 = g.param(DType::F32, {1, 4, 6});
  Value gr1 = g.conv(x2, w, conv_attrs({1}, {0}, {0}, {1}, {1}, 2));
  Value gr2 = g.conv(x2, g.param(DType::F32, {2, 2, 3}), conv_attrs({1}, {0}, {0}, {1}, {1}, 2));
  EXPECT_NE(node_hash(g.node(gr1)), node_hash(g.node(gr2)));
}

TEST(IrWindow, Printer) {
  Graph g;
  Value x = g.param(DType::BF16, {1, 4, 8, 8}), w = g.param(DType::BF16, {6, 2, 3, 3});
  Attrs a = conv_attrs({2, 1}, {1, -1}, {0, 2}, {1, 2}, {3, 1}, 2);
  a.precision = Precision::Highest;
  Value y = g.conv(x, w, a);
  g.set_outputs({y, g.reduce_window(g.param(DType::F32, {2, 5}),
                                    rw_attrs({1, 3}, {1, 2}, {0, 1}, {0, 1}, Reducer::Sum))});
  std::string s = g.to_stablehlo();
  EXPECT_NE(s.find("\"stablehlo.convolution\"(%arg0, %arg1) {batch_group_count = 1 : i64, "
                   "dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, "
                   "feature_group_count = 2 : i64, lhs_dilation = array<i64: 1, 2>, padding = "
                   "dense<[[1, 0], [-1, 2]]> : tensor<2x2xi64>, precision_config = "
                   "[#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>], rhs_dilation = "
                   "array<i64: 3, 1>, window_strides = array<i64: 2, 1>} : (tensor<1x4x8x8xbf16>, "
                   "tensor<6x2x3x3xbf16>) -> tensor<1x6x2x14xf32>"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("\"stablehlo.convert\"(%t2_0) : (tensor<1x6x2x14xf32>) -> tensor<1x6x2x14xbf16>"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("\"stablehlo.reduce_window\"(%arg2, %t4_0)"), std::string::npos) << s;
  EXPECT_NE(s.find("{base_dilations = array<i64: 1, 1>, padding = dense<[[0, 0], [1, 1]]> : "
                   "tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = "
                   "array<i64: 1, 3>, window_strides = array<i64: 1, 2>} : (tensor<2x5xf32>, "
                   "tensor<f32>) -> tensor<2x3xf32>"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace torch_tpu::ir
