// The per-op fast path of the boxed kernels: the first call of an op with a given argument
// signature (dtypes, shapes, contiguity, devices, scalar values, non-tensor arguments, precision) records
// how its lowered graph binds the arguments; later calls with the same signature skip the
// lowering, graph building and hashing and go straight to launch (or to the fused window).
#pragma once
#include <ATen/ATen.h>

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "lowering/from_aten/lower.h"
#include "runtime/runtime.h"

namespace torch_tpu::lowering::fast {

struct Entry {
  std::shared_ptr<const ir::Graph> graph;  // outputs set; params in bind order
  uint64_t key = 0;                        // graph hash (compile cache key)
  struct Src {
    int arg = -1;        // >= 0: the tensor argument bound to this param
    uint64_t bits = 0;   // else: the scalar value (part of the signature)
    DType dtype;
  };
  std::vector<Src> srcs;
  std::vector<int> written;                                         // dst argument indices
  std::vector<std::pair<at::ScalarType, std::vector<int64_t>>> outs;  // or new outputs
};

// Builds the signature of `args`; false when they cannot be cached (generators, lists of
// tensors, non-tpu tensors other than 0-dim CPU scalars).
bool signature(Args args, std::vector<int64_t>* sig);

class Cache {
 public:
  std::shared_ptr<const Entry> find(const std::vector<int64_t>& sig, uint64_t h);
  void insert(std::vector<int64_t> sig, uint64_t h, std::shared_ptr<const Entry> e);

 private:
  std::mutex mu_;
  std::unordered_map<uint64_t, std::vector<std::pair<std::vector<int64_t>, std::shared_ptr<const Entry>>>> map_;
};

uint64_t hash_sig(const std::vector<int64_t>& sig);
// Runs `e` on `args`; returns the op's results (new tensors, or the written arguments).
std::vector<at::Tensor> replay(const Entry& e, Args args, const char* name);

}  // namespace torch_tpu::lowering::fast
