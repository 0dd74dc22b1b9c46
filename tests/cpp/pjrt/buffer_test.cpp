// DeviceBuffer: host -> device -> host round trips per dtype, metadata, both host-buffer
// semantics, size checks, events.
#include <atomic>
#include <chrono>
#include <thread>

#include "pjrt_test_util.h"

namespace torch_tpu::pjrt {
namespace {

using test::download;
using test::expect_error;
using test::upload;

template <class T>
void round_trip(const Client& c, ir::DType t, const std::vector<T>& v, const std::vector<int64_t>& dims) {
  DeviceBuffer b = upload(c, v, t, dims);
  EXPECT_EQ(b.dtype(), t);
  EXPECT_EQ(b.dims(), dims);
  EXPECT_EQ(b.host_size(), v.size() * sizeof(T));
  EXPECT_GE(b.on_device_size(), v.size() * ir::dtype_size(t));
  EXPECT_FALSE(b.is_deleted());
  EXPECT_EQ(download<T>(b), v) << ir::dtype_name(t);
}

TEST(PjrtBuffer, RoundTripEveryDtype) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  round_trip<float>(*c, ir::DType::F32, {1.5f, -2.0f, 0.0f, 3.25e10f, -1e-20f, 7.0f}, {2, 3});
  // bf16 bit patterns: 1.0, -2.5, NaN, -0.0, the smallest normal, 65280.
  round_trip<uint16_t>(*c, ir::DType::BF16, {0x3F80, 0xC020, 0x7FC0, 0x8000, 0x0080, 0x477F}, {3, 2});
  round_trip<uint16_t>(*c, ir::DType::F16, {0x3C00, 0xC100, 0x7C00, 0x0001}, {4});
  round_trip<double>(*c, ir::DType::F64, {1e300, -0.5, 3.0}, {3});
  round_trip<int64_t>(*c, ir::DType::I64, {INT64_MIN, -1, 0, INT64_MAX, 1LL << 40}, {5});
  round_trip<int32_t>(*c, ir::DType::I32, {INT32_MIN, 7, -9, INT32_MAX}, {2, 2});
  round_trip<int16_t>(*c, ir::DType::I16, {-300, 300}, {2});
  round_trip<int8_t>(*c, ir::DType::I8, {-128, 127, 0}, {3});
  round_trip<uint8_t>(*c, ir::DType::U8, {0, 255, 17}, {3});
  round_trip<uint64_t>(*c, ir::DType::U64, {UINT64_MAX, 5}, {2});
  round_trip<uint8_t>(*c, ir::DType::Bool, {1, 0, 0, 1, 1, 0}, {2, 1, 3});  // pred: 1 byte each
  round_trip<float>(*c, ir::DType::F32, {42.0f}, {});                      // rank 0
  round_trip<float>(*c, ir::DType::F32, {}, {0, 3});                       // empty
}

TEST(PjrtBuffer, OtherDevice) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  if (c->devices().size() < 2) GTEST_SKIP() << "one device";
  std::vector<int32_t> v = {1, 2, 3};
  DeviceBuffer b = upload(*c, v, ir::DType::I32, {3}, /*device=*/1);
  EXPECT_EQ(download<int32_t>(b), v);
  expect_error([&] { upload(*c, v, ir::DType::I32, {3}, 99); },
               {"[pjrt] to_device: bad device index; got 99"});
}

TEST(PjrtBuffer, UntilTransferCompletesSemantics) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  std::vector<float> v(1 << 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Event done;
  DeviceBuffer b = c->to_device(v.data(), ir::DType::F32, {256, 256}, 0, &done);
  done.await();  // after this the host data may change without affecting the buffer
  EXPECT_TRUE(done.is_ready());
  std::vector<float> want = v;
  std::fill(v.begin(), v.end(), -1.0f);
  EXPECT_EQ(download<float>(b), want);
}

TEST(PjrtBuffer, OnlyDuringCallCopiesAtOnce) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  std::vector<int64_t> v = {1, 2, 3, 4};
  DeviceBuffer b = upload(*c, v, ir::DType::I64, {4});
  std::fill(v.begin(), v.end(), 0);  // allowed right after to_device returns
  EXPECT_EQ(download<int64_t>(b), (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(PjrtBuffer, AsyncToHostAndEvents) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  DeviceBuffer b = upload(*c, v, ir::DType::F32, {6});
  Event ready = b.ready();
  ready.await();
  EXPECT_TRUE(ready.is_ready());
  std::vector<float> out(6, 0.0f);
  Event copy = b.to_host_async(out.data(), out.size() * 4);
  copy.await();
  copy.await();  // idempotent
  EXPECT_EQ(out, v);
  // on_ready: runs exactly once, with "" for success.
  std::atomic<int> calls{0};
  std::string err = "unset";
  std::vector<float> out2(6);
  Event copy2 = b.to_host_async(out2.data(), out2.size() * 4);
  copy2.on_ready([&](const std::string& e) {
    err = e;
    calls++;
  });
  EXPECT_FALSE(copy2.valid());
  for (int i = 0; i < 2000 && calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(err, "");
  EXPECT_EQ(out2, v);
  Event empty;
  EXPECT_TRUE(empty.is_ready());
  empty.await();
}

TEST(PjrtBuffer, SizeAndEmptyChecks) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  std::vector<float> v = {1, 2, 3, 4};
  DeviceBuffer b = upload(*c, v, ir::DType::F32, {2, 2});
  std::vector<float> small(3);
  expect_error([&] { b.to_host(small.data(), small.size() * 4); },
               {"[pjrt] to_host: destination size mismatch; got 12 bytes, expected 16"});
  expect_error([&] { upload(*c, v, ir::DType::F32, {-1, 2}); },
               {"[pjrt] to_device: negative dimension; got -1"});
  DeviceBuffer moved = std::move(b);
  EXPECT_FALSE(b.valid());  // NOLINT(bugprone-use-after-move): testing the moved-from state
  expect_error([&] { b.dims(); }, {"[pjrt] DeviceBuffer::dims on an empty buffer"});
  EXPECT_EQ(download<float>(moved), v);
}

}  // namespace
}  // namespace torch_tpu::pjrt
