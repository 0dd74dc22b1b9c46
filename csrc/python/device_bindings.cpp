// Python bindings for device/: device count and current device, allocator statistics
// (torch.cuda.memory_stats-style flat dict), the default generators, device synchronize.
#include <ATen/ops/from_blob.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/utils/pybind.h>

#include <string>

#include "device/device.h"
#include "exec/stream.h"
#include "exec/window.h"
#include "runtime/runtime.h"
#include "runtime/stream.h"
#include "python/bindings.h"
#include "python/profiler.h"

namespace py = pybind11;

namespace torch_tpu::python {
namespace {

c10::DeviceAllocator* tpu_allocator() { return c10::getDeviceAllocator(c10::DeviceType::PrivateUse1); }

c10::DeviceIndex index(int dev) {
  int d = dev < 0 ? device::current_device() : dev;
  device::check_index("device", d);
  return static_cast<c10::DeviceIndex>(d);
}

// Same keys as torch.cuda.memory_stats(): "<stat>.<pool>.<metric>" plus the scalar counters.
py::dict memory_stats(int dev) {
  auto s = tpu_allocator()->getDeviceStats(index(dev));
  py::dict d;
  const char* pools[] = {"all", "small_pool", "large_pool"};
  auto add_array = [&](const char* name, const c10::CachingAllocator::StatArray& a) {
    for (size_t i = 0; i < a.size(); ++i) {
      std::string p = std::string(name) + "." + pools[i] + ".";
      d[py::str(p + "current")] = a[i].current;
      d[py::str(p + "peak")] = a[i].peak;
      d[py::str(p + "allocated")] = a[i].allocated;
      d[py::str(p + "freed")] = a[i].freed;
    }
  };
  add_array("allocation", s.allocation);
  add_array("segment", s.segment);
  add_array("active", s.active);
  add_array("inactive_split", s.inactive_split);
  add_array("allocated_bytes", s.allocated_bytes);
  add_array("reserved_bytes", s.reserved_bytes);
  add_array("active_bytes", s.active_bytes);
  add_array("inactive_split_bytes", s.inactive_split_bytes);
  add_array("requested_bytes", s.requested_bytes);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["max_split_size"] = s.max_split_size;
  return d;
}

}  // namespace

void init_device_bindings(py::module_& m) {
  m.def("_device_count", [] { return device::device_count(); });
  // Commands queued on a device's stream that have not run yet (backpressure tests).
  m.def("_stream_backlog", [](int d) {
    int dev = index(d);
    uint64_t q = runtime::stream::queued(dev), lo = 0;
    while (lo < q && !runtime::stream::done(dev, q - lo)) ++lo;  // done() is monotone in the mark
    return lo;
  });
  m.def("_in_bad_fork", [] { return runtime::stream::in_bad_fork(); });
  m.def("_stream_busy_ns", [](int d) { return runtime::stream::busy_ns(index(d)); });
  m.def("_profiler_available", [] { return profiler_available(); });
  m.def("_current_device", [] { return device::current_device(); });
  m.def("_set_device", [](int d) { device::set_current_device(index(d)); });
  m.def("_exchange_device", [](int d) {
    int old = device::current_device();
    if (d >= 0) device::set_current_device(index(d));
    return old;
  });
  m.def("_device_synchronize", [](int d) {
    c10::DeviceIndex i = index(d);
    py::gil_scoped_release nogil;
    exec::flush_for_wait(i);
    exec::synchronize(i);
  });

  m.def("_memory_stats", &memory_stats, py::arg("device") = -1);
  m.def("_empty_cache", [] { tpu_allocator()->emptyCache(); });
  m.def("_reset_peak_memory_stats", [](int d) { tpu_allocator()->resetPeakStats(index(d)); });
  m.def("_reset_accumulated_memory_stats", [](int d) { tpu_allocator()->resetAccumulatedStats(index(d)); });
  // Total bytes of device memory (env TORCH_TPU_MEMORY_CAPACITY); 0 = unlimited.
  m.def("_memory_capacity", [](int d) { return tpu_allocator()->getMemoryInfo(index(d)).second; });

  // torch.Event.elapsed_time accepts only an exact torch.Event as `other`; this accepts
  // subclasses (torch.tpu.Event).
  m.def("_event_elapsed_time", [](py::handle a, py::handle b) {
    TORCH_CHECK(THPEvent_Check(a.ptr()) && THPEvent_Check(b.ptr()),
                "[event] elapsed_time needs two torch.Event objects; got ", py::str(py::type::handle_of(a)).cast<std::string>(),
                " and ", py::str(py::type::handle_of(b)).cast<std::string>());
    const c10::Event& e1 = reinterpret_cast<THPEvent*>(a.ptr())->event;
    const c10::Event& e2 = reinterpret_cast<THPEvent*>(b.ptr())->event;
    py::gil_scoped_release nogil;
    return e1.elapsedTime(e2);
  });

  // A CPU tensor over the memory of contiguous tpu tensor `t` (same sizes, strides, dtype),
  // on the host runtime only, where tpu memory is host memory: torch_tpu.distributed lets
  // gloo read and write it in place instead of staging copies. It keeps t's storage alive;
  // the caller orders its use against t's stream (synchronize first).
  m.def("_host_alias", [](const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "[host_alias] expected a tpu tensor; got one on ",
                t.device());
    TORCH_CHECK(std::string(runtime::current().name()) == "host",
                "[host_alias] tpu memory is host memory only on the host runtime; got runtime ", runtime::current().name());
    TORCH_CHECK(t.is_contiguous(), "[host_alias] expected a contiguous tensor; got strides ", t.strides());
    c10::Storage keep = t.storage();
    return at::from_blob(
        t.data_ptr(), t.sizes(), t.strides(), [keep](void*) mutable { keep = c10::Storage(); },
        t.options().device(c10::kCPU));
  });

  // The default generator of a device as a torch.Generator (the same object each call).
  m.def("_get_default_generator", [](int d) { return device::default_generator(index(d)); });
}

}  // namespace torch_tpu::python
