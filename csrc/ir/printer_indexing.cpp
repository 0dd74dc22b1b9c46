// StableHLO printers for the axis ops. gather / scatter along an axis become full-coordinate
// stablehlo.gather / stablehlo.scatter: the indices, plus an iota for every other dim, are
// concatenated into [..., rank] start indices (each slice is one element). sort / argsort
// are stablehlo.sort (variadic with an iota for argsort) with a comparator that puts NaN
// last and ties -0.0 with 0.0; cumsum / cumprod are reduce_window with a window of the
// whole axis padded (n - 1, 0) in front.
#include "base/error.h"
#include "ir/printer_internal.h"

namespace torch_tpu::ir::printer {
namespace {

std::string scalar(DType t) { return tensor_type({}, t); }

std::string dim_list(int64_t n) {
  std::string r = "[";
  for (int64_t i = 0; i < n; ++i) r += (i ? ", " : "") + std::to_string(i);
  return r + "]";
}

// The [indices..., rank] full coordinates of a take-along-axis over an operand of `rank`.
std::string coordinates(Emitter& e, int id, int idx, int64_t rank, int64_t axis) {
  const Node& in = e.graph().nodes()[idx];
  Shape one = in.shape;
  one.push_back(1);
  std::string one_type = tensor_type(one, in.dtype);
  std::vector<std::string> parts, types;
  for (int64_t d = 0; d < rank; ++d) {
    std::string c = e.name(idx);
    if (d != axis)
      c = e.tmp(id, "iota", {}, {}, "iota_dimension = " + std::to_string(d) + " : i64",
                e.type(idx));
    parts.push_back(e.tmp(id, "reshape", {c}, {e.type(idx)}, "", one_type));
    types.push_back(one_type);
  }
  if (rank == 1) return parts[0];
  Shape all = in.shape;
  all.push_back(rank);
  return e.tmp(id, "concatenate", parts, types,
               "dimension = " + std::to_string(rank) + " : i64", tensor_type(all, in.dtype));
}

std::string coordinates_type(const Emitter& e, int idx, int64_t rank) {
  const Node& in = e.graph().nodes()[idx];
  Shape all = in.shape;
  all.push_back(rank);
  return tensor_type(all, in.dtype);
}

// Writes ` {attrs} : (in) -> out` and a newline after a region.
void tail(Emitter& e, const std::string& attrs, const std::vector<std::string>& in,
          const std::vector<std::string>& out) {
  e.out() << " {" << attrs << "} : (";
  for (size_t i = 0; i < in.size(); ++i) e.out() << (i ? ", " : "") << in[i];
  e.out() << ") -> ";
  if (out.size() > 1) e.out() << "(";
  for (size_t i = 0; i < out.size(); ++i) e.out() << (i ? ", " : "") << out[i];
  e.out() << (out.size() > 1 ? ")\n" : "\n");
}

}  // namespace

void emit_gather(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  int x = n.operands[0], idx = n.operands[1];
  int64_t rank = static_cast<int64_t>(e.graph().nodes()[x].shape.size());
  if (numel(e.graph().nodes()[x].shape) == 0) {
    // Nothing to gather from (StableHLO rejects slice sizes of 1 on an empty dim): the result
    // is empty too, or every index is out of range (raised by the lowering's range check).
    std::string ty = e.type(id);
    e.line(e.name(id), "constant", {}, {}, "value = dense<" + literal(n.dtype, 0, 0) + "> : " + ty, ty);
    return;
  }
  std::string coords = coordinates(e, id, idx, rank, n.attrs.dims.at(0));
  std::string dims = dim_list(rank);
  std::string attrs = "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = " + dims +
                      ", start_index_map = " + dims + ", index_vector_dim = " +
                      std::to_string(rank) + ">, slice_sizes = " +
                      i64_array(std::vector<int64_t>(rank, 1)) + ", indices_are_sorted = false";
  e.line(e.name(id), "gather", {e.name(x), coords}, {e.type(x), coordinates_type(e, idx, rank)},
         attrs, e.type(id));
}

void emit_scatter(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  int x = n.operands[0], idx = n.operands[1], upd = n.operands[2];
  int64_t rank = static_cast<int64_t>(n.shape.size());
  std::string coords = coordinates(e, id, idx, rank, n.attrs.dims.at(0));
  std::string s = scalar(n.dtype);
  begin_op(e, e.name(id), "scatter", {e.name(x), coords, e.name(upd)});
  auto a = open_region(e, id, {s, s});
  std::string v = a[1];  // scatter: the update replaces the element
  if (n.op == OpCode::ScatterAdd) v = e.tmp(id, "add", {a[0], a[1]}, {s, s}, "", s);
  if (n.op == OpCode::ScatterReduce && n.attrs.reducer == Reducer::Prod) {
    v = e.tmp(id, "multiply", {a[0], a[1]}, {s, s}, "", s);
  } else if (n.op == OpCode::ScatterReduce) {  // max / min keep a NaN of either side, as PyTorch
    v = e.fresh(id);
    emit_min_max(e, id, v, n.attrs.reducer == Reducer::Max ? "maximum" : "minimum", a[0], a[1], {}, n.dtype);
  }
  close_region(e, {v}, s);
  std::string dims = dim_list(rank);
  tail(e,
       "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = " + dims +
           ", scatter_dims_to_operand_dims = " + dims + ", index_vector_dim = " +
           std::to_string(rank) + ">, indices_are_sorted = false, unique_indices = false",
       {e.type(x), coordinates_type(e, idx, rank), e.type(upd)}, {e.type(id)});
}

// Comparator: ascending a < b, or a is a number and b NaN; descending a > b, or a is NaN
// and b a number. Float compares treat -0.0 == 0.0; ties are kept in order (is_stable).
void emit_sort(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  const Node& xn = e.graph().nodes()[n.operands[0]];
  DType t = xn.dtype;
  bool desc = n.attrs.ivalue & 1, arg = n.op == OpCode::ArgSort;
  int64_t dim = n.attrs.dims.at(0);
  std::string vs = scalar(t), is = scalar(DType::I64), bs = scalar(DType::Bool);
  std::string xt = tensor_type(xn.shape, t), it = tensor_type(xn.shape, DType::I64);
  std::vector<std::string> args = {e.name(n.operands[0])}, in = {xt}, out = {xt},
                           block = {vs, vs};
  if (arg) {
    args.push_back(e.tmp(id, "iota", {}, {}, "iota_dimension = " + std::to_string(dim) + " : i64", it));
    in.push_back(it);
    out.push_back(it);
    block = {vs, vs, is, is};
  }
  std::string res = arg ? e.fresh(id) : e.name(id);
  begin_op(e, arg ? res + ":2" : res, "sort", args);
  auto a = open_region(e, id, block);
  auto cmp = [&](Cmp c, const std::string& l, const std::string& r) {
    return e.tmp(id, "compare", {l, r}, {vs, vs}, compare_attrs(c, t), bs);
  };
  std::string less = cmp(desc ? Cmp::GT : Cmp::LT, a[0], a[1]);
  if (is_float(t)) {
    std::string num = cmp(Cmp::EQ, a[desc ? 1 : 0], a[desc ? 1 : 0]);  // the one that must be a number
    std::string nan = cmp(Cmp::NE, a[desc ? 0 : 1], a[desc ? 0 : 1]);  // the one that must be NaN
    std::string nan_order = e.tmp(id, "and", {num, nan}, {bs, bs}, "", bs);
    less = e.tmp(id, "or", {less, nan_order}, {bs, bs}, "", bs);
  }
  close_region(e, {less}, bs);
  tail(e, "dimension = " + std::to_string(dim) + " : i64, is_stable = true", in, out);
  if (arg) e.set_name(id, res + "#1");
}

void emit_scan(Emitter& e, int id) {
  const Node& n = e.graph().nodes()[id];
  int x = n.operands[0];
  bool prod = n.op == OpCode::Cumprod;
  // 16-bit floats scan in f32 and round once.
  bool widen = n.dtype == DType::F16 || n.dtype == DType::BF16;
  DType w = widen ? DType::F32 : n.dtype;
  std::string wt = tensor_type(n.shape, w), s = scalar(w);
  std::string in = widen ? e.tmp(id, "convert", {e.name(x)}, {e.type(x)}, "", wt) : e.name(x);
  std::string init = e.splat(id, literal(w, prod ? 1.0 : 0.0, prod ? 1 : 0), {}, w);
  int64_t axis = n.attrs.dims.at(0), rank = static_cast<int64_t>(n.shape.size());
  int64_t len = std::max<int64_t>(n.shape[axis], 1);
  std::vector<int64_t> window(rank, 1);
  window[axis] = len;
  std::string pad = "dense<[";
  for (int64_t d = 0; d < rank; ++d)
    pad += std::string(d ? ", " : "") + "[" + std::to_string(d == axis ? len - 1 : 0) + ", 0]";
  pad += "]> : tensor<" + std::to_string(rank) + "x2xi64>";
  std::string res = widen ? e.fresh(id) : e.name(id);
  begin_op(e, res, "reduce_window", {in, init});
  auto a = open_region(e, id, {s, s});
  std::string v = e.tmp(id, prod ? "multiply" : "add", {a[0], a[1]}, {s, s}, "", s);
  close_region(e, {v}, s);
  tail(e, "window_dimensions = " + i64_array(window) + ", padding = " + pad, {wt, s}, {wt});
  if (widen) e.line(e.name(id), "convert", {res}, {wt}, "", e.type(id));
}

}  // namespace torch_tpu::ir::printer
