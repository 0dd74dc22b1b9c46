// Shape/dtype rules of the axis ops: gather / scatter / scatter_add, sort / argsort and the
// inclusive scans. Their semantics are documented on their rows in ops.def.
#include "base/error.h"
#include "ir/infer_internal.h"

namespace torch_tpu::ir {
namespace {

// The one axis of attrs.dims, checked against `rank`.
int64_t axis_of(const Node& n, size_t rank) {
  const char* op = op_info(n.op).hlo;
  TPU_CHECK(n.attrs.dims.size() == 1, "[", op, "] needs exactly one dimension; got ",
            n.attrs.dims.size());
  int64_t a = n.attrs.dims[0];
  TPU_CHECK(a >= 0 && a < static_cast<int64_t>(rank), "[", op,
            "] dimension out of range; got ", a, ", expected 0 <= d < ", rank);
  return a;
}

}  // namespace

void infer_index(const Graph& g, Node& n) {
  const char* op = op_info(n.op).hlo;
  const Node& x = g.nodes()[n.operands[0]];
  const Node& idx = g.nodes()[n.operands[1]];
  int64_t a = axis_of(n, x.shape.size());
  TPU_CHECK(idx.dtype == DType::I32 || idx.dtype == DType::I64, "[", op,
            "] indices must be i32 or i64; got ", dtype_name(idx.dtype));
  TPU_CHECK(idx.shape.size() == x.shape.size(), "[", op, "] indices rank mismatch; got ",
            shape_str(idx.shape), ", expected rank ", x.shape.size());
  for (size_t d = 0; d < x.shape.size(); ++d)
    TPU_CHECK(static_cast<int64_t>(d) == a || idx.shape[d] <= x.shape[d], "[", op,
              "] indices larger than the operand outside the axis; got ", shape_str(idx.shape),
              ", expected <= ", shape_str(x.shape), " in dim ", d);
  n.dtype = x.dtype;
  if (n.op == OpCode::Gather) {
    TPU_CHECK(x.shape[a] > 0 || numel(idx.shape) == 0, "[gather] cannot index an empty axis ",
              a, " of ", shape_str(x.shape));
    n.shape = idx.shape;
    return;
  }
  const Node& u = g.nodes()[n.operands[2]];
  TPU_CHECK(u.shape == idx.shape, "[scatter] updates shape mismatch; got ", shape_str(u.shape),
            ", expected the indices shape ", shape_str(idx.shape));
  TPU_CHECK(u.dtype == x.dtype, "[scatter] updates dtype mismatch; got ", dtype_name(u.dtype),
            ", expected ", dtype_name(x.dtype));
  if (n.op == OpCode::ScatterReduce)
    TPU_CHECK(n.attrs.reducer == Reducer::Prod || n.attrs.reducer == Reducer::Max ||
                  n.attrs.reducer == Reducer::Min,
              "[scatter] scatter_reduce needs a prod, max or min reducer; got reducer ",
              static_cast<int>(n.attrs.reducer));
  n.shape = x.shape;
}

void infer_sort(const Graph& g, Node& n) {
  const Node& x = g.nodes()[n.operands[0]];
  axis_of(n, x.shape.size());
  TPU_CHECK(n.attrs.ivalue == 0 || n.attrs.ivalue == 1,
            "[sort] attrs.ivalue must be 0 (ascending) or 1 (descending); got ", n.attrs.ivalue);
  n.shape = x.shape;
  n.dtype = n.op == OpCode::Sort ? x.dtype : DType::I64;
}

void infer_scan(const Graph& g, Node& n) {
  const Node& x = g.nodes()[n.operands[0]];
  axis_of(n, x.shape.size());
  TPU_CHECK(!is_bool(x.dtype), "[", n.op == OpCode::Cumsum ? "cumsum" : "cumprod",
            "] unsupported dtype i1");
  n.shape = x.shape;
  n.dtype = x.dtype;
}

}  // namespace torch_tpu::ir
