// torch.profiler for "tpu": a Kineto activity profiler (PyTorch's PrivateUse1ProfilerRegistry)
// that reports every command the device streams run (an op's graph, a fused window, a
// compiled graph, a transfer) as a device kernel with its run time on the worker, linked to
// the ATen op that queued it, so key_averages() shows device time and the Chrome trace has a
// lane per device. Commands are observed through runtime::stream::Observer (torch-free).
// Also the legacy profiler's device events (ProfilerStubs), which need no Kineto.
#include "python/profiler.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "device/device.h"
#include "runtime/stream.h"

namespace torch_tpu::python {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The legacy profiler (torch.autograd.profiler.profile(use_device="tpu"), use_kineto=False)
// times each op with device events, as CUDA's fallback does with cudaEvents: an event is a
// command stamping the time when the stream reaches it; elapsed() is end - start in us.
struct TpuProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    int dev = device::current_device();
    if (device) *device = static_cast<c10::DeviceIndex>(dev);
    auto stamp = std::make_shared<std::atomic<int64_t>>(0);
    runtime::stream::enqueue(dev, "profiler_event", [stamp] { stamp->store(steady_ns()); });
    *event = std::shared_ptr<void>(stamp, stamp.get());
    if (cpu_ns) *cpu_ns = c10::getTime();
  }
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* a,
                const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    auto* s = static_cast<std::atomic<int64_t>*>(a->get());
    auto* e = static_cast<std::atomic<int64_t>*>(b->get());
    if (s->load() == 0 || e->load() == 0) synchronize();
    if (s->load() == 0 || e->load() == 0) return 0.f;  // the stream failed before reaching them
    return static_cast<float>(e->load() - s->load()) / 1000.f;
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (int d = 0; d < device::device_count(); ++d) op(d);
  }
  // Waits for queued commands without raising their errors (the user's next sync does).
  void synchronize() const override {
    if (runtime::stream::in_bad_fork() || runtime::stream::on_worker()) return;
    for (int d = 0; d < device::device_count(); ++d) runtime::stream::drain(d, runtime::stream::mark(d));
  }
};

TpuProfilerStubs g_stubs;
struct RegisterStubs {
  RegisterStubs() { torch::profiler::impl::registerPrivateUse1Methods(&g_stubs); }
} g_register_stubs;

}  // namespace
}  // namespace torch_tpu::python

#ifdef TPU_HAVE_KINETO
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace torch_tpu::python {
namespace {

using libkineto::ActivityType;

struct Record {
  int dev;
  const char* name;
  uint64_t correlation;  // of the ATen op that queued the command (0: none)
  int64_t start_ns, end_ns;
};

// Correlation ids Kineto pushes on the thread that runs an op (the innermost op is last).
thread_local std::vector<uint64_t> t_correlation;
std::mutex g_mu;
std::vector<Record> g_records;  // guarded by g_mu

uint64_t on_enqueue(int, const char*) { return t_correlation.empty() ? 0 : t_correlation.back(); }
void on_run(int dev, const char* name, uint64_t tag, int64_t start, int64_t end) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_records.push_back({dev, name, tag, start, end});
}
const runtime::stream::Observer kObserver{&on_enqueue, &on_run};

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    {
      std::lock_guard<std::mutex> lk(g_mu);
      g_records.clear();
    }
    runtime::stream::set_observer(&kObserver);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  // Lets the commands queued while profiling finish (errors stay for the user's next wait).
  void stop() override {
    if (!runtime::stream::in_bad_fork() && !runtime::stream::on_worker())
      for (int d = 0; d < device::device_count(); ++d) runtime::stream::drain(d, runtime::stream::queued(d));
    runtime::stream::set_observer(nullptr);
    std::lock_guard<std::mutex> lk(g_mu);
    records_.swap(g_records);
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    int32_t id = 0;
    for (const Record& r : records_) {
      // "[tpu] aten::mm": a device row of its own in key_averages, apart from the CPU op.
      buffer_->emplace_activity(buffer_->span, ActivityType::CONCURRENT_KERNEL, std::string("[tpu] ") + r.name);
      libkineto::GenericTraceActivity& a = *buffer_->activities.back();
      a.startTime = r.start_ns;
      a.endTime = r.end_ns;
      a.id = ++id;
      a.device = r.dev;
      a.resource = 0;  // the device's one stream
      if (r.correlation && linked) a.linked = linked(static_cast<int32_t>(r.correlation));
      a.addMetadata("device", r.dev);
      a.addMetadata("stream", 0);
      logger.handleActivity(a);
    }
    records_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::unique_ptr<libkineto::DeviceInfo>(new libkineto::DeviceInfo{0, 0, "tpu:0", "tpu"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (int d = 0; d < device::device_count(); ++d) out.push_back({0, 0, d, "stream 0"});
    return out;
  }
  // Kineto keeps the buffer (and so the activities handed to the logger) with the trace.
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { t_correlation.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
  }

 private:
  std::vector<Record> records_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    static const std::string n = "torch_tpu";
    return n;
  }
  const std::set<ActivityType>& availableActivities() const override {
    static const std::set<ActivityType> s{ActivityType::CONCURRENT_KERNEL};
    return s;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    if (!types.count(ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<Session>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t, const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

}  // namespace

bool profiler_available() { return true; }

}  // namespace torch_tpu::python

#else  // a torch without Kineto headers: torch.profiler shows CPU ops only

namespace torch_tpu::python {
bool profiler_available() { return false; }
}  // namespace torch_tpu::python

#endif
