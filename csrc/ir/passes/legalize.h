// Layout legalization: rewrites a graph whose parameters and outputs are bound to strided
// views of storages into one that reads and writes whole storages, the form an accelerator
// runtime (PJRT) executes: every parameter a whole dense buffer, every output a storage's
// whole next value, an input's buffer reused only where it is donated. Torch-free.
#pragma once
#include <vector>

#include "ir/graph.h"
#include "ir/passes/views.h"

namespace torch_tpu::ir {

// The legalized graph and how its parameters and outputs map to storages. Plain data; the
// caller owns it.
struct Legalized {
  Graph graph;
  // Per parameter of `graph`: the storage whose whole value it takes (a flat
  // [storage_numel] array of the storage's dtype), or -1 for a pass-through parameter.
  std::vector<int> param_storage;
  // Per parameter of `graph`: for a pass-through, the index of the original parameter it is
  // (same dtype and shape); -1 for a storage parameter.
  std::vector<int> param_origin;
  // Per output of `graph`: the storage whose whole next value it is (flat [storage_numel]),
  // or -1 for a pass-through output.
  std::vector<int> output_storage;
  // Per output of `graph`: for a pass-through, the index of the original output it is; -1
  // for a storage output.
  std::vector<int> output_origin;
  // Per output of `graph`: the parameter holding the same storage's old value, whose buffer
  // the output may reuse (donation), or -1. The old value is dead after the graph runs:
  // the storage's next value replaces it.
  std::vector<int> donated;
  // Per parameter of `graph`: for the i64 scalar holding a dynamic-offset view's lowest
  // element (StorageView::dynamic_offset), that view's index (i for params[i],
  // params.size() + j for outputs[j]); -1 otherwise (param_storage and param_origin are -1
  // for these).
  std::vector<int> param_view;
};

// Legalizes `g`. params[i] binds parameter i of g, outputs[j] binds output j (StorageView,
// views.h; storage < 0: pass through). Semantics preserved (those of Executable::run): every
// parameter reads the storages' values before the graph runs; outputs are written in order,
// so where they overlap the later one wins. Each view's dtype is the dtype of the parameter
// / output it binds; all views of one storage must agree on dtype and storage_numel.
//
// Result: one parameter per distinct storage read (in order of first read, pass-through
// parameters in their place among them), then one per storage written but not read whose
// first write leaves some of its elements (it needs the old value); one output per distinct
// storage written (in order of first write, pass-through outputs in their place among
// them), then one i64 scalar per dynamic-offset view (parameters' views, then outputs').
// A storage both read and written is donated. Throws Error "[legalize] ..." on a
// view outside its storage or a binding that does not match the graph.
Legalized legalize(const Graph& g, const std::vector<StorageView>& params,
                   const std::vector<StorageView>& outputs);

}  // namespace torch_tpu::ir
