// Graph building, shape/dtype inference, hashing and verification.
#include "ir/graph.h"

#include <algorithm>

#include "base/error.h"
#include "ir/infer_internal.h"

namespace torch_tpu::ir {

namespace {
const OpInfo kOps[] = {
#define UNARY(name, hlo, dt) {#name, hlo, 1, OpKind::kUnary, dt, kFusible},
#define BINARY(name, hlo, dt, traits) {#name, hlo, 2, OpKind::kBinary, dt, (traits) | kFusible},
#define OTHER(name, hlo, arity, kind, ...) \
  {#name, hlo, arity, OpKind::kind, A, static_cast<uint8_t>(0 __VA_OPT__(|) __VA_ARGS__)},
#include "ir/ops.def"
};

uint64_t mix(uint64_t h, uint64_t v) {
  v *= 0x9E3779B97F4A7C15ull;
  v ^= v >> 29;
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}
uint64_t mix_vec(uint64_t h, const std::vector<int64_t>& v) {
  h = mix(h, v.size());
  for (int64_t x : v) h = mix(h, static_cast<uint64_t>(x));
  return h;
}
}  // namespace

const OpInfo& op_info(OpCode op) { return kOps[static_cast<int>(op)]; }

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

bool Attrs::operator==(const Attrs& o) const {
  return dims == o.dims && start == o.start && limit == o.limit && stride == o.stride &&
         lhs_batch == o.lhs_batch && rhs_batch == o.rhs_batch &&
         lhs_contract == o.lhs_contract && rhs_contract == o.rhs_contract &&
         window == o.window && window_strides == o.window_strides && pad_lo == o.pad_lo &&
         pad_hi == o.pad_hi && lhs_dilation == o.lhs_dilation &&
         rhs_dilation == o.rhs_dilation && groups == o.groups &&
         kernel_transposed == o.kernel_transposed && kernel_reversed == o.kernel_reversed &&
         result_transposed == o.result_transposed &&
         __builtin_memcmp(&value, &o.value, sizeof value) == 0 &&
         ivalue == o.ivalue && direction == o.direction && reducer == o.reducer &&
         precision == o.precision;
}

uint64_t node_hash(const Node& n) {
  uint64_t h = mix(n.is_param ? 0xFFFF : static_cast<uint64_t>(n.op), n.param_index + 7);
  h = mix(h, static_cast<uint64_t>(n.dtype));
  h = mix_vec(h, n.shape);
  h = mix(h, n.operands.size());
  for (int o : n.operands) h = mix(h, static_cast<uint64_t>(o));
  const Attrs& a = n.attrs;
  for (const auto* v : {&a.dims, &a.start, &a.limit, &a.stride, &a.lhs_batch, &a.rhs_batch,
                        &a.lhs_contract, &a.rhs_contract, &a.window, &a.window_strides,
                        &a.pad_lo, &a.pad_hi, &a.lhs_dilation, &a.rhs_dilation})
    h = mix_vec(h, *v);
  h = mix(h, static_cast<uint64_t>(a.groups));
  h = mix(h, (a.kernel_transposed ? 1u : 0u) | (a.kernel_reversed ? 2u : 0u) | (a.result_transposed ? 4u : 0u));
  uint64_t bits;
  static_assert(sizeof(bits) == sizeof(a.value));
  __builtin_memcpy(&bits, &a.value, sizeof bits);
  h = mix(h, bits);
  h = mix(h, static_cast<uint64_t>(a.ivalue));
  h = mix(h, (static_cast<uint64_t>(a.direction) << 16) |
                 (static_cast<uint64_t>(a.reducer) << 8) |
                 static_cast<uint64_t>(a.precision));
  return h;
}

namespace {

void check_dims(const char* op, const std::vector<int64_t>& dims, size_t rank, bool unique) {
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    TPU_CHECK(d >= 0 && d < static_cast<int64_t>(rank), "[", op, "] dimension out of range; got ",
              d, ", expected 0 <= d < ", rank);
    TPU_CHECK(!unique || !seen[d], "[", op, "] repeated dimension ", d);
    seen[d] = true;
  }
}

void infer_elementwise(const Graph& g, Node& n, const OpInfo& info) {
  const Node& x = g.nodes()[n.operands[0]];
  auto same_shape = [&](const Node& y, const char* what) {
    TPU_CHECK(y.shape == x.shape || (n.op == OpCode::Clamp && y.shape.empty()), "[", info.hlo,
              "] ", what, " shape mismatch; got ", shape_str(y.shape), ", expected ",
              shape_str(x.shape));
  };
  switch (info.kind) {
    case OpKind::kUnary:
    case OpKind::kBinary:
      for (int o : n.operands) {
        const Node& y = g.nodes()[o];
        same_shape(y, "operand");
        TPU_CHECK(y.dtype == x.dtype, "[", info.hlo, "] operand dtypes differ; got ",
                  dtype_name(y.dtype), ", expected ", dtype_name(x.dtype));
      }
      TPU_CHECK(info.dtypes & dtype_class(x.dtype), "[", info.hlo, "] unsupported dtype ",
                dtype_name(x.dtype));
      n.shape = x.shape;
      n.dtype = x.dtype;
      return;
    default:
      break;
  }
  switch (n.op) {
    case OpCode::Compare: {
      const Node& y = g.nodes()[n.operands[1]];
      same_shape(y, "rhs");
      TPU_CHECK(y.dtype == x.dtype, "[compare] operand dtypes differ; got ", dtype_name(y.dtype),
                ", expected ", dtype_name(x.dtype));
      n.shape = x.shape;
      n.dtype = DType::Bool;
      return;
    }
    case OpCode::Select: {
      const Node& t = g.nodes()[n.operands[1]];
      const Node& f = g.nodes()[n.operands[2]];
      TPU_CHECK(x.dtype == DType::Bool, "[select] predicate must be i1; got ", dtype_name(x.dtype));
      TPU_CHECK(t.shape == x.shape && f.shape == x.shape, "[select] shape mismatch; got ",
                shape_str(x.shape), ", ", shape_str(t.shape), ", ", shape_str(f.shape));
      TPU_CHECK(t.dtype == f.dtype, "[select] branch dtypes differ; got ", dtype_name(t.dtype),
                " and ", dtype_name(f.dtype));
      n.shape = x.shape;
      n.dtype = t.dtype;
      return;
    }
    case OpCode::Clamp: {
      const Node& v = g.nodes()[n.operands[1]];
      for (int o : {n.operands[0], n.operands[2]}) {
        const Node& b = g.nodes()[o];
        TPU_CHECK(b.shape.empty() || b.shape == v.shape, "[clamp] bound shape mismatch; got ",
                  shape_str(b.shape), ", expected [] or ", shape_str(v.shape));
        TPU_CHECK(b.dtype == v.dtype, "[clamp] bound dtype mismatch; got ", dtype_name(b.dtype),
                  ", expected ", dtype_name(v.dtype));
      }
      n.shape = v.shape;
      n.dtype = v.dtype;
      return;
    }
    case OpCode::Convert:
      n.shape = x.shape;  // n.dtype was given
      return;
    default:
      TPU_CHECK(false, "[infer] unhandled elementwise op ", info.name);
  }
}

void infer_shape_op(const Graph& g, Node& n, const OpInfo& info) {
  const Node& x = g.nodes()[n.operands[0]];
  const Attrs& a = n.attrs;
  n.dtype = x.dtype;
  switch (n.op) {
    case OpCode::Broadcast: {
      TPU_CHECK(a.dims.size() == x.shape.size(), "[broadcast_in_dim] dims size mismatch; got ",
                a.dims.size(), ", expected ", x.shape.size());
      check_dims(info.hlo, a.dims, n.shape.size(), true);
      for (size_t i = 0; i < a.dims.size(); ++i) {
        int64_t r = n.shape[a.dims[i]];
        TPU_CHECK(x.shape[i] == 1 || x.shape[i] == r, "[broadcast_in_dim] operand dim ", i,
                  " of size ", x.shape[i], " cannot broadcast to ", r);
      }
      return;
    }
    case OpCode::Reshape:
      TPU_CHECK(numel(n.shape) == numel(x.shape), "[reshape] element count mismatch; got ",
                shape_str(n.shape), ", expected ", numel(x.shape), " elements from ",
                shape_str(x.shape));
      return;
    case OpCode::Transpose: {
      TPU_CHECK(a.dims.size() == x.shape.size(), "[transpose] permutation size mismatch; got ",
                a.dims.size(), ", expected ", x.shape.size());
      check_dims(info.hlo, a.dims, x.shape.size(), true);
      n.shape.resize(a.dims.size());
      for (size_t i = 0; i < a.dims.size(); ++i) n.shape[i] = x.shape[a.dims[i]];
      return;
    }
    case OpCode::Slice: {
      size_t r = x.shape.size();
      TPU_CHECK(a.start.size() == r && a.limit.size() == r && a.stride.size() == r,
                "[slice] start/limit/stride must have rank ", r);
      n.shape.resize(r);
      for (size_t i = 0; i < r; ++i) {
        TPU_CHECK(a.start[i] >= 0 && a.start[i] <= a.limit[i] && a.limit[i] <= x.shape[i] &&
                      a.stride[i] >= 1,
                  "[slice] bad bounds in dim ", i, "; got start ", a.start[i], " limit ",
                  a.limit[i], " stride ", a.stride[i], " for size ", x.shape[i]);
        n.shape[i] = (a.limit[i] - a.start[i] + a.stride[i] - 1) / a.stride[i];
      }
      return;
    }
    case OpCode::Concat: {
      TPU_CHECK(a.dims.size() == 1, "[concatenate] needs one dimension");
      int64_t d = a.dims[0];
      check_dims(info.hlo, a.dims, x.shape.size(), true);
      n.shape = x.shape;
      n.shape[d] = 0;
      for (int o : n.operands) {
        const Node& y = g.nodes()[o];
        TPU_CHECK(y.dtype == x.dtype, "[concatenate] dtype mismatch; got ", dtype_name(y.dtype),
                  ", expected ", dtype_name(x.dtype));
        TPU_CHECK(y.shape.size() == x.shape.size(), "[concatenate] rank mismatch; got ",
                  shape_str(y.shape), ", expected rank ", x.shape.size());
        for (size_t i = 0; i < y.shape.size(); ++i)
          TPU_CHECK(static_cast<int64_t>(i) == d || y.shape[i] == x.shape[i],
                    "[concatenate] shape mismatch; got ", shape_str(y.shape), ", expected ",
                    shape_str(x.shape), " outside dim ", d);
        n.shape[d] += y.shape[d];
      }
      return;
    }
    case OpCode::Reverse:
      check_dims(info.hlo, a.dims, x.shape.size(), true);
      n.shape = x.shape;
      return;
    case OpCode::OptimizationBarrier:
      n.shape = x.shape;
      return;
    default:
      TPU_CHECK(false, "[infer] unhandled shape op ", info.name);
  }
}

void infer_reduce(const Graph& g, Node& n, const OpInfo& info) {
  const Node& x = g.nodes()[n.operands[0]];
  check_dims(info.hlo, n.attrs.dims, x.shape.size(), true);
  if (n.op != OpCode::Reduce)
    TPU_CHECK(n.attrs.dims.size() == 1, "[", info.hlo, "] needs exactly one dimension");
  n.shape.clear();
  for (size_t i = 0; i < x.shape.size(); ++i)
    if (std::find(n.attrs.dims.begin(), n.attrs.dims.end(), static_cast<int64_t>(i)) ==
        n.attrs.dims.end())
      n.shape.push_back(x.shape[i]);
  n.dtype = n.op == OpCode::Reduce ? x.dtype : DType::I64;
  if (n.op == OpCode::Reduce &&
      (n.attrs.reducer == Reducer::And || n.attrs.reducer == Reducer::Or))
    TPU_CHECK(!is_float(x.dtype), "[reduce] and/or reducer needs an integer or i1 operand");
}

void infer_dot(const Graph& g, Node& n) {
  const Node& l = g.nodes()[n.operands[0]];
  const Node& r = g.nodes()[n.operands[1]];
  const Attrs& a = n.attrs;
  TPU_CHECK(l.dtype == r.dtype, "[dot_general] operand dtypes differ; got ", dtype_name(l.dtype),
            " and ", dtype_name(r.dtype));
  TPU_CHECK(!is_bool(l.dtype), "[dot_general] unsupported dtype i1");
  TPU_CHECK(a.ivalue == 0 || (a.ivalue == 1 && l.dtype == DType::BF16),
            "[dot_general] an f32 result (ivalue 1) needs bf16 operands; got ", dtype_name(l.dtype),
            " operands and ivalue ", a.ivalue);
  TPU_CHECK(a.lhs_batch.size() == a.rhs_batch.size() &&
                a.lhs_contract.size() == a.rhs_contract.size(),
            "[dot_general] batch/contracting dimension lists differ in length");
  std::vector<int64_t> ld = a.lhs_batch, rd = a.rhs_batch;
  ld.insert(ld.end(), a.lhs_contract.begin(), a.lhs_contract.end());
  rd.insert(rd.end(), a.rhs_contract.begin(), a.rhs_contract.end());
  check_dims("dot_general", ld, l.shape.size(), true);
  check_dims("dot_general", rd, r.shape.size(), true);
  for (size_t i = 0; i < a.lhs_batch.size(); ++i)
    TPU_CHECK(l.shape[a.lhs_batch[i]] == r.shape[a.rhs_batch[i]],
              "[dot_general] batch dimension size mismatch; got ", l.shape[a.lhs_batch[i]],
              " and ", r.shape[a.rhs_batch[i]]);
  for (size_t i = 0; i < a.lhs_contract.size(); ++i)
    TPU_CHECK(l.shape[a.lhs_contract[i]] == r.shape[a.rhs_contract[i]],
              "[dot_general] contracting dimension size mismatch; got ", shape_str(l.shape),
              " and ", shape_str(r.shape));
  n.shape.clear();
  for (int64_t d : a.lhs_batch) n.shape.push_back(l.shape[d]);
  for (size_t i = 0; i < l.shape.size(); ++i)
    if (std::find(ld.begin(), ld.end(), static_cast<int64_t>(i)) == ld.end())
      n.shape.push_back(l.shape[i]);
  for (size_t i = 0; i < r.shape.size(); ++i)
    if (std::find(rd.begin(), rd.end(), static_cast<int64_t>(i)) == rd.end())
      n.shape.push_back(r.shape[i]);
  n.dtype = a.ivalue == 1 ? DType::F32 : l.dtype;
}

}  // namespace

void infer(const Graph& g, Node& n) {
  const OpInfo& info = op_info(n.op);
  if (info.arity >= 0)
    TPU_CHECK(static_cast<int>(n.operands.size()) == info.arity, "[", info.hlo,
              "] wrong operand count; got ", n.operands.size(), ", expected ", info.arity);
  else
    TPU_CHECK(!n.operands.empty(), "[", info.hlo, "] needs at least one operand");
  for (int o : n.operands)
    TPU_CHECK(o >= 0 && o < static_cast<int>(g.nodes().size()), "[", info.hlo,
              "] operand id out of range; got ", o);
  for (int64_t d : n.shape) TPU_CHECK(d >= 0, "[", info.hlo, "] negative dimension in ", shape_str(n.shape));
  switch (info.kind) {
    case OpKind::kUnary:
    case OpKind::kBinary:
    case OpKind::kElementwise:
      return infer_elementwise(g, n, info);
    case OpKind::kShape:
      return infer_shape_op(g, n, info);
    case OpKind::kReduce:
      return infer_reduce(g, n, info);
    case OpKind::kDot:
      return infer_dot(g, n);
    case OpKind::kIndex:
      return infer_index(g, n);
    case OpKind::kSort:
      return infer_sort(g, n);
    case OpKind::kScan:
      return infer_scan(g, n);
    case OpKind::kLinalg:
      return infer_linalg(g, n);
    case OpKind::kWindow:
      return infer_window(g, n);
    case OpKind::kLeaf:
      if (n.op == OpCode::Iota) {
        TPU_CHECK(n.attrs.dims.size() == 1, "[iota] needs exactly one dimension; got ",
                  n.attrs.dims.size());
        check_dims("iota", n.attrs.dims, n.shape.size(), true);
      }
      return;
    case OpKind::kRng: {
      const Node& s = g.nodes()[n.operands[0]];
      TPU_CHECK(s.dtype == DType::U64 && s.shape == Shape{2},
                "[rng_bit_generator] state must be ui64[2]; got ", dtype_name(s.dtype),
                shape_str(s.shape));
      TPU_CHECK(is_float(n.dtype), "[rng] result must be a float type; got ", dtype_name(n.dtype));
      return;
    }
  }
}

Value Graph::param(DType dtype, Shape shape) {
  Node n;
  n.is_param = true;
  n.param_index = num_params_++;
  n.shape = std::move(shape);
  n.dtype = dtype;
  nodes_.push_back(std::move(n));
  return Value{static_cast<int>(nodes_.size()) - 1};
}

void Graph::cse_insert(uint64_t h, int id) {
  if ((cse_size_ + 1) * 2 > cse_.size()) {
    std::vector<std::pair<uint64_t, int>> old(std::max<size_t>(16, cse_.size() * 2), {0, -1});
    old.swap(cse_);
    cse_size_ = 0;
    for (auto& [hh, i] : old)
      if (i >= 0) cse_insert(hh, i);
  }
  size_t mask = cse_.size() - 1;
  size_t i = h & mask;
  while (cse_[i].second >= 0) i = (i + 1) & mask;
  cse_[i] = {h, id};
  ++cse_size_;
}

Value Graph::intern(Node&& n) {
  uint64_t h = node_hash(n);
  bool pure = op_info(n.op).kind != OpKind::kRng;
  if (pure && !cse_.empty()) {
    size_t mask = cse_.size() - 1;
    for (size_t i = h & mask; cse_[i].second >= 0; i = (i + 1) & mask) {
      if (cse_[i].first != h) continue;
      const Node& m = nodes_[cse_[i].second];
      if (!m.is_param && m.op == n.op && m.operands == n.operands && m.shape == n.shape &&
          m.dtype == n.dtype && m.attrs == n.attrs)
        return Value{cse_[i].second};
    }
  }
  nodes_.push_back(std::move(n));
  int id = static_cast<int>(nodes_.size()) - 1;
  if (pure) cse_insert(h, id);
  return Value{id};
}

namespace {

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Folds a transpose feeding one side of a dot_general into its dimension numbers, when the
// free dims keep their relative order (the result's dim order follows the operand's free
// dims). perm: the transpose's permutation; batch/contract: that side's dims, rewritten.
bool fold_transpose_into_dot(const std::vector<int64_t>& perm, std::vector<int64_t>& batch,
                             std::vector<int64_t>& contract) {
  std::vector<bool> used(perm.size(), false);
  for (int64_t d : batch) used[d] = true;
  for (int64_t d : contract) used[d] = true;
  int64_t last = -1;
  for (size_t d = 0; d < perm.size(); ++d) {
    if (used[d]) continue;
    if (perm[d] < last) return false;
    last = perm[d];
  }
  for (int64_t& d : batch) d = perm[d];
  for (int64_t& d : contract) d = perm[d];
  return true;
}

}  // namespace

Value Graph::op(OpCode op, std::vector<Value> operands, Attrs attrs, Shape shape, DType dtype) {
  // Canonical forms, so later passes and runtimes see fewer nodes: a full slice with unit
  // strides and an identity transpose are their operand; a transpose feeding a dot_general
  // becomes part of its dimension numbers (the host GEMM reads a transposed operand in place).
  if (op == OpCode::Slice && operands.size() == 1 && operands[0].valid() &&
      operands[0].id < static_cast<int>(nodes_.size())) {
    const Shape& xs = nodes_[operands[0].id].shape;
    bool full = attrs.start.size() == xs.size() && attrs.limit == xs && attrs.stride.size() == xs.size();
    for (size_t i = 0; full && i < xs.size(); ++i) full = attrs.start[i] == 0 && attrs.stride[i] == 1;
    if (full) return operands[0];
  }
  if (op == OpCode::Transpose && operands.size() == 1 && operands[0].valid() &&
      operands[0].id < static_cast<int>(nodes_.size()) &&
      attrs.dims.size() == nodes_[operands[0].id].shape.size()) {
    if (is_identity_perm(attrs.dims)) return operands[0];
    // A transpose of a transpose is one transpose (none when the perms cancel: attention's
    // [B, H, L, E] view of a [B, L, H, E] projection read back in its own layout).
    const Node& inner = nodes_[operands[0].id];
    if (!inner.is_param && inner.op == OpCode::Transpose && inner.attrs.dims.size() == attrs.dims.size()) {
      std::vector<int64_t> perm(attrs.dims.size());
      bool valid = true;
      for (size_t i = 0; i < perm.size(); ++i) {
        int64_t d = attrs.dims[i];
        valid &= d >= 0 && d < static_cast<int64_t>(perm.size());
        if (valid) perm[i] = inner.attrs.dims[static_cast<size_t>(d)];
      }
      if (valid) return transpose(Value{inner.operands[0]}, std::move(perm));
    }
  }
  // A reshape of a slice that only adds or drops size-1 dims (the dropped ones size 1 in the
  // operand too) or splits sliced dims is the slice of the reshaped operand: the slice then
  // feeds its readers directly, so their fused loops read it in place (a gather) instead of a
  // copy. A split dim must be sliced with stride 1 at a multiple of its inner size m, in an
  // operand dim m divides: q = qkv[..., :128].view(.., 4, 32) is qkv.view(.., 12, 32)[.., :4, :]
  // (exec/views.cpp's q, k, v boxes of a projection carry a trailing unit dim).
  if (op == OpCode::Reshape && operands.size() == 1 && operands[0].valid() &&
      operands[0].id < static_cast<int>(nodes_.size())) {
    const Node& sl = nodes_[operands[0].id];
    if (!sl.is_param && sl.op == OpCode::Slice && sl.operands.size() == 1) {
      const Shape& xs = nodes_[sl.operands[0]].shape;
      const Shape& ss = sl.shape;
      std::vector<size_t> kept;  // the slice's dims that are not size 1
      bool ok = xs.size() == ss.size() && sl.attrs.start.size() == ss.size() && sl.attrs.stride.size() == ss.size();
      for (size_t i = 0; ok && i < ss.size(); ++i) {
        if (ss[i] != 1) kept.push_back(i);
        else ok = xs[i] == 1;
      }
      std::vector<int64_t> xt, start, limit, stride;
      size_t k = 0, j = 0;
      auto unit = [&] { xt.push_back(1), start.push_back(0), limit.push_back(1), stride.push_back(1); };
      while (ok && j < shape.size()) {
        if (shape[j] == 1) {
          unit();
          ++j;
          continue;
        }
        ok = k < kept.size();
        if (!ok) break;
        const size_t i = kept[k++];
        // The target dims [j, e) whose product is the slice dim's size (units among them kept).
        size_t e = j;
        int64_t prod = 1;
        while (e < shape.size() && prod < ss[i]) prod *= shape[e++];
        ok = prod == ss[i];
        if (!ok) break;
        if (e - j == 1) {
          xt.push_back(xs[i]), start.push_back(sl.attrs.start[i]), limit.push_back(sl.attrs.limit[i]),
              stride.push_back(sl.attrs.stride[i]);
        } else {
          const int64_t m = ss[i] / shape[j];  // the inner dims' size
          ok = sl.attrs.stride[i] == 1 && sl.attrs.start[i] % m == 0 && xs[i] % m == 0;
          if (!ok) break;
          const int64_t s0 = sl.attrs.start[i] / m;
          xt.push_back(xs[i] / m), start.push_back(s0), limit.push_back(s0 + shape[j]), stride.push_back(1);
          for (size_t t = j + 1; t < e; ++t)
            xt.push_back(shape[t]), start.push_back(0), limit.push_back(shape[t]), stride.push_back(1);
        }
        j = e;
      }
      if (ok && k == kept.size()) {
        Value x = reshape(Value{sl.operands[0]}, std::move(xt));
        return slice(x, std::move(start), std::move(limit), std::move(stride));
      }
    }
  }
  // StableHLO's abs and sign take signed or float operands only: on unsigned integers abs is
  // the identity and sign is (x != 0).
  if ((op == OpCode::Abs || op == OpCode::Sign) && operands.size() == 1 && operands[0].valid() &&
      operands[0].id < static_cast<int>(nodes_.size()) &&
      (nodes_[operands[0].id].dtype == DType::U8 || nodes_[operands[0].id].dtype == DType::U64)) {
    Value x = operands[0];
    DType dt = nodes_[x.id].dtype;
    if (op == OpCode::Abs) return x;
    return convert(compare(Cmp::NE, x, constant(0, dt, nodes_[x.id].shape)), dt);
  }
  if (op == OpCode::Dot && operands.size() == 2) {
    for (int side = 0; side < 2; ++side) {
      Value v = operands[side];
      if (!v.valid() || v.id >= static_cast<int>(nodes_.size())) continue;
      const Node& t = nodes_[v.id];
      if (t.is_param || t.op != OpCode::Transpose || t.attrs.dims.size() != t.shape.size()) continue;
      std::vector<int64_t>& batch = side == 0 ? attrs.lhs_batch : attrs.rhs_batch;
      std::vector<int64_t>& contract = side == 0 ? attrs.lhs_contract : attrs.rhs_contract;
      bool in_range = true;
      for (int64_t d : batch) in_range &= d >= 0 && d < static_cast<int64_t>(t.shape.size());
      for (int64_t d : contract) in_range &= d >= 0 && d < static_cast<int64_t>(t.shape.size());
      if (!in_range) continue;  // inference reports the error
      std::vector<int64_t> b = batch, c = contract;
      if (fold_transpose_into_dot(t.attrs.dims, b, c)) {
        batch = std::move(b), contract = std::move(c);
        operands[side] = Value{t.operands[0]};
      }
    }
  }
  Node n;
  n.op = op;
  n.operands.reserve(operands.size());
  for (Value v : operands) n.operands.push_back(v.id);
  n.attrs = std::move(attrs);
  n.shape = std::move(shape);
  n.dtype = dtype;
  infer(*this, n);
  return intern(std::move(n));
}

Value Graph::copy_of(const Node& src, std::vector<Value> operands) {
  TPU_CHECK(!src.is_param, "[ir] copy_of a parameter");
  Node n;
  n.op = src.op;
  for (Value v : operands) n.operands.push_back(v.id);
  n.attrs = src.attrs;
  n.shape = src.shape;
  n.dtype = src.dtype;
  infer(*this, n);
  nodes_.push_back(std::move(n));
  return Value{static_cast<int>(nodes_.size()) - 1};
}

Value Graph::unchecked_node(Node n) {
  nodes_.push_back(std::move(n));
  return Value{static_cast<int>(nodes_.size()) - 1};
}

Value Graph::compare(Cmp dir, Value x, Value y) {
  Attrs a;
  a.direction = dir;
  return op(OpCode::Compare, {x, y}, std::move(a));
}

Value Graph::convert(Value x, DType to) {
  if (dtype(x) == to) return x;
  return op(OpCode::Convert, {x}, {}, {}, to);
}

Value Graph::constant(double v, DType dtype, Shape shape) {
  Attrs a;
  if (is_float(dtype))
    a.value = v;
  else
    a.ivalue = is_bool(dtype) ? (v != 0) : static_cast<int64_t>(v);
  return op(OpCode::Constant, {}, std::move(a), std::move(shape), dtype);
}

Value Graph::iota(DType dtype, Shape shape, int64_t dim) {
  Attrs a;
  a.dims = {dim};
  return op(OpCode::Iota, {}, std::move(a), std::move(shape), dtype);
}

Value Graph::broadcast(Value x, Shape shape, std::vector<int64_t> dims) {
  if (this->shape(x) == shape) {
    bool ident = true;
    for (size_t i = 0; i < dims.size(); ++i) ident &= dims[i] == static_cast<int64_t>(i);
    if (ident) return x;
  }
  Attrs a;
  a.dims = std::move(dims);
  return op(OpCode::Broadcast, {x}, std::move(a), std::move(shape), dtype(x));
}

Value Graph::broadcast_to(Value x, const Shape& target) {
  // Copies: `target` may refer into nodes_ (e.g. g.shape(v)), which reshape() reallocates.
  const Shape shape = target, s = this->shape(x);
  if (s == shape) return x;
  TPU_CHECK(s.size() <= shape.size(), "[broadcast] cannot broadcast ", shape_str(s), " to ",
            shape_str(shape));
  size_t off = shape.size() - s.size();
  // Drop size-1 dims that expand, keep the others aligned to the right.
  std::vector<int64_t> dims, keep_shape;
  for (size_t i = 0; i < s.size(); ++i) {
    TPU_CHECK(s[i] == shape[off + i] || s[i] == 1, "[broadcast] cannot broadcast ", shape_str(s),
              " to ", shape_str(shape));
    if (s[i] == shape[off + i]) {
      dims.push_back(static_cast<int64_t>(off + i));
      keep_shape.push_back(s[i]);
    }
  }
  Value y = keep_shape.size() == s.size() ? x : reshape(x, keep_shape);
  return broadcast(y, shape, dims);
}

Value Graph::reshape(Value x, Shape shape) {
  if (this->shape(x) == shape) return x;
  return op(OpCode::Reshape, {x}, {}, std::move(shape), dtype(x));
}

Value Graph::transpose(Value x, std::vector<int64_t> perm) {  // op() drops an identity
  Attrs a;
  a.dims = std::move(perm);
  return op(OpCode::Transpose, {x}, std::move(a));
}

Value Graph::slice(Value x, std::vector<int64_t> start, std::vector<int64_t> limit,
                   std::vector<int64_t> stride) {
  Attrs a;
  a.start = std::move(start);
  a.limit = std::move(limit);
  a.stride = std::move(stride);
  return op(OpCode::Slice, {x}, std::move(a));
}

Value Graph::concat(std::vector<Value> xs, int64_t dim) {
  if (xs.size() == 1) return xs[0];
  Attrs a;
  a.dims = {dim};
  return op(OpCode::Concat, std::move(xs), std::move(a));
}

Value Graph::reduce(Value x, Reducer r, std::vector<int64_t> dims) {
  Attrs a;
  a.dims = std::move(dims);
  std::sort(a.dims.begin(), a.dims.end());
  a.reducer = r;
  return op(OpCode::Reduce, {x}, std::move(a));
}

Value Graph::dot(Value lhs, Value rhs, Attrs dims) { return op(OpCode::Dot, {lhs, rhs}, std::move(dims)); }

uint64_t Graph::hash() const {
  uint64_t h = mix(0x7470755F6972ull, nodes_.size());
  for (const Node& n : nodes_) h = mix(h, node_hash(n));
  h = mix(h, outputs_.size());
  for (Value v : outputs_) h = mix(h, static_cast<uint64_t>(v.id));
  return h;
}

void Graph::verify() const {
  int params = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.is_param) {
      TPU_CHECK(n.param_index == params++, "[verify] parameter ", i, " out of order; got index ",
                n.param_index);
      continue;
    }
    TPU_CHECK(static_cast<int>(n.op) < static_cast<int>(OpCode::kNumOps), "[verify] node ", i,
              " has an unknown op code");
    for (int o : n.operands)
      TPU_CHECK(o >= 0 && o < static_cast<int>(i), "[verify] node ", i, " (",
                op_info(n.op).hlo, ") uses operand ", o, " that is not defined before it");
    Node copy = n;
    infer(*this, copy);
    TPU_CHECK(copy.shape == n.shape && copy.dtype == n.dtype, "[verify] node ", i, " (",
              op_info(n.op).hlo, ") has type ", dtype_name(n.dtype), shape_str(n.shape),
              ", expected ", dtype_name(copy.dtype), shape_str(copy.shape));
  }
  TPU_CHECK(params == num_params_, "[verify] parameter count mismatch");
  TPU_CHECK(!outputs_.empty(), "[verify] graph has no outputs");
  for (Value v : outputs_)
    TPU_CHECK(v.id >= 0 && v.id < static_cast<int>(nodes_.size()), "[verify] output id ", v.id,
              " out of range");
}

}  // namespace torch_tpu::ir
