// The device/ contract used by the rest of the extension: device count and current
// device (thread-local, shared with the guard), the caching allocator, and the Philox
// generator. Implemented in allocator.cpp, guard.cpp, generator.cpp.
#pragma once
#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "runtime/runtime.h"

namespace torch_tpu::device {

// Number of "tpu" devices (env TORCH_TPU_NUM_DEVICES, default 1; read once).
int device_count();
// Raises "[who] invalid device index; got tpu:i, expected tpu:0..n-1 (n tpu devices; env
// TORCH_TPU_NUM_DEVICES)" unless 0 <= idx < device_count().
void check_index(const char* who, int idx);
// The calling thread's current device (set by the guard / torch.tpu.set_device).
int current_device();
void set_current_device(int idx);

// The caching allocator for device memory (runtime Buffers; stream-ordered reuse).
// DataPtrs carry Device(PrivateUse1, current_device()). Thread-safe.
c10::Allocator* allocator();
// The runtime Buffer behind a tpu storage's data pointer (the allocator makes the data
// pointer the Buffer handle). Only the runtime may look inside it.
inline runtime::Buffer* buffer_of(const void* data) { return static_cast<runtime::Buffer*>(const_cast<void*>(data)); }
// Queues a device copy of `n` bytes from the storage data pointer `src` to `dst` on device
// `dev`'s stream (after the commands queued so far, which may still write src). Returns at once.
void copy_bytes(int dev, const void* dst, const void* src, size_t n);

// Reserves `n` Philox counters from `gen` (or the default generator of device `dev` when
// gen is empty) and returns {seed, offset}: the caller's random op uses counters
// [offset, offset + n). The generator's offset advances by n rounded up to a multiple of 4.
std::pair<uint64_t, uint64_t> philox_reserve(const std::optional<at::Generator>& gen, int dev,
                                             uint64_t n);
const at::Generator& default_generator(int dev);

}  // namespace torch_tpu::device
