// The per-op fast path of the boxed kernels: the first call of an op with a given argument
// signature (dtypes, shapes, contiguity, devices, non-tensor arguments, precision) records
// how its lowered graph binds the arguments; later calls with the same signature skip the
// lowering, graph building and hashing and go straight to launch (or to the fused window).
// The values of Scalar arguments and 0-dim CPU tensors are part of the signature unless the
// lowering bound every one of them with Lower::scalar_arg: then one entry serves all values
// (read from the arguments at replay). Each op's caches are bounded.
#pragma once
#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
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
    int value = -1;      // >= 0: a scalar_arg operand: the value of that argument, not `bits`
    int elem = -1;       // >= 0: `arg` is a list (cat's tensors, index's indices): its element
    bool flat = false;   // bound as the flat storage run its view spans (exec::flat_run)
  };
  std::vector<Src> srcs;
  std::vector<int> written;                                         // dst argument indices
  // Per written argument, the sizes the lowering resized it to (at::native::resize_output, an
  // out= tensor given empty: arange's); empty when it kept its shape. Replay resizes alike.
  std::vector<std::optional<std::vector<int64_t>>> resized;
  std::vector<int> also;  // arguments written after the results (Lower::also_write), not returned
  struct Out {
    at::ScalarType dtype;
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;  // empty: contiguous (else PyTorch's layout for these inputs)
  };
  std::vector<Out> outs;  // or new outputs
  // Range checks launched with the graph (Lower::check): its last outputs are their 0-d bool
  // flags, in this order; replay allocates the flags and queues the checks as the lowering did.
  std::vector<std::string> checks;
};

// Builds the signature of `args`; false when they cannot be cached (generators, non-tpu
// tensors other than 0-dim CPU scalars, lists holding anything but tpu tensors and None). The values of the arguments marked
// in `scalar_args` (the schema's Scalar arguments) and of 0-dim CPU tensors come last: the
// first `*main` entries are the signature without them.
bool signature(Args args, const std::vector<bool>& scalar_args, std::vector<int64_t>* sig, size_t* main);
// The arguments whose values signature() left out of the first `main` entries.
std::vector<int> value_args(Args args, const std::vector<bool>& scalar_args);

constexpr uint64_t kHashSeed = 1469598103934665603ull;
uint64_t hash_sig(const int64_t* p, size_t n, uint64_t seed = kHashSeed);

// Entries recorded so far, over all ops: per value, and for all values (scalar_arg).
struct Counters {
  int64_t entries = 0, generic_entries = 0;
};
Counters counters();
void count_entry(bool generic);

// Entries by signature, at most kMaxEntries (then it starts over: an op called with ever new
// signatures re-records, it does not grow). Thread-safe. A thread's repeated lookups hit its
// own small front table (its last hits, over all caches) without the lock; an entry depends
// only on its signature, so a front slot stays right after the shared map starts over.
class Cache {
 public:
  static constexpr size_t kMaxEntries = 256;
  Cache();
  // The entry for `sig` (n values, hash h), or nullptr. A front-table hit returns a pointer
  // that does not own the entry: it stays valid until this thread's next find() on any Cache
  // (the front slot keeps the entry alive meanwhile).
  std::shared_ptr<const Entry> find(const int64_t* sig, size_t n, uint64_t h);
  void insert(std::vector<int64_t> sig, uint64_t h, std::shared_ptr<const Entry> e);
  size_t size();

 private:
  const uint64_t id_;  // tells this cache's front slots from another's
  std::mutex mu_;
  std::atomic<size_t> count_{0};  // written under mu_; read without it by find()
  std::unordered_map<uint64_t, std::vector<std::pair<std::vector<int64_t>, std::shared_ptr<const Entry>>>> map_;
};

// Runs `e` on `args`; returns the op's new result tensors (none for an op that writes its
// arguments: self, out=, and the `also` arguments).
std::vector<at::Tensor> replay(const Entry& e, Args args, const char* name);

}  // namespace torch_tpu::lowering::fast
