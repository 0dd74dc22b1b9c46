// Executable: compile StableHLO text and run it (shared/notes/pjrt.md §4.2 module against a
// reference computed here), multiple outputs, donation, serialize / deserialize, portable
// executables, the synchronous XLA CPU client, error paths. Prints compile / execute timings.
#include <chrono>
#include <cmath>

#include "pjrt_test_util.h"

namespace torch_tpu::pjrt {
namespace {

using test::download;
using test::expect_error;
using test::upload;

// notes §4.2: dot_general (4x8 . 8x16) and a row-sum reduce of its result; two outputs.
const char* kDotReduce = R"(module @m {
  func.func public @main(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<4xf32>) {
    %0 = "stablehlo.dot_general"(%a, %b) {
      dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>,
      precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]
    } : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %z = "stablehlo.constant"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
    %1 = "stablehlo.reduce"(%0, %z) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = "stablehlo.add"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
    return %0, %1 : tensor<4x16xf32>, tensor<4xf32>
  }
}
)";

// x + y with x donated to the output.
const char* kDonatedAdd = R"(module @m {
  func.func public @main(%x: tensor<1024xf32> {tf.aliasing_output = 0 : i32}, %y: tensor<1024xf32>) -> (tensor<1024xf32>) {
    %0 = "stablehlo.add"(%x, %y) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    return %0 : tensor<1024xf32>
  }
}
)";

// Three outputs of three dtypes from two inputs.
const char* kThreeOutputs = R"(module @m {
  func.func public @main(%a: tensor<3xi32>, %b: tensor<3xi32>) -> (tensor<3xi32>, tensor<3xi1>, tensor<3xf64>) {
    %0 = "stablehlo.multiply"(%a, %b) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %1 = "stablehlo.compare"(%a, %b) {comparison_direction = #stablehlo<comparison_direction LT>} : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %2 = "stablehlo.convert"(%0) : (tensor<3xi32>) -> tensor<3xf64>
    return %0, %1, %2 : tensor<3xi32>, tensor<3xi1>, tensor<3xf64>
  }
}
)";

struct DotInputs {
  std::vector<float> a = std::vector<float>(4 * 8), b = std::vector<float>(8 * 16);
  std::vector<float> prod = std::vector<float>(4 * 16), rows = std::vector<float>(4, 0.0f);
  DotInputs() {
    for (int i = 0; i < 32; ++i) a[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    for (int i = 0; i < 128; ++i) b[i] = 0.125f * static_cast<float>((i * 5) % 11) - 0.3f;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 16; ++j) {
        double s = 0;
        for (int k = 0; k < 8; ++k) s += double(a[i * 8 + k]) * b[k * 16 + j];
        prod[i * 16 + j] = static_cast<float>(s);
        rows[i] += static_cast<float>(s);
      }
  }
};

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "element " << i;
}

void check_dot_reduce(const Client& c, const Executable& ex, int device = -1) {
  DotInputs in;
  int dev = device < 0 ? 0 : device;
  DeviceBuffer a = upload(c, in.a, ir::DType::F32, {4, 8}, dev), b = upload(c, in.b, ir::DType::F32, {8, 16}, dev);
  ExecuteOptions opts;
  opts.device = device;
  ExecuteResult r = ex.execute({&a, &b}, opts);
  r.done.await();
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].dims(), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(r.outputs[1].dims(), (std::vector<int64_t>{4}));
  EXPECT_EQ(r.outputs[1].dtype(), ir::DType::F32);
  expect_near(download<float>(r.outputs[0]), in.prod);
  expect_near(download<float>(r.outputs[1]), in.rows);
}

TEST(PjrtExecutable, DotGeneralAndReduce) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  Executable ex = c->compile(kDotReduce);
  EXPECT_EQ(ex.num_outputs(), 2u);
  EXPECT_FALSE(ex.portable());
  check_dot_reduce(*c, ex);
  check_dot_reduce(*c, ex);  // an executable runs many times
}

// The pjrt runtime creates its XLA CPU client with "asynchronous" = false (docs/decisions/
// pjrt-plugin.md, "Per-op latency"): an execution XLA deems not cheap (this dot: 1024 flops,
// otherwise sent to XLA's thread pool) then runs inside execute(), done when it returns.
TEST(PjrtExecutable, SynchronousCpuClientRunsInsideExecute) {
  TPU_PJRT_CLIENT_OR_SKIP(shared);
  if (shared->platform_name() != "cpu")
    GTEST_SKIP() << "a create option of the XLA CPU plugin; platform is " << shared->platform_name();
  std::shared_ptr<Client> c = Client::create(shared->plugin(), {{"asynchronous", false}});
  Executable ex = c->compile(kDotReduce);
  DotInputs in;
  DeviceBuffer a = upload(*c, in.a, ir::DType::F32, {4, 8}), b = upload(*c, in.b, ir::DType::F32, {8, 16});
  for (int i = 0; i < 3; ++i) {
    ExecuteResult r = ex.execute({&a, &b});
    EXPECT_TRUE(r.done.is_ready()) << "run " << i;
    r.done.await();
    expect_near(download<float>(r.outputs[0]), in.prod);
    expect_near(download<float>(r.outputs[1]), in.rows);
  }
}

TEST(PjrtExecutable, MultipleOutputsOfSeveralDtypes) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  Executable ex = c->compile(kThreeOutputs);
  ASSERT_EQ(ex.num_outputs(), 3u);
  DeviceBuffer a = upload(*c, std::vector<int32_t>{1, 5, -3}, ir::DType::I32, {3});
  DeviceBuffer b = upload(*c, std::vector<int32_t>{2, 4, -3}, ir::DType::I32, {3});
  ExecuteResult r = ex.execute({&a, &b});
  EXPECT_EQ(download<int32_t>(r.outputs[0]), (std::vector<int32_t>{2, 20, 9}));
  EXPECT_EQ(r.outputs[1].dtype(), ir::DType::Bool);
  EXPECT_EQ(download<uint8_t>(r.outputs[1]), (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(download<double>(r.outputs[2]), (std::vector<double>{2, 20, 9}));
  r.done.await();
  // Outputs feed later runs at once (PJRT orders them), before anything is awaited.
  ExecuteResult r2 = ex.execute({&r.outputs[0], &a});
  EXPECT_EQ(download<int32_t>(r2.outputs[0]), (std::vector<int32_t>{2, 100, -27}));
}

TEST(PjrtExecutable, DonationConsumesTheInput) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  Executable ex = c->compile(kDonatedAdd);
  std::vector<float> xs(1024), ys(1024), want(1024);
  for (int i = 0; i < 1024; ++i) xs[i] = float(i), ys[i] = 0.5f * float(i), want[i] = xs[i] + ys[i];
  DeviceBuffer x = upload(*c, xs, ir::DType::F32, {1024}), y = upload(*c, ys, ir::DType::F32, {1024});
  uintptr_t x_addr = x.unsafe_pointer();
  ExecuteResult r = ex.execute({&x, &y});
  r.done.await();
  EXPECT_EQ(download<float>(r.outputs[0]), want);
  EXPECT_TRUE(x.is_deleted());   // donated: only destruction remains valid
  EXPECT_FALSE(y.is_deleted());
  std::printf("  [donation] output reuses the donated input's memory: %s\n",
              r.outputs[0].unsafe_pointer() == x_addr ? "yes" : "no");
  // A donated buffer cannot be used again: an Error, not a crash.
  expect_error([&] { ex.execute({&x, &y}).done.await(); }, {"[pjrt] execut"});
  // non_donatable keeps the input alive for this call.
  DeviceBuffer x2 = upload(*c, xs, ir::DType::F32, {1024});
  ExecuteOptions keep;
  keep.non_donatable = {0};
  ExecuteResult r2 = ex.execute({&x2, &y}, keep);
  EXPECT_EQ(download<float>(r2.outputs[0]), want);
  EXPECT_FALSE(x2.is_deleted());
  EXPECT_EQ(download<float>(x2), xs);
}

TEST(PjrtExecutable, SerializeDeserializeRuns) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  Executable ex = c->compile(kDotReduce);
  std::string bytes = ex.serialize();
  ASSERT_FALSE(bytes.empty());
  Executable back = c->deserialize(bytes);
  EXPECT_EQ(back.num_outputs(), 2u);
  check_dot_reduce(*c, back);
  expect_error([&] { c->deserialize("definitely not an executable"); },
               {"[pjrt] deserializing an executable failed; got"});
}

TEST(PjrtExecutable, PortableRunsOnAnyDevice) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  CompileOptions o;
  o.portable = true;
  Executable ex = c->compile(kDotReduce, o);
  EXPECT_TRUE(ex.portable());
  for (int d = 0; d < static_cast<int>(c->devices().size()) && d < 2; ++d) check_dot_reduce(*c, ex, d);
  Executable fixed = c->compile(kDotReduce);
  if (c->devices().size() > 1) {
    ExecuteOptions on1;
    on1.device = 1;
    expect_error([&] { fixed.execute({}, on1); },
                 {"[pjrt] execute: a non-portable executable runs on its compiled device; got device 1"});
  }
}

TEST(PjrtExecutable, InvalidProgramsAreErrors) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  std::string m = expect_error([&] { c->compile("module @m { this is not mlir }"); },
                               {"[pjrt] compiling StableHLO failed; got"});
  std::printf("  [invalid text] %s\n", m.substr(0, 300).c_str());
  // Well-formed MLIR with a type error.
  expect_error([&] {
    c->compile(R"(module @m {
  func.func public @main(%a: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = "stablehlo.add"(%a, %a) : (tensor<3xf32>, tensor<3xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
})");
  }, {"[pjrt] compiling StableHLO failed; got"});
  // Wrong number of arguments at execute time.
  Executable ex = c->compile(kDotReduce);
  DeviceBuffer a = upload(*c, std::vector<float>(32), ir::DType::F32, {4, 8});
  expect_error([&] { ex.execute({&a}).done.await(); }, {"[pjrt] execut"});
  // Still alive and working.
  check_dot_reduce(*c, ex);
}

TEST(PjrtExecutable, Timings) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  using clk = std::chrono::steady_clock;
  auto us = [](clk::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  auto t0 = clk::now();
  Executable ex = c->compile(kDotReduce);
  double compile_us = us(clk::now() - t0);
  DotInputs in;
  DeviceBuffer a = upload(*c, in.a, ir::DType::F32, {4, 8}), b = upload(*c, in.b, ir::DType::F32, {8, 16});
  ex.execute({&a, &b}).done.await();  // warm-up
  const int n = 200;
  t0 = clk::now();
  for (int i = 0; i < n; ++i) ex.execute({&a, &b}).done.await();
  double exec_us = us(clk::now() - t0) / n;
  std::vector<ExecuteResult> queued;
  queued.reserve(n);
  t0 = clk::now();
  for (int i = 0; i < n; ++i) queued.push_back(ex.execute({&a, &b}));  // enqueue only
  double enqueue_us = us(clk::now() - t0) / n;
  for (ExecuteResult& q : queued) q.done.await();
  std::vector<float> out(4 * 16);
  t0 = clk::now();
  for (int i = 0; i < n; ++i) {
    DeviceBuffer a2 = upload(*c, in.a, ir::DType::F32, {4, 8}), b2 = upload(*c, in.b, ir::DType::F32, {8, 16});
    ExecuteResult r = ex.execute({&a2, &b2});
    r.outputs[0].to_host(out.data(), out.size() * 4);
  }
  double trip_us = us(clk::now() - t0) / n;
  std::printf("  [timing] compile %.1f ms; execute+await %.1f us; execute enqueue %.1f us; "
              "upload 2 + execute + download %.1f us\n", compile_us / 1000, exec_us, enqueue_us, trip_us);
  EXPECT_GT(exec_us, 0);
}

}  // namespace
}  // namespace torch_tpu::pjrt
