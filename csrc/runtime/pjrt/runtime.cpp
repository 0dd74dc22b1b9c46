// The pjrt Runtime: IR graphs printed as StableHLO, compiled and run by a PJRT plugin (the
// pinned XLA CPU plugin in CI, libtpu on a TPU VM, the XLA CUDA plugin on a GPU).
//
// A Buffer is a Slot: the storage's current value as one immutable flat PJRT array (or none
// yet: reads see zeros). A graph's strided views of storages are legalized (ir/passes/
// legalize.h) into reads and writes of whole storages, once per layout signature; running it
// replaces the written slots' values with the outputs. Everything runs on the device stream's
// worker (runtime/stream.h), in order, so a slot's value is always the one its queued
// writers left. docs/decisions/runtime-seam.md.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "ir/passes/decompose.h"
#include "ir/passes/decompose_linalg.h"
#include "ir/passes/legalize.h"
#include "ir/passes/views.h"
#include "runtime/pjrt/client.h"
#include "runtime/pjrt/disk_cache.h"
#include "runtime/runtime.h"

namespace torch_tpu::pjrt {
namespace {

using runtime::View;

// A storage: `nbytes` of device memory holding, once written, a flat array of `dtype`.
// 64-byte aligned, so a storage's data pointer (the slot's address) looks like device memory.
struct alignas(64) Slot {
  int dev = 0;
  size_t nbytes = 0;
  std::shared_ptr<DeviceBuffer> value;  // immutable once made; shared by whole-storage copies
  ir::DType dtype = ir::DType::U8;
};

Slot& slot(runtime::Buffer* b) { return *reinterpret_cast<Slot*>(b); }

// Copies the elements of a strided view between `storage` (bytes of the whole storage) and a
// dense row-major `dense` buffer. Only for the slow paths (partial host transfers).
void strided_copy(std::byte* storage, std::byte* dense, const View& v, bool to_storage) {
  size_t elem = ir::dtype_size(v.dtype);
  std::vector<int64_t> st = v.strides.empty() ? ir::row_major_strides(v.shape) : v.strides;
  int64_t n = ir::numel(v.shape);
  std::vector<int64_t> idx(v.shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = v.offset;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * st[d];
    std::byte* s = storage + off * static_cast<int64_t>(elem);
    std::byte* d = dense + k * static_cast<int64_t>(elem);
    if (to_storage) std::memcpy(s, d, elem);
    else std::memcpy(d, s, elem);
    for (size_t d2 = idx.size(); d2-- > 0;) {
      if (++idx[d2] < v.shape[d2]) break;
      idx[d2] = 0;
    }
  }
}

class PjrtRuntime;

// One legalized, compiled form of a graph for one layout signature.
struct Variant {
  ir::Legalized legal;
  Executable exe;
};

// The calls of one graph whose views differ at most in where they sit in their storages.
// The first call compiles with its offsets fixed; a call at other offsets compiles once
// more with the views that moved taking their position as a runtime operand
// (StorageView::dynamic_offset), which then serves every offset of those views.
struct Layout {
  std::vector<int64_t> first;  // each view's lowest element at the first call
  std::vector<bool> dynamic;   // views whose offset is an operand of `moving`
  const Variant* moving = nullptr;
};

class PjrtExecutable final : public runtime::Executable {
 public:
  PjrtExecutable(PjrtRuntime& rt, const ir::Graph& g) : rt_(rt), graph_(g) {}
  void run(const std::vector<View>& inputs, const std::vector<View>& outputs) override;

 private:
  const Variant& variant(const std::vector<ir::StorageView>& ins, const std::vector<ir::StorageView>& outs,
                         const std::vector<ir::DType>& storage_dtypes);
  std::unique_ptr<Variant> make_variant(const std::vector<ir::StorageView>& ins,
                                        const std::vector<ir::StorageView>& outs) const;
  PjrtRuntime& rt_;
  ir::Graph graph_;
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<Variant>> variants_;  // by exact signature
  std::unordered_map<std::string, Layout> layouts_;                     // by offset-free signature
  std::vector<std::unique_ptr<Variant>> moving_;                        // Layout::moving variants
};

class PjrtRuntime final : public runtime::Runtime {
 public:
  PjrtRuntime() {
    std::string path = default_plugin_path();
    TPU_CHECK(!path.empty(), "[pjrt] no PJRT plugin found; got no TORCH_TPU_PJRT_PLUGIN and no installed plugin, "
              "expected a plugin path (TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so: libtpu.so, xla_cuda_plugin.so) "
              "or the XLA CPU plugin installed by tools/pjrt-plugin");
    const Plugin& plugin = Plugin::load(path);
    client_ = Client::create(plugin);
    // The XLA CPU plugin runs an execution XLA's cost model finds not cheap (>= 1000 flops:
    // an 8x8 dot) on its own thread pool, and this runtime's worker then waits for it: two
    // thread switches per op (an 8x8 matmul ~28 us instead of ~6 us on 2 cores). The stream's
    // worker already hides execution from the caller, so that client runs executions on the
    // calling thread ("asynchronous" = false, a create option only that plugin knows; a
    // build that refuses it keeps the default client).
    if (client_->platform_name() == "cpu") {
      try {
        client_ = Client::create(plugin, {{"asynchronous", false}});
      } catch (const Error&) {
      }
    }
    if (const char* d = std::getenv("TORCH_TPU_DUMP")) dump_dir_ = d;
    const Plugin& p = client_->plugin();
    identity_ = "platform=" + client_->platform_name() + " " + client_->platform_version() +
                "\nxla=" + std::to_string(p.xla_version()) + "\napi=" + std::to_string(p.api_major()) + "." +
                std::to_string(p.api_minor()) + "\ndevice=" +
                (client_->devices().empty() ? std::string("none") : client_->devices()[0].kind) + "\n";
  }
  const char* name() const override { return "pjrt"; }
  // LAPACK custom calls become XLA-side computations (ir/passes/decompose_linalg.h) and
  // composite (tpu.*) ops StableHLO (ir/passes/decompose.h) first; layouts are legalized at
  // first run, per layout signature.
  std::shared_ptr<runtime::Executable> compile(const ir::Graph& graph) override {
    graph.verify();
    if (!ir::has_composites(graph) && !ir::has_lapack_calls(graph))
      return std::make_shared<PjrtExecutable>(*this, graph);
    std::vector<std::string> bad = ir::undecomposable_ops(graph);
    TPU_CHECK(bad.empty(), "[pjrt] an op has no StableHLO form; got ", bad.empty() ? "" : bad[0],
              ", expected ops the plugin can compile");
    ir::Graph g = ir::has_lapack_calls(graph) ? ir::decompose_linalg(graph) : graph;
    if (ir::has_composites(g)) g = ir::decompose_composites(g);
    return std::make_shared<PjrtExecutable>(*this, g);
  }
  // XLA:CPU maps each compiled program's code into this process (a few memory maps per
  // kernel), and the kernel caps a process's maps (vm.max_map_count, 65530 by default): past
  // the cap mmap fails and the plugin aborts the process (seen after ~3,000 tests in one
  // process). Every 16th compile counts the maps; past half the cap the compile cache drops
  // its least recently used half, whose programs unmap once no launch holds them.
  // TORCH_TPU_MAX_MAPS overrides the cap (tests).
  bool executables_crowded() override {
    if (compiles_.fetch_add(1, std::memory_order_relaxed) % 16 != 15) return false;
    return count_maps() > map_cap_ / 2;
  }
  static int64_t count_maps() {
    std::FILE* f = std::fopen("/proc/self/maps", "r");
    if (!f) return 0;
    int64_t lines = 0;
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      for (size_t i = 0; i < n; ++i) lines += buf[i] == '\n';
    std::fclose(f);
    return lines;
  }
  static int64_t map_cap() {
    if (const char* e = std::getenv("TORCH_TPU_MAX_MAPS"); e && std::atoll(e) > 0) return std::atoll(e);
    int64_t cap = 0;
    if (std::ifstream in("/proc/sys/vm/max_map_count"); in >> cap && cap > 0) return cap;
    return 65530;
  }

  runtime::Buffer* allocate(int dev, size_t nbytes) override {
    check_device(dev);
    auto* s = new Slot();
    s->dev = dev;
    s->nbytes = nbytes;
    return reinterpret_cast<runtime::Buffer*>(s);
  }
  void deallocate(runtime::Buffer* b) override { delete &slot(b); }

  void write(const View& dst, const std::byte* src) override {
    Slot& s = slot(dst.buffer);
    if (whole(dst, s)) {
      s.value = upload(s.dev, src, dst.dtype, {ir::numel(dst.shape)});
      s.dtype = dst.dtype;
      return;
    }
    std::vector<std::byte> bytes = download(s);
    strided_copy(bytes.data(), const_cast<std::byte*>(src), dst, /*to_storage=*/true);
    replace(s, bytes, dst.dtype);
  }
  void read(const View& src, std::byte* dst) override {
    Slot& s = slot(src.buffer);
    std::vector<std::byte> bytes = download(s);
    strided_copy(bytes.data(), dst, src, /*to_storage=*/false);
  }
  void copy(runtime::Buffer* dst, size_t dst_off, runtime::Buffer* src, size_t src_off, size_t nbytes) override {
    Slot &d = slot(dst), &s = slot(src);
    if (dst_off == 0 && src_off == 0 && nbytes == d.nbytes && nbytes == s.nbytes) {
      d.value = s.value;  // values are immutable: sharing is a copy
      d.dtype = s.dtype;
      return;
    }
    std::vector<std::byte> from = download(s), to = download(d);
    std::memcpy(to.data() + dst_off, from.data() + src_off, nbytes);
    replace(d, to, d.value ? d.dtype : ir::DType::U8);
  }

  // The slot's value as a flat [nbytes / size(dt)] array of `dt` (zeros when never written;
  // reinterpreted through the host when it was written with another dtype).
  DeviceBuffer* value_as(Slot& s, ir::DType dt) {
    if (!s.value || s.dtype != dt) {
      std::vector<std::byte> bytes = download(s);
      replace(s, bytes, dt);
    }
    return s.value.get();
  }
  std::shared_ptr<DeviceBuffer> upload(int dev, const void* data, ir::DType dt, const std::vector<int64_t>& dims) {
    return std::make_shared<DeviceBuffer>(client_->to_device(data, dt, dims, dev));
  }
  // Compiles `text`, or loads the executable a previous process compiled from the same text
  // with the same plugin (disk_cache.h). TORCH_TPU_DUMP=dir writes the module first.
  Executable compile_text(const std::string& text) {
    CompileOptions opts{.portable = true};
    std::string dumped;
    if (!dump_dir_.empty()) {
      dumped = dump_dir_ + "/module_" + std::to_string(std::hash<std::string>()(text)) + ".mlir";
      std::error_code ec;
      std::filesystem::create_directories(dump_dir_, ec);  // a failed write only loses the dump
      std::ofstream(dumped) << text;
    }
    std::string key = identity_ + "options=" + opts.bytes() + "\n" + text;
    if (std::optional<std::string> bytes = disk_.load(key)) {
      try {
        return client_->deserialize(*bytes);
      } catch (const Error&) {
        DiskCache::count_error();  // stale or damaged entry: compile and replace it
      }
    }
    Executable exe;
    try {
      exe = client_->compile(text, opts);
    } catch (const Error& e) {
      if (dumped.empty()) throw;
      throw Error(std::string(e.what()) + " (module dumped to " + dumped + ")");
    }
    if (disk_.enabled()) {
      try {
        disk_.store(key, exe.serialize());
      } catch (const Error&) {
        DiskCache::count_error();  // a plugin that cannot serialize: nothing to keep
      }
    }
    return exe;
  }
  void check_device(int dev) const {
    TPU_CHECK(dev >= 0 && dev < static_cast<int>(client_->devices().size()), "[pjrt] device index out of range; got ",
              dev, ", expected 0..", client_->devices().size() - 1, " (the plugin's devices)");
  }

 private:
  static bool whole(const View& v, const Slot& s) {
    return v.offset == 0 && (v.strides.empty() || v.strides == ir::row_major_strides(v.shape)) &&
           ir::numel(v.shape) * static_cast<int64_t>(ir::dtype_size(v.dtype)) == static_cast<int64_t>(s.nbytes);
  }
  std::vector<std::byte> download(const Slot& s) {
    std::vector<std::byte> bytes(s.nbytes);
    if (s.value) {
      size_t n = s.value->host_size();
      std::vector<std::byte> tmp(n);
      s.value->to_host(tmp.data(), n);
      std::memcpy(bytes.data(), tmp.data(), std::min(n, s.nbytes));
    }
    return bytes;
  }
  void replace(Slot& s, const std::vector<std::byte>& bytes, ir::DType dt) {
    int64_t n = static_cast<int64_t>(s.nbytes / ir::dtype_size(dt));
    s.value = upload(s.dev, bytes.data(), dt, {n});
    s.dtype = dt;
  }

  std::shared_ptr<Client> client_;
  std::atomic<int64_t> compiles_{0};
  const int64_t map_cap_ = map_cap();
  std::string dump_dir_;
  std::string identity_;  // the plugin's part of every disk cache key
  DiskCache disk_{DiskCache::default_dir()};
};

// The lowest element a bound view touches (0 for unbound or empty views).
int64_t lowest(const ir::StorageView& v) {
  if (v.storage < 0 || ir::numel(v.sizes) == 0) return 0;
  return ir::lowest_element(v);
}

// The layout signature of a call: which views share a storage, and every view's layout;
// with `placed` false, views are keyed by their shape and strides only (not where they sit).
std::string signature(const std::vector<ir::StorageView>& ins, const std::vector<ir::StorageView>& outs,
                      const std::vector<ir::DType>& dts, bool placed) {
  std::string k;
  auto put = [&](int64_t x) { k.append(reinterpret_cast<const char*>(&x), sizeof x); };
  for (const auto* list : {&ins, &outs}) {
    put(-7);
    for (const ir::StorageView& v : *list) {
      put(v.storage);
      if (v.storage < 0) continue;
      put(v.storage_numel);
      put(static_cast<int64_t>(dts[v.storage]));
      put(placed ? v.offset : v.offset - lowest(v));
      put(static_cast<int64_t>(v.sizes.size()));
      for (int64_t d : v.sizes) put(d);
      for (int64_t d : v.strides) put(d);
    }
  }
  return k;
}

std::unique_ptr<Variant> PjrtExecutable::make_variant(const std::vector<ir::StorageView>& ins,
                                                      const std::vector<ir::StorageView>& outs) const {
  auto v = std::make_unique<Variant>();
  v->legal = ir::legalize(graph_, ins, outs);
  // A storage both read and written donates its old array to its next value (in place on
  // the device); run() vetoes it per call where the old array is still shared.
  std::vector<int> aliases(v->legal.graph.num_params(), -1);
  for (size_t j = 0; j < v->legal.donated.size(); ++j)
    if (v->legal.donated[j] >= 0) aliases[v->legal.donated[j]] = static_cast<int>(j);
  v->exe = rt_.compile_text(v->legal.graph.to_stablehlo(aliases));
  return v;
}

const Variant& PjrtExecutable::variant(const std::vector<ir::StorageView>& ins, const std::vector<ir::StorageView>& outs,
                                       const std::vector<ir::DType>& dts) {
  std::string key = signature(ins, outs, dts, /*placed=*/true);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = variants_.find(key);
  if (it != variants_.end()) return *it->second;
  std::vector<int64_t> low;
  for (const auto* list : {&ins, &outs})
    for (const ir::StorageView& v : *list) low.push_back(lowest(v));
  auto [lit, fresh] = layouts_.try_emplace(signature(ins, outs, dts, /*placed=*/false));
  Layout& layout = lit->second;
  if (fresh) {  // the first call of this layout: offsets fixed
    layout.first = low;
    layout.dynamic.assign(low.size(), false);
    return *variants_.emplace(std::move(key), make_variant(ins, outs)).first->second;
  }
  bool covered = layout.moving != nullptr;
  std::vector<bool> dyn = layout.dynamic;
  for (size_t i = 0; i < low.size(); ++i)
    if (low[i] != layout.first[i] && !dyn[i]) dyn[i] = true, covered = false;
  if (covered) return *layout.moving;
  std::vector<ir::StorageView> dins = ins, douts = outs;
  for (size_t i = 0; i < dyn.size(); ++i)
    (i < ins.size() ? dins[i] : douts[i - ins.size()]).dynamic_offset = dyn[i];
  moving_.push_back(make_variant(dins, douts));
  layout.dynamic = std::move(dyn);
  layout.moving = moving_.back().get();
  return *layout.moving;
}

void PjrtExecutable::run(const std::vector<View>& inputs, const std::vector<View>& outputs) {
  // Storages in order of first appearance; each view as a StorageView of its storage.
  std::vector<Slot*> slots;
  std::vector<ir::DType> dts;
  auto bind = [&](const View& v) {
    ir::StorageView sv;
    if (!v.buffer) return sv;  // a host operand or an empty view: passed through
    Slot* s = &slot(v.buffer);
    size_t k = 0;
    while (k < slots.size() && slots[k] != s) ++k;
    if (k == slots.size()) {
      slots.push_back(s);
      dts.push_back(v.dtype);
    }
    TPU_CHECK(dts[k] == v.dtype, "[pjrt run] one storage viewed with two dtypes in one graph; got ",
              ir::dtype_name(v.dtype), ", expected ", ir::dtype_name(dts[k]));
    sv.storage = static_cast<int>(k);
    sv.storage_numel = static_cast<int64_t>(s->nbytes / ir::dtype_size(v.dtype));
    sv.sizes = v.shape;
    sv.strides = v.strides;
    sv.offset = v.offset;
    return sv;
  };
  std::vector<ir::StorageView> ins, outs;
  for (const View& v : inputs) ins.push_back(bind(v));
  for (const View& v : outputs) outs.push_back(bind(v));
  const Variant& var = variant(ins, outs, dts);
  int dev = slots.empty() ? 0 : slots[0]->dev;

  std::vector<std::shared_ptr<DeviceBuffer>> staged;  // host operands uploaded for this call
  const ir::Graph& lg = var.legal.graph;
  std::vector<DeviceBuffer*> args(lg.num_params());
  ExecuteOptions opts{.device = dev};
  for (const ir::Node& n : lg.nodes()) {
    if (!n.is_param) continue;
    int p = n.param_index;
    int k = var.legal.param_storage[p];
    if (int i = var.legal.param_view[p]; i >= 0) {  // where a moving view sits in this call
      int64_t at = lowest(i < static_cast<int>(ins.size()) ? ins[i] : outs[i - ins.size()]);
      staged.push_back(rt_.upload(dev, &at, ir::DType::I64, {}));
      args[p] = staged.back().get();
    } else if (k >= 0) {
      args[p] = rt_.value_as(*slots[k], n.dtype);
      // An array another storage shares (a whole-storage copy) must survive this run.
      if (slots[k]->value.use_count() > 1) opts.non_donatable.push_back(p);
    } else {
      const View& v = inputs[var.legal.param_origin[p]];
      std::vector<std::byte> zeros;
      const void* data = v.host;
      if (!data) {  // an empty view: no bytes to send
        zeros.resize(ir::dtype_size(n.dtype));
        data = zeros.data();
      }
      staged.push_back(rt_.upload(dev, data, n.dtype, n.shape));
      args[p] = staged.back().get();
    }
  }
  ExecuteResult r = var.exe.execute(args, opts);
  r.done.await();  // errors surface in this command, naming the op
  for (size_t j = 0; j < r.outputs.size(); ++j) {
    int k = var.legal.output_storage[j];
    if (k < 0) continue;  // an empty output: nothing to keep
    slots[k]->value = std::make_shared<DeviceBuffer>(std::move(r.outputs[j]));
    slots[k]->dtype = dts[k];
  }
}

}  // namespace
}  // namespace torch_tpu::pjrt

namespace torch_tpu::runtime {
Runtime& pjrt_runtime() {
  static pjrt::PjrtRuntime* rt = new pjrt::PjrtRuntime();  // leaked: outlives stream workers
  return *rt;
}
}  // namespace torch_tpu::runtime
