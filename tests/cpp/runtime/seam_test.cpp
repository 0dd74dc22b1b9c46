// The runtime seam on the host runtime: Buffer allocation and transfers through the Runtime
// interface, the command stream's ordering and error rules, runtime selection, and that an
// executable writes only its outputs.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/host/host_runtime.h"
#include "runtime/runtime.h"
#include "runtime/stream.h"

namespace torch_tpu {
namespace {

using ir::DType;
using runtime::View;

View view(runtime::Buffer* b, DType dt, ir::Shape shape, std::vector<int64_t> strides = {}, int64_t offset = 0) {
  View v;
  v.buffer = b;
  v.dtype = dt;
  v.shape = std::move(shape);
  v.strides = std::move(strides);
  v.offset = offset;
  return v;
}

TEST(RuntimeSeam, BufferWriteReadCopyRoundTrip) {
  runtime::Runtime& rt = runtime::host_runtime();
  runtime::Buffer* a = rt.allocate(0, 12 * sizeof(float));
  runtime::Buffer* b = rt.allocate(0, 12 * sizeof(float));
  ASSERT_NE(a, nullptr);
  std::vector<float> src(12);
  for (int i = 0; i < 12; ++i) src[i] = static_cast<float>(i);
  rt.write(view(a, DType::F32, {3, 4}), reinterpret_cast<const std::byte*>(src.data()));
  rt.copy(b, 0, a, 0, 12 * sizeof(float));
  // A strided read: column 1 of the 3x4 matrix, through b.
  std::vector<float> col(3);
  rt.read(view(b, DType::F32, {3}, {4}, 1), reinterpret_cast<std::byte*>(col.data()));
  EXPECT_EQ(col, (std::vector<float>{1, 5, 9}));
  // A strided write: the transposed view of a gets the values 100..111 in its own order.
  std::vector<float> t(12);
  for (int i = 0; i < 12; ++i) t[i] = 100.0f + i;
  rt.write(view(a, DType::F32, {4, 3}, {1, 4}), reinterpret_cast<const std::byte*>(t.data()));
  std::vector<float> back(12);
  rt.read(view(a, DType::F32, {12}), reinterpret_cast<std::byte*>(back.data()));
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(back[r * 4 + c], 100.0f + c * 3 + r);
  rt.deallocate(a);
  rt.deallocate(b);
}

TEST(RuntimeSeam, ExecutableWritesOnlyItsOutputs) {
  runtime::Runtime& rt = runtime::host_runtime();
  ir::Graph g;
  ir::Value x = g.param(DType::F32, {8});
  g.set_outputs({g.binary(ir::OpCode::Mul, x, g.constant(2, DType::F32, {8}))});
  auto exe = rt.compile(g);
  runtime::Buffer* in = rt.allocate(0, 8 * sizeof(float));
  runtime::Buffer* out = rt.allocate(0, 16 * sizeof(float));
  std::vector<float> v(8, 3.0f), guard(16, -1.0f);
  rt.write(view(in, DType::F32, {8}), reinterpret_cast<const std::byte*>(v.data()));
  rt.write(view(out, DType::F32, {16}), reinterpret_cast<const std::byte*>(guard.data()));
  exe->run({view(in, DType::F32, {8})}, {view(out, DType::F32, {8}, {2}, 1)});  // odd elements only
  std::vector<float> got(16), src(8);
  rt.read(view(out, DType::F32, {16}), reinterpret_cast<std::byte*>(got.data()));
  rt.read(view(in, DType::F32, {8}), reinterpret_cast<std::byte*>(src.data()));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], i % 2 ? 6.0f : -1.0f) << i;
  EXPECT_EQ(src, v);  // the input was not written
  rt.deallocate(in);
  rt.deallocate(out);
}

TEST(RuntimeSeam, StreamRunsInOrderAndReportsTheFailingCommand) {
  const int dev = 3;  // a device no other test uses
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) runtime::stream::enqueue(dev, "append", [&order, i] { order.push_back(i); });
  uint64_t m = runtime::stream::mark(dev);
  runtime::stream::wait(dev, m);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  std::atomic<int> after{0};
  runtime::stream::enqueue(dev, "bad_op", [] { TPU_CHECK(false, "boom"); });
  runtime::stream::enqueue(dev, "later", [&after] { ++after; });  // still runs: an error is pending
  runtime::stream::enqueue(dev, "bad_too", [] { TPU_CHECK(false, "second"); });
  runtime::stream::drain(dev, runtime::stream::queued(dev));      // waits, keeps the error
  EXPECT_EQ(after.load(), 1);
  try {
    runtime::stream::synchronize(dev);
    FAIL() << "expected the pending error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("[bad_op] asynchronous op failed: boom (and 1 later asynchronous error(s))"),
              std::string::npos) << what;
    EXPECT_NE(what.find("TORCH_TPU_LAUNCH_BLOCKING=1"), std::string::npos) << what;
  }
  runtime::stream::enqueue(dev, "later", [&after] { ++after; });  // the stream works again
  runtime::stream::synchronize(dev);
  EXPECT_EQ(after.load(), 2);
  runtime::stream::enqueue(dev, "bad_op", [] { TPU_CHECK(false, "boom"); });
  try {
    runtime::stream::wait_at_call(dev, runtime::stream::queued(dev));
    FAIL() << "expected the error";
  } catch (const Error& e) {  // raised by the call itself: no sync-point hint
    EXPECT_EQ(std::string(e.what()).find("sync point"), std::string::npos) << e.what();
  }
}

// The profiler's view: each command queued while an observer is set is reported once, on the
// worker, with the tag its enqueue returned and its run interval; busy time accumulates.
std::atomic<int> g_enqueued{0}, g_ran{0}, g_bad_tags{0};
uint64_t observe_enqueue(int, const char*) { return 1000 + g_enqueued++; }
void observe_run(int dev, const char* name, uint64_t tag, int64_t start, int64_t end) {
  if (dev != 4 || std::string(name) != "observed" || tag != 1000u + g_ran.load() || end < start || start <= 0)
    ++g_bad_tags;
  ++g_ran;
}
const runtime::stream::Observer kObserver{&observe_enqueue, &observe_run};

TEST(RuntimeSeam, StreamObserverSeesEachCommandAndBusyTimeGrows) {
  const int dev = 4;  // a device no other test uses
  runtime::stream::enqueue(dev, "unobserved", [] {});
  runtime::stream::synchronize(dev);
  int64_t busy0 = runtime::stream::busy_ns(dev);
  runtime::stream::set_observer(&kObserver);
  for (int i = 0; i < 10; ++i)
    runtime::stream::enqueue(dev, "observed", [] {
      volatile double x = 0;
      for (int k = 0; k < 100000; ++k) x = x + k;
    });
  runtime::stream::set_observer(nullptr);
  runtime::stream::enqueue(dev, "unobserved", [] {});
  runtime::stream::synchronize(dev);
  EXPECT_EQ(g_enqueued.load(), 10);
  EXPECT_EQ(g_ran.load(), 10);
  EXPECT_EQ(g_bad_tags.load(), 0);
  EXPECT_GT(runtime::stream::busy_ns(dev), busy0);
  EXPECT_EQ(runtime::stream::busy_ns(15), 0);  // never started
}

// fork() copies only the calling thread: a child of a process whose streams ran must fail at
// once instead of waiting for a worker that does not exist there.
TEST(RuntimeSeam, ForkedChildRaisesInsteadOfHanging) {
  const int dev = 5;
  runtime::stream::enqueue(dev, "parent", [] {});
  runtime::stream::synchronize(dev);
  ASSERT_FALSE(runtime::stream::in_bad_fork());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hang kills the child, and the test sees it
    int code = 0;
    if (!runtime::stream::in_bad_fork()) code |= 1;
    try {
      runtime::stream::enqueue(dev, "child", [] {});
      code |= 2;
    } catch (const Error& e) {
      if (std::string(e.what()).find("forked subprocess") == std::string::npos) code |= 4;
    }
    try {
      runtime::stream::synchronize(6);
      code |= 8;
    } catch (const Error&) {
    }
    if (!runtime::stream::done(dev, runtime::stream::queued(dev))) code |= 16;  // frees still work
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung or crashed";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  runtime::stream::enqueue(dev, "parent", [] {});  // the parent is unaffected
  runtime::stream::synchronize(dev);
}

TEST(RuntimeSeam, SelectionKnowsTheRuntimes) {
  auto names = runtime::available();
  EXPECT_EQ(names, (std::vector<std::string>{"host", "pjrt"}));
  EXPECT_THROW(runtime::select("nonexistent"), Error);
}

}  // namespace
}  // namespace torch_tpu
