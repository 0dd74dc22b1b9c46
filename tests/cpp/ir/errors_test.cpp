// Invalid builder input throws torch_tpu::Error with an "[op] what failed; got X, expected Y"
// message. Each case checks the op tag and the part that names the problem.
#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ir_test_util.h"

namespace torch_tpu::ir {
namespace {

using ir_test::dims_attr;
using ir_test::dot_attr;
using ir_test::expect_error;

struct ErrorsFixture : ::testing::Test {
  Graph g;
  Value f23 = g.param(DType::F32, {2, 3});
  Value f32_ = g.param(DType::F32, {3, 2});
  Value i23 = g.param(DType::I32, {2, 3});
  Value b23 = g.param(DType::Bool, {2, 3});
};
using IrBuilderErrors = ErrorsFixture;

TEST_F(IrBuilderErrors, Arity) {
  expect_error([&] { g.op(OpCode::Add, {f23}); }, "[add] wrong operand count; got 1, expected 2");
  expect_error([&] { g.op(OpCode::Exp, {f23, f23}); }, "[exponential] wrong operand count; got 2");
  expect_error([&] { g.op(OpCode::Select, {b23, f23}); }, "[select] wrong operand count");
  expect_error([&] { g.op(OpCode::Concat, {}, dims_attr({0})); },
               "[concatenate] needs at least one operand");
  expect_error([&] { g.op(OpCode::Add, {f23, Value{99}}); }, "[add] operand id out of range; got 99");
}

TEST_F(IrBuilderErrors, ElementwiseShapeAndDtype) {
  expect_error([&] { g.binary(OpCode::Add, f23, f32_); },
               "[add] operand shape mismatch; got [3, 2], expected [2, 3]");
  expect_error([&] { g.binary(OpCode::Mul, f23, i23); },
               "[multiply] operand dtypes differ; got i32, expected f32");
  expect_error([&] { g.unary(OpCode::Exp, i23); }, "[exponential] unsupported dtype i32");
  expect_error([&] { g.unary(OpCode::Not, f23); }, "[not] unsupported dtype f32");
  expect_error([&] { g.binary(OpCode::Sub, b23, b23); }, "[subtract] unsupported dtype i1");
  expect_error([&] { g.compare(Cmp::LT, f23, i23); }, "[compare] operand dtypes differ");
  expect_error([&] { g.compare(Cmp::LT, f23, f32_); }, "[compare] rhs shape mismatch");
  expect_error([&] { g.select(f23, f23, f23); }, "[select] predicate must be i1; got f32");
  expect_error([&] { g.select(b23, f23, i23); }, "[select] branch dtypes differ; got f32 and i32");
  expect_error([&] { g.select(b23, f23, f32_); }, "[select] shape mismatch");
  expect_error([&] { g.op(OpCode::Clamp, {f32_, f23, f23}); }, "[clamp] bound shape mismatch");
  expect_error([&] { g.op(OpCode::Clamp, {i23, f23, f23}); }, "[clamp] bound dtype mismatch");
}

TEST_F(IrBuilderErrors, BadDims) {
  expect_error([&] { g.transpose(f23, {0, 0}); }, "[transpose] repeated dimension 0");
  expect_error([&] { g.transpose(f23, {0, 2}); },
               "[transpose] dimension out of range; got 2, expected 0 <= d < 2");
  expect_error([&] { g.transpose(f23, {0}); }, "[transpose] permutation size mismatch; got 1");
  expect_error([&] { g.reduce(f23, Reducer::Sum, {2}); }, "[reduce] dimension out of range");
  expect_error([&] { g.reduce(f23, Reducer::Sum, {1, 1}); }, "[reduce] repeated dimension 1");
  expect_error([&] { g.reduce(f23, Reducer::And, {0}); }, "[reduce] and/or reducer needs");
  expect_error([&] { g.op(OpCode::ArgMax, {f23}, dims_attr({0, 1})); },
               "[reduce_argmax] needs exactly one dimension");
  expect_error([&] { g.op(OpCode::Reverse, {f23}, dims_attr({-1})); },
               "[reverse] dimension out of range; got -1");
  expect_error([&] { g.iota(DType::I32, {2, 3}, 2); }, "[iota] dimension out of range");
  expect_error([&] { g.op(OpCode::Iota, {}, {}, {4}, DType::I32); },
               "[iota] needs exactly one dimension; got 0");
  expect_error([&] { g.constant(0, DType::F32, {2, -1}); }, "[constant] negative dimension");
}

TEST_F(IrBuilderErrors, BroadcastReshapeConcat) {
  expect_error([&] { g.broadcast(f23, {2, 4}, {0, 1}); },
               "[broadcast_in_dim] operand dim 1 of size 3 cannot broadcast to 4");
  expect_error([&] { g.broadcast(f23, {2, 3, 4}, {0}); },
               "[broadcast_in_dim] dims size mismatch; got 1, expected 2");
  expect_error([&] { g.broadcast_to(f23, {3}); }, "[broadcast] cannot broadcast [2, 3] to [3]");
  expect_error([&] { g.broadcast_to(f23, {4, 3}); }, "[broadcast] cannot broadcast");
  expect_error([&] { g.reshape(f23, {4, 2}); }, "[reshape] element count mismatch; got [4, 2]");
  expect_error([&] { g.concat({f23, f32_}, 0); }, "[concatenate] shape mismatch; got [3, 2]");
  expect_error([&] { g.concat({f23, i23}, 0); }, "[concatenate] dtype mismatch; got i32");
  expect_error([&] { g.concat({f23, g.param(DType::F32, {6})}, 0); }, "[concatenate] rank mismatch");
  expect_error([&] { g.concat({f23, f23}, 2); }, "[concatenate] dimension out of range");
}

TEST_F(IrBuilderErrors, SliceBounds) {
  expect_error([&] { g.slice(f23, {0, 0}, {2, 4}, {1, 1}); },
               "[slice] bad bounds in dim 1; got start 0 limit 4 stride 1 for size 3");
  expect_error([&] { g.slice(f23, {2, 0}, {1, 3}, {1, 1}); }, "[slice] bad bounds in dim 0");
  expect_error([&] { g.slice(f23, {-1, 0}, {1, 3}, {1, 1}); }, "[slice] bad bounds in dim 0");
  expect_error([&] { g.slice(f23, {0, 0}, {2, 3}, {1, 0}); }, "stride 0");
  expect_error([&] { g.slice(f23, {0}, {2}, {1}); }, "[slice] start/limit/stride must have rank 2");
}

TEST_F(IrBuilderErrors, Dot) {
  expect_error([&] { g.dot(f23, f23, dot_attr({}, {}, {1}, {0})); },
               "[dot_general] contracting dimension size mismatch; got [2, 3] and [2, 3]");
  expect_error([&] { g.dot(f23, f32_, dot_attr({}, {}, {1, 1}, {0, 0})); },
               "[dot_general] repeated dimension 1");
  Value l = g.param(DType::F32, {4, 2, 3}), r = g.param(DType::F32, {5, 3, 2});
  expect_error([&] { g.dot(l, r, dot_attr({0}, {0}, {2}, {1})); },
               "[dot_general] batch dimension size mismatch; got 4 and 5");
  expect_error([&] { g.dot(f23, i23, dot_attr({}, {}, {}, {})); },
               "[dot_general] operand dtypes differ; got f32 and i32");
  expect_error([&] { g.dot(b23, b23, dot_attr({}, {}, {}, {})); },
               "[dot_general] unsupported dtype i1");
  expect_error([&] { g.dot(f23, f32_, dot_attr({}, {}, {1}, {})); },
               "[dot_general] batch/contracting dimension lists differ in length");
  expect_error([&] { g.dot(f23, f32_, dot_attr({}, {}, {2}, {0})); },
               "[dot_general] dimension out of range; got 2");
}

TEST_F(IrBuilderErrors, RngState) {
  Value bad = g.param(DType::I64, {2}), bad_shape = g.param(DType::U64, {3});
  Value ok = g.param(DType::U64, {2});
  expect_error([&] { g.op(OpCode::RngUniform, {bad}, {}, {4}, DType::F32); },
               "[rng_bit_generator] state must be ui64[2]; got i64[2]");
  expect_error([&] { g.op(OpCode::RngNormal, {bad_shape}, {}, {4}, DType::F32); },
               "[rng_bit_generator] state must be ui64[2]; got ui64[3]");
  expect_error([&] { g.op(OpCode::RngUniform, {ok}, {}, {4}, DType::I32); },
               "[rng] result must be a float type; got i32");
}

}  // namespace
}  // namespace torch_tpu::ir
