// The host Runtime: compile() builds a Plan; run() binds views, gathers non-contiguous
// or hazardous inputs, runs the steps on the calling thread (kernels may fan out with
// OpenMP) and writes outputs. Buffers are 64-byte aligned host memory (the handle is the
// address); transfers are strided copies. Per-run memory is a thread_local arena reused across runs,
// so concurrent runs share nothing mutable and small graphs allocate nothing.
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "base/error.h"
#include "runtime/host/host_runtime.h"
#include "runtime/stream.h"
#include "runtime/host/plan.h"
#include "runtime/runtime.h"

namespace torch_tpu::host {
namespace {

using runtime::View;

// Per-thread run state, grown on demand and reused.
struct RunState {
  AlignedBuffer arena;
  size_t arena_cap = 0;
  std::vector<void*> ptrs;
  std::vector<const void*> ins;
  std::vector<void*> outs;
  std::vector<ByteRange> in_ranges;
  std::vector<char> direct;  // per output: written in place by its producing step
  std::vector<char> taken;   // per value: its memory was redirected to an output

  std::byte* reserve(size_t bytes) {
    if (bytes > arena_cap) {
      arena = aligned_buffer(bytes);
      arena_cap = bytes;
    }
    return arena.get();
  }
};

void check_view(const char* what, size_t i, const View& v, const ir::Node& n) {
  TPU_CHECK(v.dtype == n.dtype, "[host run] ", what, " ", i, " dtype mismatch; got ",
            ir::dtype_name(v.dtype), ", expected ", ir::dtype_name(n.dtype));
  TPU_CHECK(v.shape == n.shape, "[host run] ", what, " ", i, " shape mismatch; got ",
            ir::shape_str(v.shape), ", expected ", ir::shape_str(n.shape));
  TPU_CHECK(v.strides.empty() || v.strides.size() == v.shape.size(), "[host run] ", what, " ", i,
            " strides rank mismatch; got ", v.strides.size(), ", expected ", v.shape.size());
  TPU_CHECK(address(v) != nullptr || ir::numel(v.shape) == 0, "[host run] ", what, " ", i,
            " has no data");
}

// Copies between a contiguous buffer and a strided view (either direction).
void copy_view(const View& v, void* contiguous, bool to_view) {
  int64_t dense[kMaxRank];
  TPU_CHECK(v.shape.size() <= static_cast<size_t>(kMaxRank), "[host run] rank too large; got ",
            v.shape.size(), ", expected <= ", kMaxRank);
  int64_t acc = 1;
  for (size_t i = v.shape.size(); i-- > 0;) {
    dense[i] = acc;
    acc *= v.shape[i];
  }
  const int64_t* vs = v.strides.empty() ? dense : v.strides.data();
  size_t elem = ir::dtype_size(v.dtype);
  if (to_view)
    run_copy(make_copy_plan(v.shape, vs, dense), address(v), contiguous, elem);
  else
    run_copy(make_copy_plan(v.shape, dense, vs), contiguous, address(v), elem);
}

// TORCH_TPU_HOST_PROFILE=1: every step's wall time, summed per kind of step (op name, fused
// loop size, dot shape), printed to stderr at exit, most costly first. A diagnostic for
// finding what a compiled graph or a fused window spends its time on (docs/decisions/host-execution.md).
// =2 also lists the ops of each fused loop.
int step_profile_level() {
  static const int level = [] {
    const char* v = std::getenv("TORCH_TPU_HOST_PROFILE");
    return v && *v ? std::atoi(v) : 0;
  }();
  return level;
}
bool step_profile_on() { return step_profile_level() > 0; }

struct StepProfile {
  std::mutex mu;
  std::map<std::string, std::pair<double, int64_t>> by_kind;  // seconds, count
  ~StepProfile() {
    std::vector<std::pair<std::string, std::pair<double, int64_t>>> v(by_kind.begin(), by_kind.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double total = 0;
    for (const auto& e : v) total += e.second.first;
    std::fprintf(stderr, "[host profile] %.3f s in steps; by kind (ms total, calls, %%):\n", total);
    for (size_t i = 0; i < v.size() && i < (step_profile_level() > 2 ? v.size() : 40); ++i)
      std::fprintf(stderr, "  %9.2f ms %8lld %5.1f%%  %s\n", v[i].second.first * 1e3,
                   static_cast<long long>(v[i].second.second), 100.0 * v[i].second.first / std::max(total, 1e-12),
                   v[i].first.c_str());
  }
};

StepProfile& step_profile() {
  static StepProfile prof;
  return prof;
}

std::string step_kind(const Step& s) {
  std::ostringstream os;
  if (s.chain) {
    os << "row chain of " << s.results.size() << " result(s)";
    if (step_profile_level() > 1) os << " {" << fused_members(s) << "}";
  } else if (s.fused) {
    os << "fused loop of " << s.results.size() << " result(s) ending in " << ir::op_info(s.n->op).name;
    if (step_profile_level() > 1) os << " {" << fused_members(s) << "}";
  } else {
    os << ir::op_info(s.n->op).name;
    if (s.n->op == ir::OpCode::Dot) os << " B,M,K,N=" << s.i0 << "," << s.i1 << "," << s.i2 << "," << s.i3;
  }
  os << " " << ir::dtype_name(s.n->dtype) << "[";
  for (size_t i = 0; i < s.n->shape.size(); ++i) os << (i ? "," : "") << s.n->shape[i];
  os << "]";
  return os.str();
}

void profile_add(const std::string& kind, std::chrono::steady_clock::duration d) {
  StepProfile& p = step_profile();
  std::lock_guard<std::mutex> lk(p.mu);
  auto& e = p.by_kind[kind];
  e.first += std::chrono::duration<double>(d).count();
  e.second += 1;
}
void step_profile_add(const Step& s, std::chrono::steady_clock::duration d) { profile_add(step_kind(s), d); }

// The profile's name of a copy around the steps: a strided input gathered into the arena, or
// a result copied into an output it could not be written to directly.
std::string copy_kind(const char* what, const View& v) {
  std::ostringstream os;
  os << what << " " << ir::dtype_name(v.dtype) << "[";
  for (size_t i = 0; i < v.shape.size(); ++i) os << (i ? "," : "") << v.shape[i];
  os << "]";
  return os.str();
}

class HostExecutable final : public runtime::Executable {
 public:
  explicit HostExecutable(std::unique_ptr<Plan> plan) : p_(std::move(plan)) {}

  void run(const std::vector<View>& inputs, const std::vector<View>& outputs) override {
    const Plan& p = *p_;
    const auto& nodes = p.graph.nodes();
    const auto& outs = p.graph.outputs();
    TPU_CHECK(inputs.size() == static_cast<size_t>(p.graph.num_params()),
              "[host run] wrong number of inputs; got ", inputs.size(), ", expected ",
              p.graph.num_params());
    TPU_CHECK(outputs.size() == outs.size(), "[host run] wrong number of outputs; got ",
              outputs.size(), ", expected ", outs.size());
    for (size_t i = 0; i < outputs.size(); ++i) check_view("output", i, outputs[i], nodes[outs[i].id]);

    thread_local RunState st;
    std::byte* arena = st.reserve(static_cast<size_t>(p.arena_bytes));
    st.ptrs.resize(nodes.size());
    st.ins.resize(p.max_operands + 1);
    st.outs.resize(p.max_results);
    st.direct.assign(outputs.size(), 0);
    st.taken.assign(nodes.size(), 0);
    st.in_ranges.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const View& v = inputs[i];
      st.in_ranges[i] = byte_range(address(v), v.shape, v.strides, ir::dtype_size(v.dtype));
    }
    auto overlaps_input = [&](const ByteRange& r) {
      for (const ByteRange& q : st.in_ranges)
        if (r.overlaps(q)) return true;
      return false;
    };

    // Bind parameters; gather when strided, or when an output passes it through and some
    // output overlaps it (the final copies must read it before anything is written).
    for (size_t k = 0; k < inputs.size(); ++k) {
      int v = p.param_value[k];
      if (v < 0) continue;
      const View& in = inputs[k];
      check_view("input", k, in, nodes[v]);
      bool gather = !in.contiguous();
      if (!gather && p.param_read_at_end[k])
        for (const View& o : outputs)
          gather |= byte_range(address(o), o.shape, o.strides, ir::dtype_size(o.dtype))
                        .overlaps(st.in_ranges[k]);
      if (gather) {
        void* dst = arena + p.slots[v].offset;
        auto t0 = std::chrono::steady_clock::now();
        copy_view(in, dst, /*to_view=*/false);
        if (step_profile_on()) profile_add(copy_kind("input gathered", in), std::chrono::steady_clock::now() - t0);
        st.ptrs[v] = dst;
      } else {
        st.ptrs[v] = address(in);
      }
    }
    for (size_t v = 0; v < nodes.size(); ++v) {
      const ValueSlot& s = p.slots[v];
      if (s.where == Where::kArena) st.ptrs[v] = arena + s.offset;
      else if (s.where == Where::kConst) st.ptrs[v] = const_cast<void*>(s.data);
    }
    // Let the producing step write straight into a contiguous output that no input overlaps,
    // or that is exactly an input the plan lets that step overwrite (an in-place op: each
    // element read before it is written; otherwise the step writes the arena and a copy
    // follows).
    for (size_t i = 0; i < outputs.size(); ++i) {
      int r = p.out_root[i];
      const View& o = outputs[i];
      if (p.slots[r].where != Where::kArena || st.taken[r] || !o.contiguous() ||
          ir::numel(o.shape) == 0)
        continue;
      ByteRange orange = byte_range(address(o), o.shape, o.strides, ir::dtype_size(o.dtype));
      if (overlaps_input(orange)) {
        int over = -1, count = 0;
        for (size_t k = 0; k < inputs.size(); ++k)
          if (orange.overlaps(st.in_ranges[k])) over = static_cast<int>(k), ++count;
        const std::vector<int>& ok = p.out_overwrites[i];
        // (ok holds live parameters only; one bound by a gather reads its arena copy anyway)
        bool same = count == 1 && std::find(ok.begin(), ok.end(), over) != ok.end() && inputs[over].contiguous() &&
                    st.in_ranges[over].lo == orange.lo && st.in_ranges[over].hi == orange.hi &&
                    ir::dtype_size(inputs[over].dtype) == ir::dtype_size(o.dtype);
        if (!same) continue;
      }
      st.taken[r] = 1;
      st.direct[i] = 1;
      st.ptrs[r] = address(o);
    }
    for (size_t v = 0; v < nodes.size(); ++v)
      if (p.slots[v].where == Where::kAlias) st.ptrs[v] = st.ptrs[p.slots[v].root];

    const bool prof = step_profile_on();
    for (size_t k = 0; k < p.steps.size(); ++k) {
      const Step& s = p.steps[k];
      for (size_t j = 0; j < s.operands.size(); ++j) st.ins[j] = st.ptrs[s.operands[j]];
      for (size_t j = 0; j < s.results.size(); ++j) st.outs[j] = st.ptrs[s.results[j]];
      void* scratch = s.scratch_bytes > 0 ? arena + p.scratch_offset[k] : nullptr;
      if (!prof) {
        s.fn(KernelArgs{s, st.ins.data(), st.ptrs[s.node], scratch, st.outs.data()});
        continue;
      }
      auto t0 = std::chrono::steady_clock::now();
      s.fn(KernelArgs{s, st.ins.data(), st.ptrs[s.node], scratch, st.outs.data()});
      step_profile_add(s, std::chrono::steady_clock::now() - t0);
    }

    for (size_t i = 0; i < outputs.size(); ++i)
      if (!st.direct[i] && ir::numel(outputs[i].shape) > 0) {
        auto t0 = std::chrono::steady_clock::now();
        copy_view(outputs[i], st.ptrs[p.out_root[i]], /*to_view=*/true);
        if (prof) profile_add(copy_kind("output copied", outputs[i]), std::chrono::steady_clock::now() - t0);
      }
  }

 private:
  std::unique_ptr<Plan> p_;
};

}  // namespace

int loop_threads() {
  static const int cores = [] {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : omp_get_num_procs();
  }();
  int n = omp_get_max_threads();
  if (runtime::stream::worker_beside_running_user()) n = std::min(n, std::max(1, cores - 1));
  return n;
}

std::shared_ptr<runtime::Executable> compile_host(const ir::Graph& graph, const PlanOptions& opt) {
  return std::make_shared<HostExecutable>(make_plan(graph, opt));
}

void* address(const runtime::View& v) {
  if (v.host) return const_cast<std::byte*>(v.host);
  if (!v.buffer) return nullptr;
  return reinterpret_cast<std::byte*>(v.buffer) + v.offset * static_cast<int64_t>(ir::dtype_size(v.dtype));
}

namespace {

constexpr size_t kAlign = 64;

class HostRuntime final : public runtime::Runtime {
 public:
  const char* name() const override { return "host"; }
  std::shared_ptr<runtime::Executable> compile(const ir::Graph& graph) override {
    return std::make_shared<HostExecutable>(make_plan(graph));
  }
  // Size classes (the caching allocator pools under them): multiples of 512 B up to 1 MiB,
  // then 4 classes per power of two.
  size_t allocation_size(size_t n) const override {
    constexpr size_t kSmall = 1 << 20;
    if (n <= kSmall) return (n + 511) & ~size_t(511);
    size_t p = size_t(1) << (63 - __builtin_clzll(n - 1));  // largest power of two < n
    size_t step = p / 4;
    return (n + step - 1) / step * step;
  }
  runtime::Buffer* allocate(int, size_t nbytes) override {
    size_t n = (std::max<size_t>(nbytes, 1) + kAlign - 1) / kAlign * kAlign;
    return as_buffer(std::aligned_alloc(kAlign, n));
  }
  void deallocate(runtime::Buffer* b) override { std::free(b); }
  void write(const View& dst, const std::byte* src) override {
    TPU_CHECK(dst.buffer && !dst.host, "[host write] destination is not a device buffer");
    if (ir::numel(dst.shape) > 0) copy_view(dst, const_cast<std::byte*>(src), /*to_view=*/true);
  }
  void read(const View& src, std::byte* dst) override {
    if (ir::numel(src.shape) > 0) copy_view(src, dst, /*to_view=*/false);
  }
  void copy(runtime::Buffer* dst, size_t dst_off, runtime::Buffer* src, size_t src_off, size_t nbytes) override {
    if (nbytes) std::memmove(reinterpret_cast<std::byte*>(dst) + dst_off, reinterpret_cast<std::byte*>(src) + src_off, nbytes);
  }
};

}  // namespace
}  // namespace torch_tpu::host

namespace torch_tpu::runtime {
Runtime& host_runtime() {
  static host::HostRuntime rt;
  return rt;
}
}  // namespace torch_tpu::runtime
