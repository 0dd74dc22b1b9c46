// Fast path: argument signatures, the per-op entry cache, and replay.
#include "lowering/from_aten/fast_path.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>

#include <ATen/native/Resize.h>

#include "device/device.h"
#include "exec/stream.h"
#include "exec/window.h"
#include "exec/launch.h"
#include "exec/views.h"

namespace torch_tpu::lowering::fast {
namespace {

enum Tag : int64_t { kTensor = 1, kCpuScalar, kUndef, kDouble, kInt, kBool, kIntList, kStr, kNone, kDevice, kBoolList, kDoubleList, kTensorList };

// A tpu tensor's part of the signature: dtype, device, rank and contiguity, sizes (and strides
// when not contiguous).
void add_tpu_tensor(const at::Tensor& t, std::vector<int64_t>& s) {
  s.push_back(kTensor);
  s.push_back(static_cast<int64_t>(t.scalar_type()));
  s.push_back(t.device().index());
  // Contiguity is part of the signature: a lowering may choose its graph by it (linalg
  // factors A^T for a contiguous A, as PyTorch CPU and ATen's backward formulas do).
  bool contiguous = t.is_contiguous();
  s.push_back(t.dim() * 2 + (contiguous ? 1 : 0));
  for (int64_t d : t.sizes()) s.push_back(d);
  // A non-contiguous input's strides too: results take PyTorch's layout for them
  // (Entry::Out::strides), as a pointwise op's result follows a permuted input's. (Lower::in's
  // flat binding of a view without gaps depends on nothing else.)
  if (!contiguous)
    for (int64_t d : t.strides()) s.push_back(d);
}

int64_t bits_of(double d) {
  int64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

// A Scalar argument's or 0-dim CPU tensor's value for the signature's tail.
int64_t value_of(const at::Scalar& v) {
  if (v.isFloatingPoint()) return bits_of(v.toDouble());
  if (v.isBoolean()) return v.toBool();
  return v.toLong();
}

bool add(const c10::IValue& v, bool scalar_arg, std::vector<int64_t>& s, std::vector<int64_t>& tail) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      s.push_back(kUndef);
      return true;
    }
    if (t.is_privateuseone()) {
      add_tpu_tensor(t, s);
      return true;
    }
    if (t.is_cpu() && t.dim() == 0) {
      s.push_back(kCpuScalar);
      s.push_back(static_cast<int64_t>(t.scalar_type()));
      tail.push_back(value_of(t.item()));
      return true;
    }
    return false;
  }
  if (scalar_arg && (v.isDouble() || v.isInt() || v.isBool())) {
    s.push_back(v.isDouble() ? kDouble : v.isInt() ? kInt : kBool);
    // value_of(v.toScalar())'s value, without building a Scalar per op (add's alpha).
    tail.push_back(v.isDouble() ? bits_of(v.toDouble()) : v.isInt() ? v.toInt() : static_cast<int64_t>(v.toBool()));
    return true;
  }
  if (v.isDouble()) { s.push_back(kDouble); s.push_back(bits_of(v.toDouble())); return true; }
  if (v.isInt()) { s.push_back(kInt); s.push_back(v.toInt()); return true; }
  if (v.isBool()) { s.push_back(kBool); s.push_back(v.toBool()); return true; }
  if (v.isNone()) { s.push_back(kNone); return true; }
  if (v.isIntList()) {
    s.push_back(kIntList);
    auto l = v.toIntList();
    s.push_back(static_cast<int64_t>(l.size()));
    for (int64_t x : l) s.push_back(x);
    return true;
  }
  if (v.isBoolList()) {
    s.push_back(kBoolList);
    auto l = v.toBoolList();
    s.push_back(static_cast<int64_t>(l.size()));
    for (bool x : l) s.push_back(x);
    return true;
  }
  if (v.isDoubleList()) {
    s.push_back(kDoubleList);
    auto l = v.toDoubleList();
    s.push_back(static_cast<int64_t>(l.size()));
    for (double x : l) s.push_back(bits_of(x));
    return true;
  }
  if (v.isString()) { s.push_back(kStr); s.push_back(static_cast<int64_t>(std::hash<std::string_view>()(v.toStringView()))); return true; }
  if (v.isDevice()) { s.push_back(kDevice); s.push_back(static_cast<int64_t>(v.toDevice().type())); s.push_back(v.toDevice().index()); return true; }
  if (v.isList()) {  // Tensor[] (cat, stack) and Tensor?[] (index, index_put_): tpu tensors and None
    auto l = v.toListRef();
    s.push_back(kTensorList);
    s.push_back(static_cast<int64_t>(l.size()));
    for (const c10::IValue& e : l) {
      if (e.isNone() || (e.isTensor() && !e.toTensor().defined())) {
        s.push_back(kNone);
      } else if (e.isTensor() && e.toTensor().is_privateuseone()) {
        add_tpu_tensor(e.toTensor(), s);
      } else {
        return false;  // a CPU tensor (a lowering may read it), a list of lists, ...
      }
    }
    return true;
  }
  return false;  // generators, ...
}

bool is_value_arg(const c10::IValue& v, bool scalar_arg) {
  if (v.isTensor()) return v.toTensor().defined() && v.toTensor().is_cpu() && v.toTensor().dim() == 0;
  return scalar_arg && (v.isDouble() || v.isInt() || v.isBool());
}

}  // namespace

bool signature(Args args, const std::vector<bool>& scalar_args, std::vector<int64_t>* sig, size_t* main) {
  thread_local std::vector<int64_t> tail;
  tail.clear();
  sig->clear();
  sig->push_back(static_cast<int64_t>(matmul_precision()));
  sig->push_back(static_cast<int64_t>(at::typeMetaToScalarType(at::get_default_dtype())));
  for (size_t i = 0; i < args.size(); ++i)
    if (!add(args[i], i < scalar_args.size() && scalar_args[i], *sig, tail)) return false;
  // Which arguments are one tensor: a graph recorded for `x * x` binds argument 0 twice and
  // must not replay for `y * x` (the same shapes, two tensors); so for list elements
  // (`cat([x, x])`). Positions count tensor arguments and list elements in order.
  thread_local std::vector<const c10::TensorImpl*> seen;
  seen.clear();
  auto note = [&](const at::Tensor& t) {
    const c10::TensorImpl* ti = t.defined() ? t.unsafeGetTensorImpl() : nullptr;
    if (ti)
      for (size_t j = 0; j < seen.size(); ++j)
        if (seen[j] == ti) {
          sig->push_back(static_cast<int64_t>(seen.size()));
          sig->push_back(static_cast<int64_t>(j));
          break;
        }
    seen.push_back(ti);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isTensor()) {
      note(args[i].toTensor());
    } else if (args[i].isList()) {
      for (const c10::IValue& e : args[i].toListRef()) note(e.isTensor() ? e.toTensor() : at::Tensor());
    } else {
      seen.push_back(nullptr);
    }
  }
  *main = sig->size();
  sig->insert(sig->end(), tail.begin(), tail.end());
  return true;
}

std::vector<int> value_args(Args args, const std::vector<bool>& scalar_args) {
  std::vector<int> r;
  for (size_t i = 0; i < args.size(); ++i)
    if (is_value_arg(args[i], i < scalar_args.size() && scalar_args[i])) r.push_back(static_cast<int>(i));
  return r;
}

namespace {
std::atomic<int64_t> g_entries{0}, g_generic_entries{0};
}  // namespace

Counters counters() { return {g_entries.load(), g_generic_entries.load()}; }
void count_entry(bool generic) { (generic ? g_generic_entries : g_entries).fetch_add(1, std::memory_order_relaxed); }

uint64_t hash_sig(const int64_t* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) h ^= static_cast<uint64_t>(p[i]) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

namespace {
std::atomic<uint64_t> g_next_cache_id{1};

// A thread's front table: its last hits, by (cache, hash). The signature vectors keep their
// capacity, so a refill allocates nothing once warm.
struct Front {
  uint64_t cache = 0, h = 0;
  std::vector<int64_t> sig;
  std::shared_ptr<const Entry> e;
};
constexpr size_t kFront = 32;
Front& front_slot(uint64_t cache, uint64_t h) {
  thread_local Front t[kFront];
  uint64_t x = h ^ (cache * 0x9E3779B97F4A7C15ull);
  return t[(x ^ (x >> 29)) % kFront];
}
}  // namespace

Cache::Cache() : id_(g_next_cache_id.fetch_add(1)) {}

std::shared_ptr<const Entry> Cache::find(const int64_t* sig, size_t n, uint64_t h) {
  Front& f = front_slot(id_, h);
  // Not owning (aliasing an empty owner): no reference count traffic per op.
  if (f.cache == id_ && f.h == h && f.sig.size() == n && std::equal(f.sig.begin(), f.sig.end(), sig))
    return std::shared_ptr<const Entry>(std::shared_ptr<const Entry>(), f.e.get());
  // An empty cache (the generic one of an op whose lowering binds no scalar_arg) needs no lock
  // to miss: a racing insert only costs one more recording.
  if (count_.load(std::memory_order_relaxed) == 0) return nullptr;
  std::shared_ptr<const Entry> e;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = map_.find(h);
    if (it == map_.end()) return nullptr;
    for (auto& [s, x] : it->second)
      if (s.size() == n && std::equal(s.begin(), s.end(), sig)) {
        e = x;
        break;
      }
  }
  if (!e) return nullptr;
  f.cache = id_;
  f.h = h;
  f.sig.assign(sig, sig + n);
  f.e = e;
  return e;
}

void Cache::insert(std::vector<int64_t> sig, uint64_t h, std::shared_ptr<const Entry> e) {
  std::lock_guard<std::mutex> lk(mu_);
  if (count_ >= kMaxEntries) {
    map_.clear();
    count_ = 0;
  }
  auto& v = map_[h];
  if (v.size() < 8) {
    v.push_back({std::move(sig), std::move(e)});
    ++count_;
  }
}

size_t Cache::size() {
  std::lock_guard<std::mutex> lk(mu_);
  return count_;
}

namespace {

uint64_t bits_at_replay(const Entry::Src& s, Args args) {
  if (s.value < 0) return s.bits;
  const c10::IValue& v = args[s.value];
  return scalar_bits(v.isTensor() ? v.toTensor().item() : v.toScalar(), s.dtype);
}

// The tensor a param is bound to: argument `arg`, or element `elem` of that list argument.
const at::Tensor& bound_tensor(const Entry::Src& s, Args args) {
  return s.elem < 0 ? args[s.arg].toTensor() : args[s.arg].toListRef()[s.elem].toTensor();
}

// What param s reads: the argument's view, or (flat) the storage run it spans; the
// signature matched, so the run exists and has the recorded length.
at::Tensor bound_view(const Entry::Src& s, Args args) {
  const at::Tensor& t = bound_tensor(s, args);
  if (!s.flat) return t;
  exec::Meta flat;
  const bool ok = exec::flat_run(exec::meta_of(t, s.dtype), static_cast<int64_t>(t.storage().nbytes() / ir::dtype_size(s.dtype)),
                                 exec::FlatRun::kDense, &flat);
  TORCH_INTERNAL_ASSERT(ok, "[fast path] a flat binding's storage run vanished");
  return exec::make_view(t.storage(), t.scalar_type(), flat);
}

}  // namespace

std::vector<at::Tensor> replay(const Entry& e, Args args, const char* name) {
  int dev = -1;
  for (const Entry::Src& s : e.srcs)
    if (s.arg >= 0) {
      dev = bound_tensor(s, args).device().index();
      break;
    }
  // The destinations: new results, or arguments, which are only referenced (a copy of an
  // argument only its Python object holds would incref that object under the GIL).
  std::vector<at::Tensor> results;
  c10::SmallVector<const at::Tensor*, 4> dsts;
  if (!e.written.empty()) {
    for (size_t k = 0; k < e.written.size(); ++k) {
      const at::Tensor& d = args[e.written[k]].toTensor();
      if (k < e.resized.size() && e.resized[k]) at::native::resize_output(d, *e.resized[k]);
      dsts.push_back(&d);
    }
    if (dev < 0) dev = dsts[0]->device().index();
  } else {
    if (dev < 0) dev = device::current_device();
    c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, dev));
    results.reserve(e.outs.size());
    for (const Entry::Out& o : e.outs)
      results.push_back(o.strides.empty()
                            ? at::detail::empty_generic(o.sizes, device::allocator(),
                                                        c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), o.dtype,
                                                        std::nullopt)
                            : at::detail::empty_strided_generic(o.sizes, o.strides, device::allocator(),
                                                                c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                                o.dtype));
    for (const at::Tensor& r : results) dsts.push_back(&r);
  }
  for (int a : e.also) dsts.push_back(&args[a].toTensor());
  std::vector<at::Tensor> flags;
  if (!e.checks.empty()) {
    c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, dev));
    flags.reserve(e.checks.size());
    for (size_t k = 0; k < e.checks.size(); ++k)
      flags.push_back(at::detail::empty_generic({}, device::allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                at::kBool, std::nullopt));
    for (const at::Tensor& f : flags) dsts.push_back(&f);
  }
  if (exec::mode() == exec::Mode::Fused) {
    std::vector<at::Tensor> owned;
    owned.reserve(dsts.size());
    for (const at::Tensor* d : dsts) owned.push_back(*d);
    exec::OpRecord r{name, e.graph.get(), {}, std::move(owned), flags, e.checks};
    r.binds.reserve(e.srcs.size());
    for (const Entry::Src& s : e.srcs)
      r.binds.push_back({s.arg >= 0 ? bound_view(s, args) : at::Tensor(), bits_at_replay(s, args), s.dtype});
    exec::defer(dev, r);
    return results;
  }
  if (exec::has_pending(dev)) exec::flush(dev);
  exec::Launch l(name, exec::compiled(e.key, *e.graph, name));
  for (const Entry::Src& s : e.srcs) {
    if (s.arg >= 0) l.read(s.flat ? bound_view(s, args) : bound_tensor(s, args), s.dtype);
    else l.scalar(bits_at_replay(s, args), s.dtype);
  }
  for (size_t k = 0; k < dsts.size(); ++k) l.write(*dsts[k], e.graph->dtype(e.graph->outputs()[k]));
  l.submit(dev);
  if (!flags.empty()) exec::submit_checks(dev, name, flags, e.checks);
  return results;
}

}  // namespace torch_tpu::lowering::fast
