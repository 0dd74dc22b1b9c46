// Python bindings for execution: eager modes, synchronization, the CPU-fallback switch,
// matmul precision, the compile cache and metrics.
#include <pybind11/stl.h>

#include "base/error.h"
#include "exec/stream.h"
#include "exec/window.h"
#include "ir/passes/fuse.h"
#include <torch/csrc/utils/pybind.h>
#include "lowering/from_aten/fallback.h"
#include "lowering/from_aten/fast_path.h"
#include "lowering/from_aten/lower.h"
#include "lowering/from_aten/transfer.h"
#include "python/bindings.h"
#include "runtime/compile_cache.h"
#include "runtime/host/gemm.h"
#include "runtime/pjrt/disk_cache.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace torch_tpu::python {
namespace {
struct ProgramHandle {  // a complete type for pybind11 around the opaque exec::Program
  std::shared_ptr<exec::Program> p;
};
}  // namespace

void init_exec_bindings(py::module_& m) {
  m.def("_get_eager_mode", [] { return static_cast<int>(exec::mode()); });
  m.def("_set_eager_mode", [](int v) { exec::set_global_mode(static_cast<exec::Mode>(v)); });
  m.def("_push_thread_eager_mode", [](int v) { exec::push_thread_mode(static_cast<exec::Mode>(v)); });
  m.def("_pop_thread_eager_mode", [] { exec::pop_thread_mode(); });
  m.def("_synchronize_all", [] {
    py::gil_scoped_release nogil;
    exec::synchronize_all();
  });
  m.def("_synchronize", [](int dev) {
    py::gil_scoped_release nogil;
    exec::synchronize(dev);
  });
  m.def("_set_cpu_fallback", [](bool on) { return lowering::set_cpu_fallback_enabled(on); });
  m.def("_get_matmul_precision", [] { return static_cast<int>(lowering::matmul_precision()); });
  m.def("_set_matmul_precision", [](int p) {
    TORCH_CHECK(p >= 0 && p <= 2, "[precision] got ", p, ", expected 0 (DEFAULT), 1 (HIGH) or 2 (HIGHEST)");
    lowering::set_matmul_precision(static_cast<ir::Precision>(p));
  });
  m.def("_get_cache_stats", [] {
    auto s = runtime::CompileCache::global().stats();
    py::dict d;
    d["num_cache_reqs"] = s.num_cache_reqs;
    d["num_cache_hits"] = s.num_cache_hits;
    py::list entries;
    for (auto& e : s.per_entry_stats) {
      py::dict x;
      x["key"] = e.key;
      x["compilation_duration"] = e.compilation_duration_us;
      x["read_count"] = e.read_count;
      x["name"] = e.name;
      x["signature"] = e.signature;
      x["miss_index"] = e.miss_index;
      entries.append(x);
    }
    d["per_entry_stats"] = entries;
    // The pjrt runtime's persistent executable cache (runtime/pjrt/disk_cache.h).
    pjrt::DiskCacheStats disk = pjrt::DiskCache::stats();
    d["num_disk_hits"] = disk.hits;
    d["num_disk_misses"] = disk.misses;
    d["num_disk_writes"] = disk.writes;
    d["num_disk_errors"] = disk.errors;
    return d;
  });
  m.def("_clear_cache", [] { runtime::CompileCache::global().clear(); });
  m.def("_compile_cache_capacity", [] { return runtime::CompileCache::global().capacity(); });
  m.def("_set_compile_cache_capacity", [](size_t n) { runtime::CompileCache::global().set_capacity(n); });
  // Whether host DEFAULT matmuls run on a native bf16 GEMM (AVX512-BF16 / AMX), which treats
  // subnormal bf16 operands as zero, as a TPU's matrix unit does.
  m.def("_host_bf16_gemm", [] { return host::gemm_has_bf16(); });
  m.def("_runtime_name", [] { return std::string(runtime::current().name()); });
  m.def("_select_runtime", [](const std::string& name) { runtime::select(name); });
  m.def("_metrics", [] {
    py::dict d;
    auto c = exec::counters();
    py::dict ops;
    ops["strict"] = c.strict_ops;
    ops["debug"] = c.debug_ops;
    ops["fused"] = c.fused_ops;
    d["ops_executed"] = ops;
    py::dict fb;
    for (auto& [k, v] : lowering::fallback_counts()) fb[py::str(k)] = v;
    d["fallbacks"] = fb;
    auto t = lowering::transfer::counters();
    py::dict tr;
    tr["host_to_device_bytes"] = t.h2d_bytes;
    tr["device_to_host_bytes"] = t.d2h_bytes;
    tr["device_to_device_bytes"] = t.d2d_bytes;
    d["transfers"] = tr;
    auto ws = exec::window_stats();
    py::dict fw;
    fw["deferred_ops"] = ws.deferred_ops;
    fw["flushes"] = ws.flushes;
    fw["outputs_never_written"] = ws.skipped_outputs;
    d["fused"] = fw;
    auto s = runtime::CompileCache::global().stats();
    py::dict cc;
    cc["requests"] = s.num_cache_reqs;
    cc["hits"] = s.num_cache_hits;
    cc["compilations"] = static_cast<int64_t>(s.per_entry_stats.size());
    int64_t us = 0;
    for (auto& e : s.per_entry_stats) us += e.compilation_duration_us;
    cc["compile_time_us"] = us;
    d["compile_cache"] = cc;
    auto fp = lowering::fast::counters();
    py::dict fpd;
    fpd["entries"] = fp.entries;
    fpd["all_value_entries"] = fp.generic_entries;
    d["fast_path"] = fpd;
    return d;
  });
  // For tests: enqueues a command that fails on the worker, as a broken kernel would.
  m.def("_inject_async_failure", [] {
    exec::enqueue(0, "test::inject_failure", [] { throw Error("injected failure"); });
  });
  m.def("_pending_stablehlo", [](int dev, std::vector<at::Tensor> ts) { return exec::pending_stablehlo(dev, ts); });
  m.def("_pending_cluster_count", [](int dev, std::vector<at::Tensor> ts) {
    return ir::cluster_count(exec::pending_graph(dev, ts));
  });
  m.def("_pending_size", [](int dev) { return exec::pending_size(dev); });
  m.def("_window_stats", [] {
    auto s = exec::window_stats();
    py::dict d;
    d["deferred_ops"] = s.deferred_ops;
    d["flushes"] = s.flushes;
    d["skipped_outputs"] = s.skipped_outputs;
    d["last_flush_reason"] = s.last_flush_reason;
    return d;
  });
  m.def("_flush", [](int dev) { exec::flush(dev); });
  // torch.compile capture (torch_tpu/_internal/compile.py).
  py::class_<ProgramHandle>(m, "_Program");
  m.def("_capture_begin", [](int dev, const std::vector<at::Tensor>& ins) { exec::begin_capture(dev, ins); });
  m.def("_capture_end", [](int dev, const std::vector<at::Tensor>& ins, const std::vector<at::Tensor>& outs) -> py::tuple {
    std::string why;
    auto p = exec::end_capture(dev, ins, outs, &why);
    if (!p) return py::make_tuple(py::none(), why);
    return py::make_tuple(ProgramHandle{std::move(p)}, std::string());
  });
  m.def("_program_run", [](const ProgramHandle& h, const std::vector<at::Tensor>& ins) { return exec::run_program(*h.p, ins); });
  m.def("_program_matches", [](const ProgramHandle& h, const std::vector<at::Tensor>& ins) { return exec::program_matches(*h.p, ins); });
  m.def("_program_stablehlo", [](const ProgramHandle& h) { return exec::program_stablehlo(*h.p); });
  m.def("_program_nodes", [](const ProgramHandle& h) { return exec::program_nodes(*h.p); });
  m.def("_reset_fallback_counts", [] { lowering::reset_fallback_counts(); });
}

}  // namespace torch_tpu::python
