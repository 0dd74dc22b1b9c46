// Shape/dtype rules of the linalg ops: triangular_solve and the custom_call targets
// (custom_calls.def), plus the target table.
#include <algorithm>
#include <string>
#include <tuple>

#include "base/error.h"
#include "ir/custom_call.h"
#include "ir/infer_internal.h"

namespace torch_tpu::ir {

namespace {
const CustomCallInfo kTargets[] = {
#define CUSTOM_CALL(name, f32_target, f64_target, operands, results, ...) \
  {#name, {f32_target, f64_target}, operands, results, {__VA_ARGS__}},
#include "ir/custom_calls.def"
};

Shape batch_of(const Shape& s, size_t core) { return Shape(s.begin(), s.end() - core); }

// The operand `i` of n, checked to have rank >= core + its batch dims equal to `batch`.
const Node& operand(const Graph& g, const Node& n, size_t i, size_t core, const Shape& batch,
                    const std::string& op) {
  const Node& x = g.nodes()[n.operands[i]];
  TPU_CHECK(x.shape.size() >= core, "[", op, "] operand ", i, " needs rank >= ", core, "; got ",
            shape_str(x.shape));
  TPU_CHECK(batch_of(x.shape, core) == batch, "[", op, "] operand ", i, " batch dims mismatch; got ",
            shape_str(x.shape), ", expected batch ", shape_str(batch));
  return x;
}

void check_float(const Node& x, const std::string& op) {
  TPU_CHECK(x.dtype == DType::F32 || x.dtype == DType::F64, "[", op,
            "] unsupported dtype; got ", dtype_name(x.dtype), ", expected f32 or f64");
}

Shape cat(Shape b, std::initializer_list<int64_t> tail) {
  b.insert(b.end(), tail);
  return b;
}

void infer_triangular_solve(const Graph& g, Node& n) {
  const Node& a = g.nodes()[n.operands[0]];
  const Node& b = g.nodes()[n.operands[1]];
  TPU_CHECK(n.attrs.dims.size() == 4, "[triangular_solve] attrs.dims must be {left_side, lower, "
            "unit_diagonal, transpose_a}; got ", n.attrs.dims.size(), " values");
  TPU_CHECK(n.attrs.dims[3] >= 0 && n.attrs.dims[3] <= 2, "[triangular_solve] transpose_a out of range; got ",
            n.attrs.dims[3], ", expected 0, 1 or 2");
  check_float(a, "triangular_solve");
  TPU_CHECK(a.dtype == b.dtype, "[triangular_solve] operand dtypes differ; got ", dtype_name(a.dtype),
            " and ", dtype_name(b.dtype));
  TPU_CHECK(a.shape.size() >= 2 && b.shape.size() == a.shape.size(),
            "[triangular_solve] operands need equal rank >= 2; got ", shape_str(a.shape), " and ",
            shape_str(b.shape));
  size_t r = a.shape.size();
  TPU_CHECK(a.shape[r - 1] == a.shape[r - 2], "[triangular_solve] a must be square; got ", shape_str(a.shape));
  TPU_CHECK(batch_of(a.shape, 2) == batch_of(b.shape, 2), "[triangular_solve] batch dims mismatch; got ",
            shape_str(a.shape), " and ", shape_str(b.shape));
  int64_t k = a.shape[r - 1], need = n.attrs.dims[0] ? b.shape[r - 2] : b.shape[r - 1];
  TPU_CHECK(k == need, "[triangular_solve] a is ", k, "x", k, " but b ", shape_str(b.shape),
            " needs ", need, "x", need, n.attrs.dims[0] ? " (left side)" : " (right side)");
  n.shape = b.shape;
  n.dtype = b.dtype;
}

}  // namespace

const CustomCallInfo& custom_call_info(CustomCallTarget t) { return kTargets[static_cast<int>(t)]; }

Attrs custom_call_attrs(CustomCallTarget target, int64_t index, std::vector<int64_t> params) {
  Attrs a;
  a.ivalue = static_cast<int64_t>(target);
  a.dims = {index};
  a.dims.insert(a.dims.end(), params.begin(), params.end());
  return a;
}

// sdpa_fwd / sdpa_bwd (custom_calls.def): f32 q [.., L, E], k [.., S, E], v [.., S, Ev]
// (heads_inner: [B, L, H, E], [B, S, H, E], [B, S, H, Ev]); backward also dout (out's shape)
// and logsumexp [.., L] ([B, H, L]).
static std::vector<CallResult> sdpa_results(const Graph& g, const Node& n, CustomCallTarget t, const std::string& op) {
  const bool inner = n.attrs.dims[4] != 0;
  const Node& q = g.nodes()[n.operands[0]];
  const Node& k = g.nodes()[n.operands[1]];
  const Node& v = g.nodes()[n.operands[2]];
  for (const Node* x : {&q, &k, &v}) {
    TPU_CHECK(x->dtype == DType::F32, "[", op, "] unsupported dtype; got ", dtype_name(x->dtype), ", expected f32");
    TPU_CHECK(inner ? x->shape.size() == 4 : x->shape.size() >= 2, "[", op, "] q, k, v need rank ",
              inner ? "4 ([B, rows, heads, width])" : ">= 2", "; got ", shape_str(x->shape));
  }
  // (batch dims, rows, width) of each operand, in the heads-outermost view
  auto view = [&](const Shape& s) {
    if (!inner) return std::tuple(batch_of(s, 2), s[s.size() - 2], s.back());
    return std::tuple(Shape{s[0], s[2]}, s[1], s[3]);
  };
  const auto [bq, L, E] = view(q.shape);
  const auto [bk, S, Ek] = view(k.shape);
  const auto [bv, Sv, Ev] = view(v.shape);
  TPU_CHECK(bk == bq && bv == bq, "[", op, "] batch / head dims differ; got ", shape_str(q.shape), ", ",
            shape_str(k.shape), " and ", shape_str(v.shape));
  TPU_CHECK(Ek == E, "[", op, "] key width ", Ek, " differs from the query's ", E);
  TPU_CHECK(Sv == S, "[", op, "] ", S, " keys but ", Sv, " values");
  const Shape out = inner ? Shape{q.shape[0], L, q.shape[2], Ev} : cat(bq, {L, Ev});
  const Shape lse = cat(bq, {L});
  if (t == CustomCallTarget::SdpaFwd) return {{out, DType::F32}, {lse, DType::F32}};
  const Node& dout = g.nodes()[n.operands[3]];
  const Node& l = g.nodes()[n.operands[4]];
  TPU_CHECK(dout.shape == out && l.shape == lse && dout.dtype == DType::F32 && l.dtype == DType::F32, "[", op,
            "] dout and logsumexp must be f32 ", shape_str(out), " and ", shape_str(lse), "; got ",
            dtype_name(dout.dtype), shape_str(dout.shape), " and ", dtype_name(l.dtype), shape_str(l.shape));
  return {{q.shape, DType::F32}, {k.shape, DType::F32}, {v.shape, DType::F32}};
}

std::vector<CallResult> custom_call_results(const Graph& g, const Node& n) {
  TPU_CHECK(n.attrs.ivalue >= 0 && n.attrs.ivalue < static_cast<int64_t>(CustomCallTarget::kNumTargets),
            "[custom_call] unknown target id ", n.attrs.ivalue);
  CustomCallTarget t = target_of(n);
  const CustomCallInfo& info = custom_call_info(t);
  const std::string op = std::string("custom_call ") + info.target[0];
  TPU_CHECK(static_cast<int>(n.operands.size()) == info.operands, "[", op, "] wrong operand count; got ",
            n.operands.size(), ", expected ", info.operands);
  TPU_CHECK(n.attrs.dims.size() == 1 + info.params.size(), "[", op, "] needs attrs.dims = {result index",
            info.params.empty() ? "" : ", params", "}; got ", n.attrs.dims.size(), " values, expected ",
            1 + info.params.size());
  auto p = [&](size_t i) { return n.attrs.dims[1 + i]; };
  const Node& x = g.nodes()[n.operands[0]];
  if (t == CustomCallTarget::LuPivotsToPermutation) {
    TPU_CHECK(x.dtype == DType::I32 && !x.shape.empty(), "[", op, "] pivots must be i32 of rank >= 1; got ",
              dtype_name(x.dtype), shape_str(x.shape));
    TPU_CHECK(p(0) >= x.shape.back(), "[", op, "] permutation size ", p(0), " is less than the ",
              x.shape.back(), " pivots");
    return {{cat(batch_of(x.shape, 1), {p(0)}), DType::I32}};
  }
  if (t == CustomCallTarget::SdpaFwd || t == CustomCallTarget::SdpaBwd) return sdpa_results(g, n, t, op);
  check_float(x, op);
  TPU_CHECK(x.shape.size() >= 2, "[", op, "] operand 0 needs rank >= 2; got ", shape_str(x.shape));
  const Shape batch = batch_of(x.shape, 2);
  const int64_t m = x.shape[x.shape.size() - 2], c = x.shape.back(), k = std::min(m, c);
  const DType dt = x.dtype, i32 = DType::I32;
  auto square = [&] { TPU_CHECK(m == c, "[", op, "] matrix must be square; got ", shape_str(x.shape)); };
  auto same_dtype = [&](const Node& y) {
    TPU_CHECK(y.dtype == dt, "[", op, "] operand dtypes differ; got ", dtype_name(y.dtype), ", expected ",
              dtype_name(dt));
  };
  switch (t) {
    case CustomCallTarget::Getrf:
      return {{x.shape, dt}, {cat(batch, {k}), i32}, {batch, i32}};
    case CustomCallTarget::Geqrf:
    case CustomCallTarget::XlaQr:
      return {{x.shape, dt}, {cat(batch, {k}), dt}};
    case CustomCallTarget::Orgqr:
    case CustomCallTarget::XlaHouseholderProduct: {
      const Node& tau = operand(g, n, 1, 1, batch, op);
      same_dtype(tau);
      TPU_CHECK(m >= c && c >= tau.shape.back(), "[", op, "] needs rows >= cols >= reflectors; got ",
                shape_str(x.shape), " and tau ", shape_str(tau.shape));
      return {{x.shape, dt}};
    }
    case CustomCallTarget::Ormqr: {
      const Node& tau = operand(g, n, 1, 1, batch, op);
      const Node& cm = operand(g, n, 2, 2, batch, op);
      same_dtype(tau);
      same_dtype(cm);
      int64_t r = p(0) ? cm.shape[cm.shape.size() - 2] : cm.shape.back();
      TPU_CHECK(m == r && tau.shape.back() <= std::min(m, c), "[", op, "] reflectors ", shape_str(x.shape),
                " with tau ", shape_str(tau.shape), " do not fit c ", shape_str(cm.shape));
      return {{cm.shape, dt}};
    }
    case CustomCallTarget::Potrf:
      square();
      return {{x.shape, dt}, {batch, i32}};
    case CustomCallTarget::Syevd:
      square();
      return {{cat(batch, {m}), dt}, {cat(batch, {m, p(1) ? m : 0}), dt}, {batch, i32}};
    case CustomCallTarget::Gesdd: {
      int64_t uc = p(1) ? (p(0) ? m : k) : 0, vr = p(1) ? (p(0) ? c : k) : 0;
      return {{cat(batch, {k}), dt}, {cat(batch, {m, uc}), dt}, {cat(batch, {vr, c}), dt}, {batch, i32}};
    }
    case CustomCallTarget::XlaEigh:
      square();
      return {{x.shape, dt}, {cat(batch, {m}), dt}};
    case CustomCallTarget::Sytrf:
      square();
      return {{x.shape, dt}, {cat(batch, {m}), i32}, {batch, i32}};
    case CustomCallTarget::Sytrs: {
      square();
      const Node& piv = operand(g, n, 1, 1, batch, op);
      const Node& b = operand(g, n, 2, 2, batch, op);
      TPU_CHECK(piv.dtype == i32 && piv.shape.back() == m, "[", op, "] pivots must be i32 [.., ", m, "]; got ",
                dtype_name(piv.dtype), shape_str(piv.shape));
      same_dtype(b);
      TPU_CHECK(b.shape[b.shape.size() - 2] == m, "[", op, "] b rows mismatch; got ", shape_str(b.shape),
                ", expected ", m, " rows");
      return {{b.shape, dt}};
    }
    default:
      TPU_CHECK(false, "[", op, "] no result rule");
  }
  return {};
}

void infer_linalg(const Graph& g, Node& n) {
  if (n.op == OpCode::TriangularSolve) return infer_triangular_solve(g, n);
  TPU_CHECK(!n.attrs.dims.empty(), "[custom_call] attrs.dims must start with the result index");
  auto results = custom_call_results(g, n);
  int64_t i = n.attrs.dims[0];
  TPU_CHECK(i >= 0 && i < static_cast<int64_t>(results.size()), "[custom_call ",
            custom_call_info(target_of(n)).target[0], "] result index out of range; got ", i, ", expected < ",
            results.size());
  n.shape = results[i].shape;
  n.dtype = results[i].dtype;
}

}  // namespace torch_tpu::ir
