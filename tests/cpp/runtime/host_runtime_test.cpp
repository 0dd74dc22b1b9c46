// Host runtime plumbing: strided / expanded input views, strided outputs, outputs that
// alias inputs (in-place), pass-through and duplicated outputs, argument checks, buffer
// reuse across a chain, and concurrent runs of one executable.
#include <atomic>
#include <thread>

#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

using runtime::View;

TEST(HostRuntime, StridedAndExpandedInputs) {
  // x: a transposed view of a [4, 3] buffer; y: a row expanded with stride 0.
  Tensor base = make(DType::F32, {4, 3}, [](int64_t i) { return i; });
  Tensor row = make(DType::F32, {4}, [](int64_t i) { return 100 * i; });
  Graph g;
  Value x = g.param(DType::F32, {3, 4}), y = g.param(DType::F32, {3, 4});
  g.set_outputs({g.binary(OpCode::Add, x, y)});
  auto exe = runtime::host_runtime().compile(g);
  Tensor out(DType::F32, {3, 4});
  exe->run({View{host::as_buffer(base.data()), DType::F32, {3, 4}, {1, 3}}, View{host::as_buffer(row.data()), DType::F32, {3, 4}, {0, 1}}},
           {out.view()});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) ASSERT_EQ(out.get(i * 4 + j), base.get(j * 3 + i) + 100 * j);
}

TEST(HostRuntime, StridedOutputAndNegativeStrides) {
  Tensor buf(DType::I32, {2, 8});
  Graph g;
  Value x = g.param(DType::I32, {2, 4});
  g.set_outputs({g.binary(OpCode::Mul, x, x)});
  auto exe = runtime::host_runtime().compile(g);
  Tensor in = make(DType::I32, {2, 4}, [](int64_t i) { return i + 1; });
  // Write every other column of buf; read the input reversed along dim 1.
  View rev{host::as_buffer(static_cast<int32_t*>(in.data()) + 3), DType::I32, {2, 4}, {4, -1}};
  exe->run({rev}, {View{host::as_buffer(buf.data()), DType::I32, {2, 4}, {8, 2}}});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      int64_t v = i * 4 + (3 - j) + 1;
      ASSERT_EQ(buf.geti(i * 8 + 2 * j), v * v);
      ASSERT_EQ(buf.geti(i * 8 + 2 * j + 1), 0);
    }
}

TEST(HostRuntime, InPlaceAliasing) {
  // out = x + flip(x) written into x itself: every input must be read before writing.
  Graph g;
  Value x = g.param(DType::F32, {6});
  ir::Attrs a;
  a.dims = {0};
  g.set_outputs({g.binary(OpCode::Add, x, g.op(OpCode::Reverse, {x}, a))});
  auto exe = runtime::host_runtime().compile(g);
  Tensor t = make(DType::F32, {6}, [](int64_t i) { return i * i; });
  exe->run({t.view()}, {t.view()});
  for (int64_t i = 0; i < 6; ++i) ASSERT_EQ(t.get(i), i * i + (5 - i) * (5 - i));
  // Transpose in place on a square matrix (output overlaps input with another layout).
  Graph g2;
  Value m = g2.param(DType::F64, {3, 3});
  g2.set_outputs({g2.transpose(m, {1, 0})});
  Tensor s = make(DType::F64, {3, 3}, [](int64_t i) { return i; });
  runtime::host_runtime().compile(g2)->run({s.view()}, {s.view()});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) ASSERT_EQ(s.get(i * 3 + j), j * 3 + i);
}

TEST(HostRuntime, PassThroughDuplicateAndSwappedOutputs) {
  Graph g;
  Value x = g.param(DType::I16, {4}), y = g.param(DType::I16, {4});
  Value s = g.binary(OpCode::Sub, x, y);
  g.set_outputs({y, s, s, x});  // swap x and y through aliased outputs, sub twice
  auto exe = runtime::host_runtime().compile(g);
  Tensor a = make(DType::I16, {4}, [](int64_t i) { return i; });
  Tensor b = make(DType::I16, {4}, [](int64_t i) { return 10 * i; });
  Tensor s1(DType::I16, {4}), s2(DType::I16, {4});
  exe->run({a.view(), b.view()}, {a.view(), s1.view(), s2.view(), b.view()});
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a.geti(i), 10 * i);
    EXPECT_EQ(b.geti(i), i);
    EXPECT_EQ(s1.geti(i), -9 * i);
    EXPECT_EQ(s2.geti(i), -9 * i);
  }
}

TEST(HostRuntime, ChainReusesBuffersAndReshapeAliases) {
  Graph g;
  Value x = g.param(DType::F32, {64, 64});
  Value v = x;
  for (int i = 0; i < 20; ++i) v = g.binary(OpCode::Add, g.reshape(v, {4096}), g.reshape(x, {4096})), v = g.reshape(v, {64, 64});
  g.set_outputs({g.reshape(v, {16, 256})});
  Tensor t = make(DType::F32, {64, 64}, [](int64_t i) { return i % 10; });
  Tensor out = run(g, {t})[0];
  for (int64_t i = 0; i < 4096; i += 13) ASSERT_EQ(out.get(i), 21 * (i % 10));
}

TEST(HostRuntime, ChecksArguments) {
  Graph g;
  Value x = g.param(DType::F32, {2});
  g.set_outputs({g.unary(OpCode::Exp, x)});
  auto exe = runtime::host_runtime().compile(g);
  Tensor a(DType::F32, {2}), wrong(DType::F64, {2}), o(DType::F32, {2});
  EXPECT_THROW(exe->run({}, {o.view()}), Error);
  EXPECT_THROW(exe->run({wrong.view()}, {o.view()}), Error);
  try {
    exe->run({a.view()}, {wrong.view()});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[host run] output 0 dtype mismatch; got f64, expected f32"),
              std::string::npos)
        << e.what();
  }
  Graph bad;
  bad.param(DType::F32, {2});
  EXPECT_THROW(runtime::host_runtime().compile(bad), Error);  // no outputs
  EXPECT_STREQ(runtime::host_runtime().name(), "host");
}

TEST(HostRuntime, ConcurrentRuns) {
  Graph g;
  Value x = g.param(DType::F32, {1000});
  Value y = g.unary(OpCode::Sqrt, g.binary(OpCode::Mul, x, x));
  g.set_outputs({g.reduce(y, ir::Reducer::Sum, {0}), y});
  auto exe = runtime::host_runtime().compile(g);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Tensor in = make(DType::F32, {1000}, [&](int64_t i) { return (t + 1) * (i % 3); });
      Tensor s(DType::F32, {}), o(DType::F32, {1000});
      for (int it = 0; it < 200; ++it) {
        exe->run({in.view()}, {s.view(), o.view()});
        if (s.get(0) != (t + 1) * 999.0) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(HostRuntime, ViewContiguous) {
  EXPECT_TRUE((View{nullptr, DType::F32, {2, 3}, {}}.contiguous()));
  EXPECT_TRUE((View{nullptr, DType::F32, {2, 3}, {3, 1}}.contiguous()));
  EXPECT_TRUE((View{nullptr, DType::F32, {2, 1, 3}, {3, 99, 1}}.contiguous()));
  EXPECT_FALSE((View{nullptr, DType::F32, {2, 3}, {1, 2}}.contiguous()));
  EXPECT_FALSE((View{nullptr, DType::F32, {2, 3}, {0, 1}}.contiguous()));
  EXPECT_TRUE((View{nullptr, DType::F32, {0, 3}, {7, 7}}.contiguous()));
}

}  // namespace
}  // namespace torch_tpu::host::testing
