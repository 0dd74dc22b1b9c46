// The Runtime interface, the seam between the eager machinery and an executor: opaque device
// Buffers, transfers, and Executables compiled from IR graphs. Implementations: host/ (CPU,
// TPU numerics); pjrt/ (a PJRT plugin) next. docs/decisions/runtime-seam.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::runtime {

// Device memory: an opaque handle owned by the runtime that allocated it. Only that runtime
// interprets it (the host runtime's handle is its memory address; a PJRT runtime's is a slot
// holding the current PJRT buffer). Nothing above csrc/runtime dereferences it.
struct Buffer;

// An operand of an executable or a transfer: elements of a device Buffer seen with a shape
// and strides, or (inputs only) host bytes. Strides are in elements (may be 0 or negative);
// empty strides = row-major contiguous. A host operand is dense row-major; the caller keeps
// its bytes alive and unchanged until the call returns.
struct View {
  Buffer* buffer = nullptr;         // device operand
  ir::DType dtype = ir::DType::F32;
  ir::Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;               // elements from the buffer's start
  const std::byte* host = nullptr;  // host operand (scalars, staged uploads) instead of a buffer
  bool contiguous() const;
};

// A compiled graph. Thread-safe: run() may be called from several threads at once.
class Executable {
 public:
  virtual ~Executable() = default;
  // Synchronous: computes the graph on the calling thread. inputs[i] binds parameter i and
  // must match its dtype and shape; outputs[i] (device views) receives graph output i. Outputs
  // may alias inputs (in-place ops); every input is read before any output is written where
  // they overlap. Nothing but the output views is written.
  virtual void run(const std::vector<View>& inputs, const std::vector<View>& outputs) = 0;
};

// What a runtime offers. Every call is synchronous on the calling thread; the exec layer
// orders calls that touch device memory on the device's command stream (runtime/stream.h),
// which is how transfers become asynchronous and ordered for the user. Thread-safe.
class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual const char* name() const = 0;
  // Verifies the graph and compiles it. The executable keeps what it needs of the graph.
  virtual std::shared_ptr<Executable> compile(const ir::Graph& graph) = 0;
  // Asked by the compile cache after each compile: true when the executables kept alive
  // crowd a process resource (XLA:CPU maps each one's code into memory, and the kernel caps a
  // process's memory maps), so the cache should drop its least recently used half.
  virtual bool executables_crowded() { return false; }

  // The size the caching allocator asks for and pools under, for a request of `nbytes`: a
  // runtime that pays for each allocation rounds up to size classes; one whose buffers are
  // whole-array values (PJRT) keeps the exact size, so a storage is exactly its tensor.
  virtual size_t allocation_size(size_t nbytes) const { return nbytes; }
  // Device memory of `nbytes` on device `dev` (uninitialized); null when the device is out
  // of memory. Freed with deallocate(), once no queued work uses it.
  virtual Buffer* allocate(int dev, size_t nbytes) = 0;
  virtual void deallocate(Buffer* b) = 0;
  // Host -> device: writes the dense row-major bytes `src` into the device view `dst`.
  virtual void write(const View& dst, const std::byte* src) = 0;
  // Device -> host: reads the device view `src` into dense row-major bytes at `dst`.
  virtual void read(const View& src, std::byte* dst) = 0;
  // Device -> device: `nbytes` from src (byte offset src_off) to dst (byte offset dst_off).
  virtual void copy(Buffer* dst, size_t dst_off, Buffer* src, size_t src_off, size_t nbytes) = 0;
};

// The process's runtime: chosen once, from TORCH_TPU_RUNTIME (default "host") or
// select() before first use. Unknown names raise an Error listing the known ones.
Runtime& current();
// Chooses the runtime by name before first use; an Error when another one is already in use.
void select(const std::string& name);
// Names of the runtimes this build has.
std::vector<std::string> available();
// The host runtime (CPU execution with TPU numerics). Process-lifetime singleton.
Runtime& host_runtime();
// The PJRT runtime (runtime/pjrt/runtime.cpp): the plugin from TORCH_TPU_PJRT_PLUGIN (or the
// installed XLA CPU plugin), loaded on first call; throws Error when none can be loaded.
Runtime& pjrt_runtime();

}  // namespace torch_tpu::runtime
