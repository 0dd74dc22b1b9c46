// The Runtime interface: compiles an IR graph into an Executable and runs it on memory
// views. Implementations: host/ (CPU, TPU numerics); pjrt/ later.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::runtime {

// A strided view of memory the caller owns (a tensor's storage). Strides are in elements.
// Valid for the duration of Executable::run only.
struct View {
  void* data = nullptr;
  ir::DType dtype = ir::DType::F32;
  ir::Shape shape;
  std::vector<int64_t> strides;  // empty = contiguous row-major
  bool contiguous() const;
};

// A compiled graph. Thread-safe: run() may be called from several threads at once.
class Executable {
 public:
  virtual ~Executable() = default;
  // Synchronous: computes the graph on the calling thread. inputs[i] binds parameter i and
  // must match its dtype and shape; outputs[i] receives graph output i (dtype and shape
  // must match). Outputs may alias inputs (in-place ops); every input is read before any
  // output is written where they overlap.
  virtual void run(const std::vector<View>& inputs, const std::vector<View>& outputs) = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual const char* name() const = 0;
  // Verifies the graph and compiles it. The executable keeps what it needs of the graph.
  virtual std::shared_ptr<Executable> compile(const ir::Graph& graph) = 0;
};

// The host runtime (CPU execution with TPU numerics). Process-lifetime singleton.
Runtime& host_runtime();

}  // namespace torch_tpu::runtime
