// Shape/dtype rules that live outside graph.cpp (not a public header): each fills n.shape
// and n.dtype from its operands and attrs, or throws Error "[op] ...". Called by infer().
#pragma once
#include "ir/graph.h"

namespace torch_tpu::ir {

void infer_index(const Graph& g, Node& n);  // gather, scatter, scatter_add (infer_indexing.cpp)
void infer_sort(const Graph& g, Node& n);   // sort, argsort
void infer_scan(const Graph& g, Node& n);   // cumsum, cumprod
void infer_linalg(const Graph& g, Node& n); // triangular_solve, custom_call (infer_linalg.cpp)
void infer_window(const Graph& g, Node& n); // convolution, reduce_window (infer_window.cpp)

}  // namespace torch_tpu::ir
