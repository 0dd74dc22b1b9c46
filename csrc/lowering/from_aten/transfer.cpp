// Transfers: cpu->tpu stages a private copy and writes it with the runtime (into a whole,
// contiguous storage, outside the fused window) or reads it in a graph as a host operand;
// tpu->cpu is a runtime read queued on the stream and waited for; tpu->tpu is an IR graph
// (convert + write).
#include "lowering/from_aten/transfer.h"

#include <atomic>

#include "device/device.h"
#include "exec/stream.h"
#include "exec/launch.h"
#include "exec/window.h"
#include "lowering/from_aten/lower.h"
#include "runtime/runtime.h"

namespace torch_tpu::lowering::transfer {
namespace {
std::atomic<int64_t> g_h2d{0}, g_d2h{0}, g_d2d{0};
}

Counters counters() { return {g_h2d.load(), g_d2h.load(), g_d2d.load()}; }

namespace {
// Reads tpu tensor `t` into the contiguous CPU tensor `dst` (same dtype and sizes): a runtime
// read queued on the stream after the work that produces t (the fused window is flushed
// first), then waited for. Errors of earlier commands raise here.
void download(const at::Tensor& t, const at::Tensor& dst) {
  int dev = t.device().index();
  exec::flush_for_wait(dev);  // a deferred window runs first (inline when the stream is idle)
  (void)exec::mark(dev);      // (flushes what another thread deferred meanwhile)
  if (t.numel() > 0) {
    runtime::View v = exec::device_view(t.storage(), exec::meta_of(t, to_ir(t.scalar_type(), "aten::copy_")), false);
    auto* out = static_cast<std::byte*>(dst.data_ptr());
    exec::run_for_wait(dev, "to_host", [v = std::move(v), out] { runtime::current().read(v, out); });
  }
  exec::wait(dev, runtime::stream::queued(dev));
}

// Writes `staged` (contiguous CPU, dst's dtype and sizes) into dst by a runtime write queued
// on the stream: no program, so a batch of a new shape compiles nothing (a graph reading a
// host operand is one program per shape). Only where that write is cheap on every runtime
// (dst is its whole storage: pjrt replaces the buffer's value) and ordered with the other
// work. In the fused mode the pending window stays pending (uploads do not cut it, and a
// window's program does not depend on which uploads happened while it was recorded) when it
// neither reads nor writes dst: the write is queued before the window, and every later op
// reading dst is recorded in it. A capture records the copy as a graph. False: not taken.
bool upload(const at::Tensor& staged, const at::Tensor& dst) {
  if (!dst.is_contiguous() || dst.storage_offset() != 0 || dst.nbytes() != dst.storage().nbytes() ||
      dst.is_conj() || dst.is_neg())
    return false;
  int dev = dst.device().index();
  if (exec::mode() == exec::Mode::Fused) {
    if (exec::window_uses(dev, dst)) return false;
  } else if (exec::has_pending(dev)) {
    exec::flush(dev);  // e.g. a fused op of another thread's window
  }
  runtime::View v = exec::device_view(dst.storage(), exec::meta_of(dst, to_ir(dst.scalar_type(), "aten::copy_")), true);
  const auto* src = static_cast<const std::byte*>(staged.const_data_ptr());
  exec::enqueue(dev, "to_device", [v = std::move(v), src, keep = staged] { runtime::current().write(v, src); },
                /*small=*/dst.nbytes() <= (size_t{1} << 16));
  return true;
}
}  // namespace

at::Tensor to_host(const at::Tensor& t) {
  at::Tensor out = at::empty(t.sizes(), at::TensorOptions().dtype(t.scalar_type()).device(at::kCPU));
  download(t, out);
  return out;
}

at::Scalar read_scalar(const at::Tensor& t) {
  TORCH_CHECK(t.numel() == 1, "[aten::item] a Tensor with ", t.numel(), " elements cannot be converted to Scalar");
  g_d2h += t.itemsize();
  return to_host(t).item();
}

void copy(const at::Tensor& src, const at::Tensor& dst) {
  if (dst.numel() == 0) return;
  if (src.is_privateuseone() && dst.is_privateuseone() && src.device() != dst.device()) {
    // Between devices: through the host, so that each device's stream orders its own memory.
    transfer::copy(to_host(src), dst);
    g_d2d += dst.nbytes();
    return;
  }
  if (src.is_privateuseone() && dst.is_privateuseone()) {
    Lower L("aten::copy_");
    Value v = L.bcast(L.in(src), shape_of(dst));
    L.run_into({v}, {dst});
    g_d2d += dst.nbytes();
    return;
  }
  if (dst.is_privateuseone()) {
    TORCH_CHECK(src.is_cpu(), "[aten::copy_] cannot copy from ", src.device(), " to tpu; expected a cpu source");
    // A private contiguous snapshot in dst's dtype and shape, so src may change right away.
    at::Tensor staged = at::empty(dst.sizes(), src.options().dtype(dst.scalar_type()));
    staged.copy_(src);
    g_h2d += staged.nbytes();
    if (upload(staged, dst)) return;
    Lower L("aten::copy_");
    Value v = L.in_host(staged);
    L.run_into({v}, {dst});
    return;
  }
  TORCH_CHECK(dst.is_cpu(), "[aten::copy_] cannot copy from tpu to ", dst.device(), "; expected a cpu destination");
  if (dst.is_contiguous() && dst.scalar_type() == src.scalar_type() && dst.sizes() == src.sizes() &&
      !dst.is_conj() && !dst.is_neg()) {
    download(src, dst);  // straight into dst
  } else {
    dst.copy_(to_host(src));
  }
  g_d2h += src.nbytes();
}

}  // namespace torch_tpu::lowering::transfer
