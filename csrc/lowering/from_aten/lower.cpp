// Lower: parameter binding, graph launch through the compile cache, and the generic boxed
// kernel that serves functional, in-place and out= variants from one lowering.
#include "lowering/from_aten/lower.h"
#include "lowering/from_aten/fast_path.h"
#include "lowering/from_aten/complex.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <cstring>

#include "base/error.h"
#include "device/device.h"
#include "exec/stream.h"
#include "exec/window.h"
#include "exec/launch.h"
#include "exec/views.h"
#include "runtime/runtime.h"

namespace torch_tpu::lowering {

namespace {
std::atomic<int> g_precision{static_cast<int>(ir::Precision::Default)};
}
ir::Precision matmul_precision() { return static_cast<ir::Precision>(g_precision.load()); }
void set_matmul_precision(ir::Precision p) { g_precision = static_cast<int>(p); }

DType to_ir(at::ScalarType t, const char* op) {
  switch (t) {
    case at::kBool: return DType::Bool;
    case at::kByte: return DType::U8;
    case at::kChar: return DType::I8;
    case at::kShort: return DType::I16;
    case at::kInt: return DType::I32;
    case at::kLong: return DType::I64;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    default:
      TORCH_CHECK_NOT_IMPLEMENTED(false, "[", op, "] unsupported dtype on tpu; got ", t,
                                  ", expected a float, integer or bool type");
  }
}

at::ScalarType to_aten(DType t) {
  switch (t) {
    case DType::Bool: return at::kBool;
    case DType::U8: return at::kByte;
    case DType::I8: return at::kChar;
    case DType::I16: return at::kShort;
    case DType::I32: return at::kInt;
    case DType::I64: return at::kLong;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::F32: return at::kFloat;
    case DType::F64: return at::kDouble;
    case DType::U64: return at::kUInt64;
  }
  return at::kFloat;
}

ir::Shape shape_of(const at::Tensor& t) { return ir::Shape(t.sizes().begin(), t.sizes().end()); }

int64_t wrap_dim(int64_t d, int64_t rank) { return c10::maybe_wrap_dim(d, rank); }

std::vector<int64_t> dims_arg(const c10::IValue& v, int64_t rank) {
  std::vector<int64_t> dims;
  if (v.isNone()) {
    for (int64_t i = 0; i < rank; ++i) dims.push_back(i);
    return dims;
  }
  if (v.isInt()) return {wrap_dim(v.toInt(), rank)};
  auto list = v.toIntList();
  if (list.empty()) {
    for (int64_t i = 0; i < rank; ++i) dims.push_back(i);
    return dims;
  }
  for (int64_t d : list) {
    int64_t w = wrap_dim(d, std::max<int64_t>(rank, 1));
    TORCH_CHECK(std::find(dims.begin(), dims.end(), w) == dims.end(), "dim ", w,
                " appears multiple times in the list of dims");
    dims.push_back(w);
  }
  return dims;
}

uint64_t scalar_bits(const at::Scalar& s, DType dt) {
  uint64_t bits = 0;
  auto put = [&](auto v) { std::memcpy(&bits, &v, sizeof v); };
  switch (dt) {
    case DType::F32: put(s.to<float>()); break;
    case DType::F64: put(s.to<double>()); break;
    case DType::BF16: put(c10::BFloat16(s.to<float>()).x); break;
    case DType::F16: put(c10::Half(s.to<float>()).x); break;
    case DType::Bool: put(static_cast<uint8_t>(s.toComplexDouble() != 0.0)); break;
    case DType::U8: put(static_cast<uint8_t>(s.to<int64_t>())); break;
    case DType::I8: put(static_cast<int8_t>(s.to<int64_t>())); break;
    case DType::I16: put(static_cast<int16_t>(s.to<int64_t>())); break;
    case DType::I32: put(static_cast<int32_t>(s.to<int64_t>())); break;
    case DType::I64: put(s.to<int64_t>()); break;
    case DType::U64: put(static_cast<uint64_t>(s.to<int64_t>())); break;
  }
  return bits;
}

Value Lower::in(const at::Tensor& t) { return bind(t, false); }

Value Lower::in_rows(const at::Tensor& t) {
  // The pjrt runtime reads views out of whole storages inside its program already (legalize),
  // and a graph per offset would be a compile per offset there.
  const bool rows = t.is_privateuseone() && !exec::capturing(t.device().index()) &&
                    std::strcmp(runtime::current().name(), "host") == 0;
  return bind(t, rows);
}

Value Lower::bind(const at::Tensor& t, bool rows) {
  TORCH_CHECK(t.defined(), "[", op_, "] got an undefined tensor");
  if (!t.is_privateuseone()) {
    TORCH_CHECK(t.is_cpu() && t.dim() == 0, "[", op_,
                "] expected all tensors on tpu; got a tensor on ", t.device(),
                " (only 0-dim CPU tensors may be mixed in, as scalars)");
    DType dt = to_ir(t.scalar_type(), op_);
    return scalar(t.item(), dt);
  }
  if (device_ < 0) device_ = t.device().index();
  TORCH_CHECK(t.device().index() == device_, "[", op_,
              "] expected all tensors on one device; got tpu:", int(t.device().index()), " and tpu:",
              device_);
  const DType dt = to_ir(t.scalar_type(), op_);
  // A strided view without gaps (a transposed weight, an expand): the flat run of storage it
  // spans, the view derived in the graph (exec::flat_run), not a copy gathered per run. With
  // `rows`, a view with gaps too: the whole rows of storage it spans (kWholeRows); the graph
  // then depends on the view's offset, so the binding has no source argument (not replayed).
  exec::Meta flat, m;
  bool is_flat = false, gapped = false;
  if (!t.is_contiguous() && !t.is_complex() && t.numel() > 0) {
    m = exec::meta_of(t, dt);
    const auto elems = static_cast<int64_t>(t.storage().nbytes() / ir::dtype_size(dt));
    is_flat = exec::flat_run(m, elems, exec::FlatRun::kDense, &flat);
    if (!is_flat && rows) is_flat = gapped = exec::flat_run(m, elems, exec::FlatRun::kWholeRows, &flat);
  }
  Value v;
  if (is_flat) {
    v = exec::derive(g, g.param(dt, flat.sizes), flat, m);
    TORCH_INTERNAL_ASSERT(v.valid(), "[", op_, "] a strided view's storage run did not derive it");
  } else {
    v = g.param(dt, shape_of(t));
  }
  int src = -1, elem = -1;
  if (args_ && !gapped) {
    const c10::TensorImpl* ti = t.unsafeGetTensorImpl();
    for (size_t j = 0; j < args_->size() && src < 0; ++j) {
      const c10::IValue& a = (*args_)[j];
      if (a.isTensor() && a.toTensor().unsafeGetTensorImpl() == ti) {
        src = static_cast<int>(j);
      } else if (a.isList()) {  // cat's tensors, index's indices
        auto l = a.toListRef();
        for (size_t k = 0; k < l.size() && src < 0; ++k)
          if (l[k].isTensor() && l[k].toTensor().unsafeGetTensorImpl() == ti) src = static_cast<int>(j), elem = static_cast<int>(k);
      }
    }
  }
  if (src < 0) cacheable_ = false;  // a tensor the lowering made itself, or a gapped view
  binds_.push_back({is_flat ? exec::make_view(t.storage(), t.scalar_type(), flat) : t, 0, dt, src});
  binds_.back().elem = elem;
  binds_.back().flat = is_flat;
  return v;
}

std::vector<Lower::BindInfo> Lower::bind_info() const {
  std::vector<BindInfo> r;
  r.reserve(binds_.size());
  for (const Binding& b : binds_) r.push_back({b.src, b.bits, b.dtype, b.value_arg, b.elem, b.flat});
  return r;
}

Value Lower::in_host(const at::Tensor& cpu) {
  Value v = g.param(to_ir(cpu.scalar_type(), op_), shape_of(cpu));
  cacheable_ = false;
  binds_.push_back({cpu, 0, to_ir(cpu.scalar_type(), op_)});
  return v;
}

Value Lower::rng_state(const std::optional<at::Generator>& gen, uint64_t n) {
  int dev = device_ >= 0 ? device_ : device::current_device();
  auto [seed, offset] = device::philox_reserve(gen, dev, n);
  at::Tensor st = at::empty({2}, at::TensorOptions().dtype(at::kLong));
  st.data_ptr<int64_t>()[0] = static_cast<int64_t>(seed);
  st.data_ptr<int64_t>()[1] = static_cast<int64_t>(offset);
  Value v = g.param(DType::U64, {2});
  cacheable_ = false;
  binds_.push_back({st, 0, DType::U64, -1, n, gen});
  return v;
}

Value Lower::scalar(const at::Scalar& s, DType dt) {
  Value v = g.param(dt, {});
  binds_.push_back({at::Tensor(), scalar_bits(s, dt), dt});
  return v;
}

Value Lower::scalar_arg(const c10::IValue& v, DType dt) {
  if (v.isTensor() && v.toTensor().is_privateuseone()) return in(v.toTensor(), dt);
  Value r = v.isTensor() ? in(v.toTensor(), dt) : scalar(v.toScalar(), dt);
  if (args_)
    for (size_t j = 0; j < args_->size(); ++j)
      if (&(*args_)[j] == &v) binds_.back().value_arg = static_cast<int>(j);
  return r;
}

void Lower::launch(const std::vector<at::Tensor>& dsts, std::vector<at::Tensor> flags,
                   std::vector<std::string> messages) {
  int dev = device_ >= 0 ? device_ : (dsts.empty() ? device::current_device() : dsts[0].device().index());
  if (exec::mode() == exec::Mode::Fused) {
    exec::OpRecord r{op_, &g, {}, dsts, std::move(flags), std::move(messages)};
    r.binds.reserve(binds_.size());
    for (Binding& b : binds_) r.binds.push_back({std::move(b.tensor), b.bits, b.dtype, b.rng_n, std::move(b.gen)});
    exec::defer(dev, r);
    return;
  }
  if (exec::has_pending(dev)) exec::flush(dev);  // e.g. a strict op on the autograd thread
  std::shared_ptr<runtime::Executable> exe;
  try {
    exe = exec::compiled(g.hash(), g, op_);
  } catch (const torch_tpu::NotImplemented& e) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "[", op_, "] ", e.what());
  } catch (const torch_tpu::Error& e) {
    TORCH_CHECK(false, "[", op_, "] ", e.what());
  }
  exec::Launch l(op_, std::move(exe));
  for (const Binding& b : binds_) {
    if (b.tensor.defined()) l.read(b.tensor, b.dtype);
    else l.scalar(b.bits, b.dtype);
  }
  for (const at::Tensor& d : dsts) l.write(d, to_ir(d.scalar_type(), op_));
  l.submit(dev);
  exec::submit_checks(dev, op_, flags, std::move(messages));  // a no-op without flags
}

// Each check flag becomes one more (0-d bool, tpu) output; a command queued after the graph
// (in fused mode: after the window holding it) reads the flags from host-visible device
// memory and raises the first failed check. The host never waits: the error surfaces at the
// next sync point (at once in debug mode). launch() reads the eager mode once, so a mode
// switched by another thread meanwhile cannot separate the checks from their graph.
void Lower::launch_checked(std::vector<at::Tensor> dsts) {
  if (checks_.empty()) return launch(dsts);
  std::vector<Value> outs = g.outputs();
  std::vector<at::Tensor> flags;
  std::vector<std::string> messages;
  int dev = device_ >= 0 ? device_ : (dsts.empty() ? device::current_device() : dsts[0].device().index());
  c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, dev));
  for (auto& [flag, msg] : checks_) {
    outs.push_back(g.convert(flag, DType::Bool));
    flags.push_back(at::detail::empty_generic({}, device::allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                              at::kBool, std::nullopt));
    messages.push_back(std::move(msg));
  }
  checks_.clear();
  check_msgs_ = messages;  // fast::replay launches the flags and their checks too
  g.set_outputs(outs);
  dsts.insert(dsts.end(), flags.begin(), flags.end());
  launch(dsts, std::move(flags), std::move(messages));
}

std::vector<at::Tensor> Lower::run(const std::vector<Value>& outs) {
  std::vector<at::Tensor> res;
  res.reserve(outs.size());
  int dev = device_ >= 0 ? device_ : device::current_device();
  c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, dev));  // results live on the inputs' device
  for (Value v : outs)
    res.push_back(at::detail::empty_generic(g.shape(v), device::allocator(),
                                            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                            to_aten(g.dtype(v)), std::nullopt));
  g.set_outputs(outs);
  launch_checked(res);
  return res;
}

void Lower::run_into(std::vector<Value> outs, const std::vector<at::Tensor>& dsts) {
  TORCH_INTERNAL_ASSERT(outs.size() == dsts.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const at::Tensor& d = dsts[i];
    TORCH_CHECK(d.is_privateuseone(), "[", op_, "] output must be a tpu tensor; got ", d.device());
    TORCH_CHECK(shape_of(d) == g.shape(outs[i]), "[", op_, "] output with shape ", d.sizes(),
                " doesn't match the result shape ", ir::shape_str(g.shape(outs[i])));
    at::assert_no_internal_overlap(d);
    if (device_ < 0) device_ = d.device().index();
    outs[i] = g.convert(outs[i], to_ir(d.scalar_type(), op_));
  }
  g.set_outputs(outs);
  launch_checked(dsts);
}

namespace {

struct BoxedLowering final : c10::OperatorKernel {
  explicit BoxedLowering(std::string name, LowerFn fn) : name_(std::move(name)), fn_(fn) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t n = op.schema().arguments().size();
    if (complex::maybe_run(op, stack)) return;  // complex tpu tensors: real pairs
    auto args = torch::jit::last(*stack, n);
    std::vector<at::Tensor> results = run(op, args);
    if (results.empty())
      for (int w : written_) results.push_back(args[w].toTensor());
    finish(op.schema(), stack, n, results);
  }

  // The op's results for `args` (the schema's arguments, not complex): new tensors, or (maybe
  // none: the caller has them) the written arguments. Neither keeps nor releases `args`.
  std::vector<at::Tensor> run(const c10::OperatorHandle& op, Args args) {
    const auto& schema = op.schema();
    std::call_once(scalar_args_once_, [&] {
      for (const auto& a : schema.arguments()) {
        c10::TypePtr t = a.type();
        if (auto o = t->cast<c10::OptionalType>()) t = o->getElementType();
        scalar_args_.push_back(t->kind() == c10::TypeKind::NumberType);
      }
      written_ = result_args(schema);
    });
    thread_local std::vector<int64_t> sig;
    size_t main = 0;
    bool cacheable = fast::signature(args, scalar_args_, &sig, &main);
    uint64_t hm = 0, h = 0;
    std::vector<at::Tensor> results;
    if (cacheable) {
      hm = fast::hash_sig(sig.data(), main);
      h = fast::hash_sig(sig.data() + main, sig.size() - main, hm);
      std::shared_ptr<const fast::Entry> e;
      if (main < sig.size()) e = generic_.find(sig.data(), main, hm);
      if (!e) e = cache_.find(sig.data(), sig.size(), h);
      if (e) return fast::replay(*e, args, name_.c_str());
    }
    // The lowering may dispatch other ops on this thread (reusing `sig`): keep a copy.
    std::vector<int64_t> saved = cacheable ? sig : std::vector<int64_t>();
    const std::vector<int>& written = written_;
    Lower L(name_.c_str());
    L.set_args(&args);
    std::vector<std::optional<std::vector<int64_t>>> resized;  // per written argument
    try {
      std::vector<Value> outs = fn_(L, args);
      std::vector<Value> all = outs;  // the results, then the also_write values
      std::vector<at::Tensor> also;
      for (const auto& [i, v] : L.also_writes()) {
        all.push_back(v);
        also.push_back(args[i].toTensor());
      }
      if (written.empty()) {
        std::vector<std::vector<int64_t>> strides = meta_strides(op, args, L, outs);
        if (strides.empty() && also.empty()) {
          results = L.run(outs);
        } else {  // PyTorch's layout for these inputs (a permuted input's pointwise result)
          results = allocate(L, outs, strides);
          std::vector<at::Tensor> dsts = results;
          dsts.insert(dsts.end(), also.begin(), also.end());
          L.run_into(all, dsts);
        }
      } else {
        TORCH_INTERNAL_ASSERT(written.size() == outs.size(), name_, ": written args ",
                              written.size(), " vs outputs ", outs.size());
        for (size_t k = 0; k < written.size(); ++k) {
          at::Tensor d = args[written[k]].toTensor();
          DType want = L.g.dtype(outs[k]);
          TORCH_CHECK(at::canCast(to_aten(want), d.scalar_type()), "[", name_, "] result type ",
                      to_aten(want), " can't be cast to the desired output type ", d.scalar_type());
          if (!schema.arguments()[written[k]].kwarg_only() && written[k] == 0) {
            // in-place on self: shapes must already agree
          } else {
            const bool r = at::native::resize_output(d, L.g.shape(outs[k]));
            resized.resize(k + 1);
            if (r) resized[k] = d.sizes().vec();
          }
          results.push_back(d);
        }
        std::vector<at::Tensor> dsts = results;
        dsts.insert(dsts.end(), also.begin(), also.end());
        L.run_into(all, dsts);
      }
    } catch (const torch_tpu::NotImplemented& e) {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "[", name_, "] ", e.what());
    } catch (const torch_tpu::Error& e) {
      TORCH_CHECK(false, "[", name_, "] ", e.what());
    }
    if (cacheable && L.cacheable()) remember(args, saved, main, hm, h, L, written, results, std::move(resized));
    return results;
  }

  // The arguments the op returns written (self of `op_`, the out= tensors): write-annotated
  // arguments whose alias set a return shares. Others it writes without returning them
  // (_native_batch_norm_legit's running statistics) are the lowering's Lower::also_write.
  static std::vector<int> result_args(const c10::FunctionSchema& schema) {
    std::vector<int> r;
    for (size_t i = 0; i < schema.arguments().size(); ++i) {
      const auto* ai = schema.arguments()[i].alias_info();
      if (!ai || !ai->isWrite()) continue;
      for (const auto& ret : schema.returns())
        if (ret.alias_info() && ret.alias_info()->beforeSets() == ai->beforeSets()) {
          r.push_back(static_cast<int>(i));
          break;
        }
    }
    return r;
  }

  // New tpu tensors for `outs` on the lowering's device: contiguous, or with `strides[k]`
  // where meta_strides gave one.
  static std::vector<at::Tensor> allocate(const Lower& L, const std::vector<Value>& outs,
                                          const std::vector<std::vector<int64_t>>& strides) {
    int dev = L.device() >= 0 ? L.device() : device::current_device();
    c10::DeviceGuard guard(c10::Device(c10::kPrivateUse1, dev));
    c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
    std::vector<at::Tensor> r;
    for (size_t k = 0; k < outs.size(); ++k) {
      const ir::Shape& shape = L.g.shape(outs[k]);
      at::ScalarType dt = to_aten(L.g.dtype(outs[k]));
      r.push_back(k >= strides.size() || strides[k].empty()
                      ? at::detail::empty_generic(shape, device::allocator(), ks, dt, std::nullopt)
                      : at::detail::empty_strided_generic(shape, strides[k], device::allocator(), ks, dt));
    }
    return r;
  }

  // The strides PyTorch gives the op's results for these arguments (its meta kernel run on
  // meta tensors of the same layout), when some tensor argument is not contiguous: a
  // pointwise result follows a permuted input's layout (TensorIterator), and graphs traced
  // by AOTAutograd view results assuming that. Per output: the strides, or empty for
  // contiguous (and when the meta kernel is missing or disagrees on shape). Empty when every
  // input is contiguous (results are then contiguous, as PyTorch's).
  static std::vector<std::vector<int64_t>> meta_strides(const c10::OperatorHandle& op, Args args, const Lower& L,
                                                       const std::vector<Value>& outs) {
    auto strided = [](const c10::IValue& v) {
      if (v.isTensor()) {
        const at::Tensor& t = v.toTensor();
        return t.defined() && t.is_privateuseone() && !t.is_contiguous();
      }
      return false;
    };
    if (std::none_of(args.begin(), args.end(), strided)) return {};
    auto to_meta = [](const c10::IValue& v) -> c10::IValue {
      if (!v.isTensor()) return v;
      const at::Tensor& t = v.toTensor();
      if (!t.defined() || !t.is_privateuseone()) return v;
      return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
    };
    torch::jit::Stack s;
    for (const c10::IValue& a : args) {
      if (a.isTensorList() || a.isOptionalTensorList()) return {};  // lists: keep contiguous
      s.push_back(to_meta(a));
    }
    try {
      op.callBoxed(&s);
    } catch (const std::exception&) {
      return {};  // no meta kernel: contiguous results
    }
    std::vector<std::vector<int64_t>> r(outs.size());
    bool any = false;
    for (size_t k = 0; k < outs.size() && k < s.size(); ++k) {
      if (!s[k].isTensor()) continue;
      const at::Tensor& m = s[k].toTensor();
      if (!m.defined() || m.is_contiguous() || shape_of(m) != L.g.shape(outs[k])) continue;
      if (m.is_non_overlapping_and_dense()) r[k] = m.strides().vec(), any = true;
    }
    if (!any) return {};
    return r;
  }

  // Records how this call's graph binds its arguments, for fast::replay: for all values of
  // the Scalar arguments when the lowering bound each with scalar_arg, else for these values.
  void remember(Args args, const std::vector<int64_t>& sig, size_t main, uint64_t hm, uint64_t h, const Lower& L, const std::vector<int>& written,
                const std::vector<at::Tensor>& results, std::vector<std::optional<std::vector<int64_t>>> resized) {
    auto e = std::make_shared<fast::Entry>();
    auto g = std::make_shared<ir::Graph>(L.g);
    e->key = g->hash();
    e->graph = std::move(g);
    std::vector<int> bound;
    for (const auto& b : L.bind_info()) {
      e->srcs.push_back({b.arg, b.bits, b.dtype, b.value_arg, b.elem, b.flat});
      if (b.value_arg >= 0) bound.push_back(b.value_arg);
    }
    e->written = written;
    e->resized = std::move(resized);
    for (const auto& [i, v] : L.also_writes()) e->also.push_back(i);
    if (written.empty())
      for (const at::Tensor& r : results)
        e->outs.push_back({r.scalar_type(), r.sizes().vec(), r.is_contiguous() ? std::vector<int64_t>() : r.strides().vec()});
    e->checks = L.check_messages();
    // A check's message was built from this call's arguments: entries with checks serve these
    // scalar values only (their shapes and other arguments are in the signature anyway).
    bool generic = main < sig.size() && e->checks.empty();
    if (generic)
      for (int a : fast::value_args(args, scalar_args_))
        generic &= std::find(bound.begin(), bound.end(), a) != bound.end();
    fast::count_entry(generic);
    if (generic) {
      generic_.insert(std::vector<int64_t>(sig.begin(), sig.begin() + main), hm, std::move(e));
      return;
    }
    for (auto& src : e->srcs) src.value = -1;  // these values only: `bits` holds them
    cache_.insert(sig, h, std::move(e));
  }

  static void finish(const c10::FunctionSchema& schema, torch::jit::Stack* stack, size_t n,
                     const std::vector<at::Tensor>& results) {
    torch::jit::drop(*stack, n);
    const size_t nret = schema.returns().size();
    for (size_t k = 0; k < nret && k < results.size(); ++k) torch::jit::push(*stack, results[k]);
  }

  std::string name_;
  LowerFn fn_;
  std::once_flag scalar_args_once_;
  std::vector<bool> scalar_args_;  // per schema argument: a Scalar (or Scalar?)
  std::vector<int> written_;       // result_args(schema)
  fast::Cache cache_;    // by the whole signature
  fast::Cache generic_;  // by the signature without scalar values (scalar_arg lowerings)
};

}  // namespace

namespace {

// Unboxed entry points for the common functional schemas. The dispatcher boxes the arguments
// of a call to a boxed-only kernel into an owning Stack: copying a tensor that only its
// Python object holds takes its refcount from 1 to 2, which increfs the PyObject, and the
// drop decrefs it, each taking the GIL that the Python binding had released (two GIL round
// trips per op, more than the rest of a small op's host cost). CPU kernels are unboxed and
// copy nothing; these wrappers do the same: the Stack they hand BoxedLowering::run borrows
// the caller's tensors (no refcount change; released unchanged, also on an exception).
// Complex tpu tensors take the boxed path (complex::maybe_run works on a Stack).
template <size_t N>
struct Borrowed {
  template <class... A>
  explicit Borrowed(const A&... a) : v{wrap(a)...} {}  // moved in: no copy, no refcount change
  Borrowed(const Borrowed&) = delete;
  ~Borrowed() {
    for (c10::IValue& x : v)
      if (x.isTensor()) (void)std::move(x).toTensor().unsafeReleaseTensorImpl();
  }
  static c10::IValue wrap(const at::Tensor& t) {
    return c10::IValue(at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim(
        t.unsafeGetTensorImpl())));
  }
  static c10::IValue wrap(const at::Scalar& s) { return c10::IValue(s); }
  std::array<c10::IValue, N> v;
};

bool complex_arg(const at::Tensor& t) { return t.defined() && t.is_complex(); }
bool complex_arg(const at::Scalar&) { return false; }

template <class... A>
struct Unboxed {
  BoxedLowering* k;
  c10::OperatorHandle op;
  at::Tensor operator()(const A&... a) const {
    if ((complex_arg(a) || ...)) {  // the boxed path, with an owning Stack
      torch::jit::Stack stack;
      (stack.emplace_back(a), ...);
      (*k)(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
      return stack.back().toTensor();
    }
    Borrowed<sizeof...(A)> b(a...);
    std::vector<at::Tensor> r = k->run(op, Args(b.v));
    return std::move(r[0]);
  }
};

// The in-place form (`op_`: self written and returned) and the out= form (the last argument
// written and returned) of the above.
template <class... A>
struct UnboxedInplace {
  BoxedLowering* k;
  c10::OperatorHandle op;
  at::Tensor& operator()(at::Tensor& self, const A&... a) const {
    if (complex_arg(self) || (complex_arg(a) || ...)) {
      torch::jit::Stack stack;
      stack.emplace_back(self);
      (stack.emplace_back(a), ...);
      (*k)(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
      return self;
    }
    Borrowed<1 + sizeof...(A)> b(static_cast<const at::Tensor&>(self), a...);
    k->run(op, Args(b.v));
    return self;
  }
};
template <class... A>
struct UnboxedOut {
  BoxedLowering* k;
  c10::OperatorHandle op;
  at::Tensor& operator()(const A&... a, at::Tensor& out) const {
    if ((complex_arg(a) || ...) || complex_arg(out)) {
      torch::jit::Stack stack;
      (stack.emplace_back(a), ...);
      stack.emplace_back(out);
      (*k)(op, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), &stack);
      return out;
    }
    Borrowed<sizeof...(A) + 1> b(a..., static_cast<const at::Tensor&>(out));
    k->run(op, Args(b.v));
    return out;
  }
};

// The unboxed signature the schema of `op` has among the supported ones: a single returned
// Tensor; arguments (Tensor|Scalar)... with Tensor first and no alias annotation
// (functional), or the same with the first argument written and returned (in-place), or
// with one more, last, Tensor argument written and returned (out=).
enum class Form { None, Functional, Inplace, Out };
struct Pattern {
  Form form = Form::None;
  std::string kinds;  // of the arguments other than the written one: "TTS" = Tensor, Tensor, Scalar
};
Pattern pattern(const c10::FunctionSchema& s) {
  Pattern none;
  if (s.returns().size() != 1 || s.returns()[0].type()->kind() != c10::TypeKind::TensorType || s.is_vararg() ||
      s.is_varret())
    return none;
  const c10::AliasInfo* ret = s.returns()[0].alias_info();
  const auto& args = s.arguments();
  if (args.empty()) return none;
  auto written = [&](const c10::Argument& a) {
    return a.alias_info() && a.alias_info()->isWrite() && ret && ret->beforeSets() == a.alias_info()->beforeSets() &&
           a.real_type()->kind() == c10::TypeKind::TensorType;
  };
  Pattern p;
  size_t lo = 0, hi = args.size();
  if (!ret) {
    p.form = Form::Functional;
  } else if (written(args[0])) {
    p.form = Form::Inplace;
    lo = 1;
  } else if (written(args.back())) {
    p.form = Form::Out;
    hi = args.size() - 1;
  } else {
    return none;
  }
  for (size_t i = lo; i < hi; ++i) {
    if (args[i].alias_info()) return none;
    c10::TypeKind k = args[i].real_type()->kind();
    if (k == c10::TypeKind::TensorType) p.kinds += 'T';
    else if (k == c10::TypeKind::NumberType) p.kinds += 'S';
    else return none;
  }
  return p;
}

// Registers the unboxed kernel for `kinds` in form F (false: not a supported signature).
template <template <class...> class F>
bool impl_as(torch::Library& m, const char* name, const std::string& kinds, BoxedLowering* k,
             const c10::OperatorHandle& op) {
  using T = at::Tensor;
  using S = at::Scalar;
  if (kinds == "T") m.impl(name, torch::CppFunction(F<T>{k, op}));
  else if (kinds == "TT") m.impl(name, torch::CppFunction(F<T, T>{k, op}));
  else if (kinds == "TTS") m.impl(name, torch::CppFunction(F<T, T, S>{k, op}));
  else if (kinds == "TS") m.impl(name, torch::CppFunction(F<T, S>{k, op}));
  else if (kinds == "TSS") m.impl(name, torch::CppFunction(F<T, S, S>{k, op}));
  else if (kinds == "TTT") m.impl(name, torch::CppFunction(F<T, T, T>{k, op}));
  else if (kinds == "TTTS") m.impl(name, torch::CppFunction(F<T, T, T, S>{k, op}));
  else if (kinds == "TTTSS") m.impl(name, torch::CppFunction(F<T, T, T, S, S>{k, op}));
  else if (kinds == "S") m.impl(name, torch::CppFunction(F<S>{k, op}));
  else if (kinds == "SS") m.impl(name, torch::CppFunction(F<S, S>{k, op}));
  else return false;
  return true;
}


}  // namespace

void register_ops(torch::Library& m, std::initializer_list<OpEntry> ops) {
  for (const OpEntry& e : ops) {
    std::string full = std::string("aten::") + e.name;
    std::string base = e.name, overload;
    if (size_t dot = base.find('.'); dot != std::string::npos) {
      overload = base.substr(dot + 1);
      base.resize(dot);
    }
    auto op = c10::Dispatcher::singleton().findSchema({"aten::" + base, overload});
    Pattern p = op ? pattern(op->schema()) : Pattern();
    // The kinds of the arguments besides the written one (in-place: after self, so relu_'s
    // are "").
    const std::string& rest = p.kinds;
    bool done = false;
    if (p.form != Form::None) {
      auto* k = new BoxedLowering(full, e.fn);  // lives as long as the registration: the process
      switch (p.form) {
        case Form::Functional: done = impl_as<Unboxed>(m, e.name, rest, k, *op); break;
        case Form::Inplace:
          if (rest.empty()) {
            m.impl(e.name, torch::CppFunction(UnboxedInplace<>{k, *op}));
            done = true;
          } else {
            done = impl_as<UnboxedInplace>(m, e.name, rest, k, *op);
          }
          break;
        case Form::Out: done = impl_as<UnboxedOut>(m, e.name, rest, k, *op); break;
        case Form::None: break;
      }
      if (!done) delete k;
    }
    if (!done) m.impl(e.name, torch::CppFunction::makeFromBoxedFunctor(std::make_unique<BoxedLowering>(full, e.fn)));
  }
}

}  // namespace torch_tpu::lowering
