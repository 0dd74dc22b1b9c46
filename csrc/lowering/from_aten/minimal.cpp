// The metadata and transfer ops every PrivateUse1 backend needs: empty, views, resize,
// set_, copies between cpu and tpu, _local_scalar_dense, and the fallback for ops
// without a lowering (NotImplementedError, or a counted CPU fallback when enabled).
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_lazy_clone_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include <cstring>

#include "device/device.h"
#include "exec/stream.h"
#include "lowering/from_aten/complex.h"
#include "lowering/from_aten/lower.h"
#include "lowering/from_aten/transfer.h"

namespace torch_tpu::lowering {
namespace {

const c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> memory_format) {
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_generic(size, device::allocator(), kTpuKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> device, std::optional<bool> pin_memory) {
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, device::allocator(), kTpuKeys,
                                           c10::dtype_or_default(dtype));
}

// Grows the storage when needed (waits for pending work on the old memory first).
void maybe_grow_storage(const at::Tensor& self, size_t needed) {
  c10::StorageImpl* st = self.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (needed <= st->nbytes()) return;
  // The copy of the old contents is queued after the pending commands that may still write
  // them (stream order); no sync. The new memory is on the tensor's device.
  c10::DeviceGuard guard(self.device());
  at::DataPtr fresh = device::allocator()->allocate(needed);
  if (st->nbytes() && st->data()) {
    runtime::stream::flush_deferred(self.device().index());  // deferred writes of the old contents first
    device::copy_bytes(self.device().index(), fresh.get(), st->data(), st->nbytes());
  }
  st->set_data_ptr_noswap(std::move(fresh));
  st->set_nbytes(needed);
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format && *memory_format != at::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  int64_t numel = impl->numel();
  if (numel > 0) {
    int64_t extent = 1;  // storage elements needed for the (contiguous) layout
    for (int64_t d = 0; d < self.dim(); ++d) extent += (self.size(d) - 1) * self.stride(d);
    maybe_grow_storage(self, (impl->storage_offset() + extent) * self.itemsize());
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t offset,
                        at::IntArrayRef size, at::IntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset);
  impl->set_sizes_and_strides(size, stride);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return set_storage(self, std::move(source), 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  if (self.is_same(src)) return self;
  return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  at::Storage st(at::Storage::use_byte_size_t(), 0, device::allocator(), true);
  return set_storage(self, std::move(st), 0, {0}, {});
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (complex::copy(self, dst)) return dst;
  transfer::copy(self, dst);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  if (complex::copy(self, dst)) return dst;
  transfer::copy(self, dst);
  return dst;
}

// Copy-on-write clone: the clone shares self's memory, so the fused window's pending writes
// to self are queued first (the window tracks storages, not memory; a write to either side
// later materializes a private copy, queued after them).
at::Tensor lazy_clone(const at::Tensor& self) {
  runtime::stream::flush_deferred(self.device().index());
  return at::native::_lazy_clone(self);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return transfer::read_scalar(self);
}

void record_stream(at::Tensor& self, c10::Stream stream) {}

// Whether `self` may take `from`'s data by `self.data = from` (set_data). c10 allows it between
// dense CPU, CUDA, ... tensors but does not know PrivateUse1; without this, nn.Module._apply
// (`.to("tpu")`, `.tpu()`, `to_empty`) replaces each Parameter with a new one: tied weights
// untie and optimizers lose their parameters. Dense tpu and dense cpu tensors are as
// compatible as CUDA and CPU ones are.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  auto dense = [](const at::Tensor& t) {
    auto ks = t.key_set();
    return ks.has(c10::DispatchKey::Dense) && (ks.has_backend(c10::BackendComponent::CPUBit) ||
                                               ks.has_backend(c10::BackendComponent::PrivateUse1Bit));
  };
  return dense(self) && dense(from);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("view", at::native::view);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("_lazy_clone", lazy_clone);
  m.impl("record_stream", record_stream);
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

}  // namespace
}  // namespace torch_tpu::lowering
