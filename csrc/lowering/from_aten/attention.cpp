// scaled_dot_product_attention's fused path on tpu (docs/decisions/sdpa-math-path.md):
// `_fused_sdp_choice_stub` for PrivateUse1 picks SDPBackend::overrideable for the problems the
// kernel takes (4-D f32/bf16 q, k, v with equal heads or GQA, no attn_mask, no dropout, static
// sizes), else the math path as before. `_scaled_dot_product_fused_attention_overrideable`
// (+ `_backward`, autograd's formula for it) lower to the sdpa_fwd / sdpa_bwd custom calls
// (ir/custom_calls.def): on the host runtime runtime/host/attention.cpp (a causal problem skips
// the masked half of its products and no [L, S] score tensor is stored), on pjrt their
// StableHLO math (ir/passes/decompose_attention.cpp). torch.compile keeps the op whole (it has a
// tpu kernel), so captured graphs get the same kernel.
#include <ATen/native/transformers/attention.h>
#include <ATen/SDPBackend.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "exec/window.h"
#include "ir/custom_call.h"
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

bool kernel_takes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const std::optional<at::Tensor>& mask, double dropout_p, bool enable_gqa) {
  auto dtype_ok = [&](const at::Tensor& t) {
    return t.scalar_type() == q.scalar_type() && t.is_privateuseone() && !t.is_nested() && t.dim() == 4;
  };
  if (mask.has_value() && mask->defined()) return false;
  if (dropout_p != 0.0) return false;
  if (q.scalar_type() != at::kFloat && q.scalar_type() != at::kBFloat16) return false;
  if (!dtype_ok(q) || !dtype_ok(k) || !dtype_ok(v)) return false;
  // Symbolic sizes (torch.compile(dynamic=True)): the math path. The op's max_q / max_k
  // outputs would reach the backward graph as per-length integers (a new program per length
  // under mark_dynamic's buckets). Compared as SymInts so no dynamic length is specialized.
  for (const at::Tensor* t : {&q, &k, &v})
    for (const c10::SymInt& s : t->sym_sizes())
      if (s.is_symbolic()) return false;
  if (k.sym_size(0) != q.sym_size(0) || v.sym_size(0) != q.sym_size(0) || v.sym_size(1) != k.sym_size(1)) return false;
  // GQA: each of k's heads serves q.size(1) / k.size(1) query heads (expanded in the graph).
  if (k.sym_size(1) != q.sym_size(1) && !(enable_gqa && k.size(1) > 0 && q.size(1) % k.size(1) == 0)) return false;
  return k.sym_size(3) == q.sym_size(3) && v.sym_size(2) == k.sym_size(2);
}

int64_t choose(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& mask,
               double dropout_p, bool, std::optional<double>, bool enable_gqa) {
  const auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() && kernel_takes(q, k, v, mask, dropout_p, enable_gqa))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  return static_cast<int64_t>(ctx.userEnabledMathSDP() ? at::SDPBackend::math : at::SDPBackend::error);
}

// A new dense tpu tensor of `sizes` with its dims in the order of `like`'s strides (as the
// meta kernel's alloc_with_matching_layout and empty_like: compiled graphs assume those
// strides; q sliced out of a fused qkv projection is not dense, its output still is).
at::Tensor empty_matching(const at::Tensor& like, at::IntArrayRef sizes, at::ScalarType dt) {
  const int64_t r = like.dim();
  std::vector<int64_t> order(r);
  for (int64_t i = 0; i < r; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> permuted(r);
  for (int64_t i = 0; i < r; ++i) permuted[i] = sizes[order[i]];
  at::Tensor t = at::empty(permuted, like.options().dtype(dt));
  std::vector<int64_t> inverse(r);
  for (int64_t i = 0; i < r; ++i) inverse[order[i]] = i;
  return t.permute(inverse);
}

struct Sdpa {
  bool causal;
  float scale;
  bool round;         // DEFAULT precision (f32) or bf16 inputs: bf16 probabilities and score gradients
  bool round_inputs;  // DEFAULT precision (f32): q, k, v, dout rounded to bf16 values, as a DEFAULT dot reads them
  int64_t heads;      // > 0: q is a [B, L, H, E] tensor viewed as [B, H, L, E]: the calls read that layout
  std::vector<int64_t> params() const {
    uint32_t bits;
    std::memcpy(&bits, &scale, sizeof bits);
    return {causal, static_cast<int64_t>(bits), round, heads};
  }
};

Sdpa sdpa_of(const at::Tensor& q, bool causal, const std::optional<double>& scale) {
  const bool bf16 = q.scalar_type() == at::kBFloat16;
  const bool dflt = q.scalar_type() == at::kFloat && matmul_precision() == ir::Precision::Default;
  const double s = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const bool inner = q.size(1) > 1 && q.size(2) > 1 && q.stride(1) < q.stride(2);
  return {causal, static_cast<float>(s), bf16 || dflt, dflt, inner ? q.size(1) : 0};
}

// An operand of the custom call: f32, at DEFAULT rounded to bf16 values (the products'
// inputs, as a dot at DEFAULT reads them), in the call's layout ([B, L, H, E] with heads: the
// transpose back to that layout cancels the view's own, so q sliced from a projection is read
// where it lies and its rounding can join the projection's loop).
// With `groups` > 1 (GQA: k or v with a head per `groups` query heads), each head is repeated
// for the query heads it serves (head j for query heads j*groups .. j*groups+groups-1, as
// repeat_interleave does): the call sees equal head counts.
Value operand(Lower& L, const Sdpa& p, const at::Tensor& t, int64_t groups = 1) {
  Value x = L.g.convert(L.in_rows(t), DType::F32);
  if (p.heads) x = L.g.transpose(x, {0, 2, 1, 3});
  if (groups > 1) {
    const int64_t hd = p.heads ? 2 : 1;  // the heads dim in the call's layout
    const ir::Shape s = L.g.shape(x);
    ir::Shape wide = s, out = s;
    wide.insert(wide.begin() + hd + 1, groups);
    out[hd] *= groups;
    std::vector<int64_t> dims{0, 1, 2, 3};
    for (int64_t& d : dims) d += d > hd ? 1 : 0;
    x = L.g.reshape(L.g.broadcast(x, wide, dims), out);
  }
  return p.round_inputs ? L.g.convert(L.g.convert(x, DType::BF16), DType::F32) : x;
}

// The gradient of a GQA operand: the call's gradient summed over the query heads each head served.
Value sum_groups(Lower& L, const Sdpa& p, Value g, int64_t groups) {
  if (groups == 1) return g;
  const int64_t hd = p.heads ? 2 : 1;
  ir::Shape wide = L.g.shape(g);
  wide[hd] /= groups;
  wide.insert(wide.begin() + hd + 1, groups);
  return L.g.reduce(L.g.reshape(g, wide), ir::Reducer::Sum, {hd + 1});
}

// Query heads per k / v head (1 unless GQA).
int64_t groups_of(const at::Tensor& q, const at::Tensor& k) { return k.size(1) > 0 ? q.size(1) / k.size(1) : 1; }

// A [B, H, L, W] result from the call's layout.
Value result(Lower& L, const Sdpa& p, Value x) { return p.heads ? L.g.transpose(x, {0, 2, 1, 3}) : x; }

Value call(Lower& L, ir::CustomCallTarget t, int64_t index, const std::vector<Value>& ops, const Sdpa& p) {
  return L.g.op(ir::OpCode::CustomCall, ops, ir::custom_call_attrs(t, index, p.params()));
}

void check_supported(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const c10::IValue& bias, double dropout_p) {
  TORCH_CHECK(!bias.isTensor() || !bias.toTensor().defined(), "[", op,
              "] attn_bias is not supported by the tpu kernel; got a tensor, expected None (the math path takes masks)");
  TORCH_CHECK(dropout_p == 0.0, "[", op, "] dropout is not supported by the tpu kernel; got dropout_p ", dropout_p,
              ", expected 0");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "[", op, "] needs 4-D query, key and value; got ",
              q.sizes(), ", ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type() &&
                  (q.scalar_type() == at::kFloat || q.scalar_type() == at::kBFloat16),
              "[", op, "] needs float32 or bfloat16 query, key and value of one dtype; got ", q.scalar_type(), ", ",
              k.scalar_type(), " and ", v.scalar_type());
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && v.size(1) == k.size(1) && k.size(1) > 0 &&
                  q.size(1) % k.size(1) == 0,
              "[", op, "] needs one batch size, and key and value heads dividing the query heads; got query ", q.sizes(),
              ", key ", k.sizes(), " and value ", v.sizes());
}

void sdpa_forward(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
  constexpr const char* kOp = "_scaled_dot_product_fused_attention_overrideable";
  auto args = torch::jit::last(*stack, 8);
  const at::Tensor q = args[0].toTensor(), k = args[1].toTensor(), v = args[2].toTensor();
  check_supported(kOp, q, k, v, args[3], args[4].toDouble());
  const Sdpa p = sdpa_of(q, args[5].toBool(), args[7].toOptional<double>());
  Lower L(kOp);
  const int64_t groups = groups_of(q, k);
  std::vector<Value> ops{operand(L, p, q), operand(L, p, k, groups), operand(L, p, v, groups)};
  Value o = call(L, ir::CustomCallTarget::SdpaFwd, 0, ops, p);
  Value lse = call(L, ir::CustomCallTarget::SdpaFwd, 1, ops, p);
  at::Tensor out = empty_matching(q, {q.size(0), q.size(1), q.size(2), v.size(3)}, q.scalar_type());
  // With heads inner, `out` is [B, L, H, E] in memory, as the call writes it: written through
  // that contiguous view, no transpose in the graph and no strided copy after it.
  at::Tensor out_raw = p.heads && out.transpose(1, 2).is_contiguous() ? out.transpose(1, 2) : at::Tensor();
  if (!out_raw.defined()) o = result(L, p, o);
  at::Tensor lse_t = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  // The meta kernel's philox seed and offset (no dropout here): 0-d zeros, computed by the
  // graph so a captured graph owns them.
  at::Tensor seed = at::empty({}, q.options().dtype(at::kLong)), offset = at::empty({}, q.options().dtype(at::kLong));
  L.run_into({o, lse, L.cst(0, DType::I64), L.cst(0, DType::I64)}, {out_raw.defined() ? out_raw : out, lse_t, seed, offset});
  const int64_t max_q = q.size(2), max_k = k.size(2);
  torch::jit::drop(*stack, 8);
  torch::jit::push(*stack, out, lse_t, at::Tensor(), at::Tensor(), c10::SymInt(max_q), c10::SymInt(max_k), seed, offset,
                   at::Tensor());
}

void sdpa_backward(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
  constexpr const char* kOp = "_scaled_dot_product_fused_attention_overrideable_backward";
  auto args = torch::jit::last(*stack, 17);
  const at::Tensor dout = args[0].toTensor(), q = args[1].toTensor(), k = args[2].toTensor(), v = args[3].toTensor();
  const at::Tensor lse = args[7].toTensor();  // args[6], the forward's out, is not needed
  check_supported(kOp, q, k, v, args[4], args[12].toDouble());
  const Sdpa p = sdpa_of(q, args[13].toBool(), args[16].toOptional<double>());
  Lower L(kOp);
  const int64_t groups = groups_of(q, k);
  std::vector<Value> ops{operand(L, p, q), operand(L, p, k, groups), operand(L, p, v, groups), operand(L, p, dout),
                         L.in(lse, DType::F32)};  // dout in q's layout too (its strides do not matter)
  // Gradients as empty_like makes them (the meta kernel's strides, which a compiled graph
  // assumes); eagerly, with heads inner, in the call's own layout instead ([B, L, H, E] in
  // memory, written through that contiguous view: no transpose and copy per gradient).
  const bool raw = p.heads && !exec::capturing(q.device().index());
  std::vector<Value> grads;
  std::vector<at::Tensor> dsts, writes;
  for (int i = 0; i < 3; ++i) {
    const at::Tensor& like = i == 0 ? q : i == 1 ? k : v;
    Value gi = sum_groups(L, p, call(L, ir::CustomCallTarget::SdpaBwd, i, ops, p), i == 0 ? 1 : groups);
    if (raw) {
      dsts.push_back(empty_matching(q, like.sizes(), like.scalar_type()));
      writes.push_back(dsts.back().transpose(1, 2));
      grads.push_back(gi);
    } else {
      dsts.push_back(at::empty_like(like));
      writes.push_back(dsts.back());
      grads.push_back(result(L, p, gi));
    }
  }
  L.run_into(grads, writes);
  torch::jit::drop(*stack, 17);
  torch::jit::push(*stack, dsts[0], dsts[1], dsts[2], at::Tensor());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&sdpa_forward>());
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         torch::CppFunction::makeFromBoxedFunction<&sdpa_backward>());
}

}  // namespace torch_tpu::lowering

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::lowering::choose);
}  // namespace at::native
