// The PrivateUse1 device guard: device count, the thread-local current device and stream,
// and events. Each device has ONE in-order command stream (exec/stream.h). Stream ids handed
// out by getNewStream/getStreamFromGlobalPool are distinct (so user code that keeps several
// streams still sees several objects), but all of them map onto that one queue: every
// ordering a user expresses with events/wait_stream is already respected, so block() and
// the per-stream ops are trivially correct.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "device/device.h"
#include "runtime/stream.h"

namespace torch_tpu::device {
namespace {

constexpr int kMaxDevices = 16;  // matches exec/stream.cpp
thread_local int t_device = 0;
// Current stream id per device, per thread (0 = the default stream).
thread_local std::array<c10::StreamId, kMaxDevices> t_stream{};
std::atomic<c10::StreamId> g_next_stream{1};

int read_device_count() {
  const char* s = std::getenv("TORCH_TPU_NUM_DEVICES");
  if (!s || !*s) return 1;
  int n = std::atoi(s);
  TORCH_CHECK(n >= 1 && n <= kMaxDevices, "[device] TORCH_TPU_NUM_DEVICES invalid; got '", s,
              "', expected 1..", kMaxDevices);
  return n;
}

int resolve(c10::DeviceIndex idx) {
  int i = idx < 0 ? t_device : idx;
  check_index("device", i);
  return i;
}

// An event is a position in its device's stream (runtime::stream::mark). Timing events also enqueue
// a tiny command that stamps the time when the stream reaches it.
struct Event {
  int dev = 0;
  uint64_t mark = 0;
  bool timing = false;
  std::shared_ptr<std::atomic<int64_t>> stamp_ns;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct TpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kType, static_cast<c10::DeviceIndex>(t_device)}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "[device] setDevice got device type ", d.type(), ", expected tpu");
    set_current_device(resolve(d.index()));
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < kMaxDevices) t_device = d.index();
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(device_count());
    } catch (...) {
      return 0;
    }
  }

  // --- streams ---
  c10::Stream make(int dev, c10::StreamId id) const {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, static_cast<c10::DeviceIndex>(dev)), id);
  }
  c10::Stream getStream(c10::Device d) const override {
    int dev = resolve(d.index());
    return make(dev, t_stream[dev]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return make(resolve(d.index()), 0); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return make(resolve(d.index()), g_next_stream++);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return make(resolve(d.index()), g_next_stream++);
  }
  // Switches the current stream of the stream's device; the current device is unchanged.
  c10::Stream exchangeStream(c10::Stream s) const override {
    int dev = resolve(s.device_index());
    c10::Stream old = make(dev, t_stream[dev]);
    t_stream[dev] = s.id();
    return old;
  }
  bool queryStream(const c10::Stream& s) const override {
    int dev = resolve(s.device_index());
    return runtime::stream::done(dev, runtime::stream::mark(dev));
  }
  void synchronizeStream(const c10::Stream& s) const override { runtime::stream::synchronize(resolve(s.device_index())); }
  void synchronizeDevice(const c10::DeviceIndex idx) const override { runtime::stream::synchronize(resolve(idx)); }
  void* getStreamNativeHandle(const c10::Stream s) const override {
    return reinterpret_cast<void*>(static_cast<intptr_t>(s.id()));
  }

  // --- events ---
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex idx,
              const c10::EventFlag flag) const override {
    int dev = resolve(stream.device_index());
    TORCH_CHECK(idx < 0 || idx == dev, "[event] record on another device's stream; got stream on tpu:", dev,
                ", expected tpu:", static_cast<int>(idx));
    auto* e = static_cast<Event*>(*event);
    if (!e) {
      e = new Event();
      e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
      *event = e;
    }
    e->dev = dev;
    if (e->timing) {
      runtime::stream::flush_deferred(dev);  // deferred work (a foreach run) is before the event
      auto stamp = std::make_shared<std::atomic<int64_t>>(0);
      e->stamp_ns = stamp;
      runtime::stream::enqueue(dev, "event_record", [stamp] { stamp->store(now_ns()); });
    }
    e->mark = runtime::stream::mark(dev);
  }
  // One in-order queue per device: everything enqueued later already runs after the event.
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void* event) const override {
    auto* e = static_cast<Event*>(event);
    return !e || runtime::stream::done(e->dev, e->mark);
  }
  void synchronizeEvent(void* event) const override {
    if (auto* e = static_cast<Event*>(event)) runtime::stream::wait(e->dev, e->mark);
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Event*>(event);
  }
  double elapsedTime(void* a, void* b, const c10::DeviceIndex) const override {
    auto* e1 = static_cast<Event*>(a);
    auto* e2 = static_cast<Event*>(b);
    TORCH_CHECK(e1 && e2, "[event] elapsed_time needs two recorded events; got an unrecorded event");
    TORCH_CHECK(e1->timing && e2->timing,
                "[event] elapsed_time needs events created with enable_timing=True; got timing disabled");
    runtime::stream::wait(e1->dev, e1->mark);
    runtime::stream::wait(e2->dev, e2->mark);
    return static_cast<double>(e2->stamp_ns->load() - e1->stamp_ns->load()) / 1e6;  // milliseconds
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {
    // Commands hold Storage references until they ran; nothing to track.
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace

int device_count() {
  static const int n = read_device_count();
  return n;
}

void check_index(const char* who, int idx) {
  int n = device_count();
  TORCH_CHECK(idx >= 0 && idx < n, "[", who, "] invalid device index; got tpu:", idx, ", expected ",
              n == 1 ? std::string("tpu:0") : "tpu:0..tpu:" + std::to_string(n - 1), " (", n, " tpu device",
              n == 1 ? "" : "s", "; env TORCH_TPU_NUM_DEVICES sets the count)");
}

int current_device() { return t_device; }

void set_current_device(int idx) {
  TORCH_CHECK(idx >= 0 && idx < device_count(), "[device] set_device got index ", idx, ", expected 0..",
              device_count() - 1);
  t_device = idx;
}

}  // namespace torch_tpu::device
