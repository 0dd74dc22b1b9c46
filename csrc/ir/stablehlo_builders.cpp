// The StableHLO importer's builders: dense literals, integer constant folding (so loop
// counters and grid indices become constants), slices and splices with the peepholes that
// keep unrolled Pallas grids small, dynamic slices through gather / select, and pad.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "ir/stablehlo_import_internal.h"

namespace torch_tpu::ir::shlo {
namespace {

double half_to_double(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(m + 1024, e - 25);
  return s ? -v : v;
}
uint16_t double_to_half(double d) {
  float f = static_cast<float>(d);
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7E00);
  float a = std::fabs(f);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7C00);
  if (a < std::ldexp(1.0f, -14)) {  // subnormal: round to a multiple of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * std::ldexp(1.0f, 24))));
  }
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  uint32_t mant = static_cast<uint32_t>(std::nearbyint((m * 2 - 1) * 1024));
  int exp = e - 1 + 15;
  if (mant == 1024) { mant = 0; ++exp; }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00);
  return static_cast<uint16_t>(sign | (exp << 10) | mant);
}
uint16_t double_to_bf16(double d) {
  float f = static_cast<float>(d);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

// Decodes `size` little-endian bytes of one element into (float, int).
void decode(const uint8_t* p, DType t, double* fv, int64_t* iv) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, dtype_size(t));
  switch (t) {
    case DType::F32: { float f; std::memcpy(&f, &bits, 4); *fv = f; return; }
    case DType::F64: { std::memcpy(fv, &bits, 8); return; }
    case DType::F16: *fv = half_to_double(static_cast<uint16_t>(bits)); return;
    case DType::BF16: { uint32_t u = static_cast<uint32_t>(bits) << 16; float f; std::memcpy(&f, &u, 4); *fv = f; return; }
    case DType::I8: *iv = static_cast<int8_t>(bits); return;
    case DType::I16: *iv = static_cast<int16_t>(bits); return;
    case DType::I32: *iv = static_cast<int32_t>(bits); return;
    default: *iv = static_cast<int64_t>(bits); return;  // i1, ui8, i64, ui64
  }
}

void encode(uint8_t* p, DType t, double fv, int64_t iv) {
  uint64_t bits = 0;
  switch (t) {
    case DType::F32: { float f = static_cast<float>(fv); std::memcpy(&bits, &f, 4); break; }
    case DType::F64: std::memcpy(&bits, &fv, 8); break;
    case DType::F16: bits = double_to_half(fv); break;
    case DType::BF16: bits = double_to_bf16(fv); break;
    case DType::Bool: bits = iv != 0; break;
    default: bits = static_cast<uint64_t>(iv); break;
  }
  std::memcpy(p, &bits, dtype_size(t));
}

// One literal element ("1.5e+00", "0x7FC00000", "-3", "true") of dtype t.
void literal(const std::string& tok, DType t, int line, double* fv, int64_t* iv) {
  *fv = 0;
  *iv = 0;
  if (tok == "true" || tok == "false") {
    *iv = tok == "true";
    *fv = static_cast<double>(*iv);
    return;
  }
  if (tok.size() > 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X')) {
    uint64_t bits = std::strtoull(tok.c_str() + 2, nullptr, 16);
    uint8_t buf[8];
    std::memcpy(buf, &bits, 8);
    decode(buf, t, fv, iv);
    return;
  }
  char* end = nullptr;
  if (is_float(t)) {
    *fv = std::strtod(tok.c_str(), &end);
  } else if (t == DType::U64) {
    *iv = static_cast<int64_t>(std::strtoull(tok.c_str(), &end, 10));
  } else {
    *iv = std::strtoll(tok.c_str(), &end, 10);
  }
  TPU_CHECK(end && *end == '\0', "[stablehlo import] bad literal '", tok, "' for ", dtype_name(t),
            " at line ", line);
}

int64_t wrap(DType t, int64_t v) {
  switch (t) {
    case DType::Bool: return v != 0;
    case DType::U8: return static_cast<uint8_t>(v);
    case DType::I8: return static_cast<int8_t>(v);
    case DType::I16: return static_cast<int16_t>(v);
    case DType::I32: return static_cast<int32_t>(v);
    default: return v;
  }
}

}  // namespace

Dense parse_dense(const std::string& raw, const Type& t, int line) {
  size_t b = raw.find("dense<");
  if (raw.find("dense_resource<") != std::string::npos)
    TPU_UNIMPLEMENTED("[stablehlo import] elided constant (dense_resource) at line ", line,
                      "; expected the constant's values in the text (print without eliding large constants)");
  TPU_CHECK(b != std::string::npos, "[stablehlo import] expected a dense<...> constant at line ", line,
            "; got '", raw, "'");
  size_t i = b + 6;
  int depth = 1;
  size_t e = i;
  for (; e < raw.size() && depth > 0; ++e) {
    if (raw[e] == '<') ++depth;
    if (raw[e] == '>') --depth;
  }
  std::string body = raw.substr(i, e - 1 - i);
  const int64_t n = numel(t.shape);
  const size_t es = dtype_size(t.dtype);
  Dense d;
  if (!body.empty() && body[0] == '"') {  // "0x..." raw little-endian bytes
    std::string hex = body.substr(3, body.size() - 4);
    std::vector<uint8_t> bytes(hex.size() / 2);
    for (size_t k = 0; k < bytes.size(); ++k)
      bytes[k] = static_cast<uint8_t>(std::strtoul(hex.substr(2 * k, 2).c_str(), nullptr, 16));
    if (t.dtype == DType::Bool)  // i1 hex strings hold one byte per element
      for (auto& x : bytes) x = x != 0;
    if (bytes.size() == es) {
      decode(bytes.data(), t.dtype, &d.fvalue, &d.ivalue);
      return d;
    }
    TPU_CHECK(bytes.size() == static_cast<size_t>(n) * es, "[stablehlo import] constant at line ", line,
              " has ", bytes.size(), " bytes; expected ", n * es);
    d.splat = false;
    d.bytes = std::move(bytes);
    return d;
  }
  std::vector<std::string> toks;
  std::string cur;
  for (char c : body) {
    if (c == '[' || c == ']' || c == ',' || c == ' ' || c == '\n' || c == '(' || c == ')') {
      if (!cur.empty()) toks.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) toks.push_back(cur);
  TPU_CHECK(!toks.empty(), "[stablehlo import] empty constant at line ", line);
  std::vector<double> fv(toks.size());
  std::vector<int64_t> iv(toks.size());
  bool same = true;
  for (size_t k = 0; k < toks.size(); ++k) {
    literal(toks[k], t.dtype, line, &fv[k], &iv[k]);
    if (k) same &= std::memcmp(&fv[k], &fv[0], 8) == 0 && iv[k] == iv[0];
  }
  if (same && (toks.size() == 1 || static_cast<int64_t>(toks.size()) == n)) {
    d.fvalue = fv[0];
    d.ivalue = iv[0];
    return d;
  }
  TPU_CHECK(static_cast<int64_t>(toks.size()) == n, "[stablehlo import] constant at line ", line,
            " has ", toks.size(), " elements; expected ", n);
  d.splat = false;
  d.bytes.resize(n * es);
  for (int64_t k = 0; k < n; ++k) encode(d.bytes.data() + k * es, t.dtype, fv[k], iv[k]);
  return d;
}

std::optional<int64_t> const_int(const Graph& g, Value v) {
  const Node& n = g.node(v);
  if (n.is_param || n.op != OpCode::Constant || is_float(n.dtype)) return std::nullopt;
  return n.attrs.ivalue;
}

std::optional<double> const_float(const Graph& g, Value v) {
  const Node& n = g.node(v);
  if (n.is_param || n.op != OpCode::Constant || !is_float(n.dtype)) return std::nullopt;
  return n.attrs.value;
}

Value splat(Graph& g, DType t, const Shape& s, double fv, int64_t iv) {
  Attrs a;
  if (is_float(t)) a.value = fv;
  else a.ivalue = wrap(t, iv);
  return g.op(OpCode::Constant, {}, std::move(a), s, t);
}

Value fold_or_build(Graph& g, OpCode code, const std::vector<Value>& xs, const Attrs& a, DType out) {
  std::vector<int64_t> c;
  bool all = !is_float(out) && !xs.empty();
  for (Value x : xs) {
    auto v = const_int(g, x);
    all &= v.has_value();
    if (v) c.push_back(*v);
  }
  if (all) {
    std::optional<int64_t> r;
    int64_t x = c[0], y = c.size() > 1 ? c[1] : 0;
    switch (code) {
      case OpCode::Add: r = x + y; break;
      case OpCode::Sub: r = x - y; break;
      case OpCode::Mul: r = x * y; break;
      case OpCode::Div: if (y != 0) r = x / y; break;
      case OpCode::Rem: if (y != 0) r = x % y; break;
      case OpCode::Max: r = std::max(x, y); break;
      case OpCode::Min: r = std::min(x, y); break;
      case OpCode::And: r = x & y; break;
      case OpCode::Or: r = x | y; break;
      case OpCode::Xor: r = x ^ y; break;
      case OpCode::Negate: r = -x; break;
      case OpCode::Abs: r = x < 0 ? -x : x; break;
      case OpCode::Not: r = out == DType::Bool ? !x : ~x; break;
      case OpCode::Convert: r = x; break;
      case OpCode::Select: r = x ? y : c[2]; break;
      case OpCode::Clamp: r = std::min(std::max(y, x), c[2]); break;
      case OpCode::Compare: {
        bool b = false;
        switch (a.direction) {
          case Cmp::EQ: b = x == y; break;
          case Cmp::NE: b = x != y; break;
          case Cmp::LT: b = x < y; break;
          case Cmp::LE: b = x <= y; break;
          case Cmp::GT: b = x > y; break;
          case Cmp::GE: b = x >= y; break;
        }
        r = b;
        break;
      }
      default: break;
    }
    Value shape_of = code == OpCode::Select || code == OpCode::Clamp ? xs[1] : xs[0];
    if (r) return splat(g, out, g.shape(shape_of), 0, *r);
  }
  if (code == OpCode::Convert) return g.convert(xs[0], out);
  return g.op(code, xs, a);
}

Value slice(Graph& g, Value x, std::vector<int64_t> start, std::vector<int64_t> limit,
            std::vector<int64_t> stride) {
  const Shape xs = g.shape(x);
  const size_t r = xs.size();
  if (stride.empty()) stride.assign(r, 1);
  bool whole = true;
  Shape out(r);
  for (size_t d = 0; d < r; ++d) {
    out[d] = limit[d] <= start[d] ? 0 : (limit[d] - start[d] + stride[d] - 1) / stride[d];
    whole &= start[d] == 0 && limit[d] == xs[d] && stride[d] == 1;
  }
  if (whole) return x;
  const Node n = g.node(x);
  if (!n.is_param && n.op == OpCode::Constant) return g.op(OpCode::Constant, {}, n.attrs, out, n.dtype);
  if (!n.is_param && n.op == OpCode::Broadcast && g.shape(Value{n.operands[0]}).empty())
    return g.broadcast(Value{n.operands[0]}, out, {});
  if (!n.is_param && n.op == OpCode::Slice) {  // compose
    std::vector<int64_t> s2(r), l2(r), t2(r);
    for (size_t d = 0; d < r; ++d) {
      s2[d] = n.attrs.start[d] + start[d] * n.attrs.stride[d];
      t2[d] = n.attrs.stride[d] * stride[d];
      l2[d] = out[d] == 0 ? s2[d] : s2[d] + (out[d] - 1) * t2[d] + 1;
    }
    return slice(g, Value{n.operands[0]}, s2, l2, t2);
  }
  if (!n.is_param && n.op == OpCode::Concat) {  // the pieces the range covers
    int64_t a = n.attrs.dims[0];
    if (stride[a] == 1 && out[a] > 0) {
      std::vector<Value> parts;
      int64_t off = 0;
      for (int o : n.operands) {
        int64_t len = g.shape(Value{o})[a];
        int64_t lo = std::max(start[a], off), hi = std::min(limit[a], off + len);
        if (lo < hi) {
          std::vector<int64_t> s2 = start, l2 = limit;
          s2[a] = lo - off;
          l2[a] = hi - off;
          parts.push_back(slice(g, Value{o}, s2, l2, stride));
        }
        off += len;
      }
      return concat(g, parts, a);
    }
  }
  return g.slice(x, start, limit, stride);
}

Value concat(Graph& g, std::vector<Value> xs, int64_t dim) {
  std::vector<Value> flat;
  for (Value x : xs) {
    const Node& n = g.node(x);
    if (g.shape(x)[dim] == 0 && xs.size() > 1) continue;
    if (!n.is_param && n.op == OpCode::Concat && n.attrs.dims[0] == dim) {
      for (int o : n.operands) flat.push_back(Value{o});
    } else {
      flat.push_back(x);
    }
  }
  // adjacent slices of one operand that continue each other merge
  std::vector<Value> merged;
  for (Value x : flat) {
    if (!merged.empty()) {
      const Node a = g.node(merged.back()), b = g.node(x);
      bool ok = !a.is_param && !b.is_param && a.op == OpCode::Slice && b.op == OpCode::Slice &&
                a.operands[0] == b.operands[0] && a.attrs.stride[dim] == 1 && b.attrs.stride[dim] == 1 &&
                a.attrs.limit[dim] == b.attrs.start[dim];
      for (size_t d = 0; ok && d < a.attrs.start.size(); ++d)
        if (static_cast<int64_t>(d) != dim)
          ok = a.attrs.start[d] == b.attrs.start[d] && a.attrs.limit[d] == b.attrs.limit[d] &&
               a.attrs.stride[d] == b.attrs.stride[d];
      if (ok) {
        std::vector<int64_t> l = a.attrs.limit;
        l[dim] = b.attrs.limit[dim];
        merged.back() = slice(g, Value{a.operands[0]}, a.attrs.start, l, a.attrs.stride);
        continue;
      }
    }
    merged.push_back(x);
  }
  if (merged.size() == 1) return merged[0];
  return g.concat(merged, dim);
}

namespace {
Value splice_dim(Graph& g, Value x, Value u, std::vector<int64_t> start, size_t d) {
  const Shape xs = g.shape(x), us = g.shape(u);
  if (d == xs.size()) return u;
  if (us[d] == xs[d]) return splice_dim(g, x, u, start, d + 1);
  std::vector<int64_t> lo(xs.size(), 0), hi = xs;
  hi[d] = start[d];
  Value before = slice(g, x, lo, hi, {});
  lo[d] = start[d];
  hi[d] = start[d] + us[d];
  Value midx = slice(g, x, lo, hi, {});
  lo[d] = start[d] + us[d];
  hi[d] = xs[d];
  Value after = slice(g, x, lo, hi, {});
  start[d] = 0;
  Value mid = splice_dim(g, midx, u, start, d + 1);
  return concat(g, {before, mid, after}, static_cast<int64_t>(d));
}
}  // namespace

Value splice(Graph& g, Value x, Value u, const std::vector<int64_t>& start) {
  const Node& n = g.node(u);
  if (!n.is_param && n.op == OpCode::Slice && Value{n.operands[0]} == x && n.attrs.start == start) {
    bool unit = true;
    for (int64_t s : n.attrs.stride) unit &= s == 1;
    if (unit) return x;  // writing back what was read
  }
  return splice_dim(g, x, u, start, 0);
}

namespace {
// Start index d of a dynamic slice / update, clamped to [0, dim - size] (StableHLO), as i64.
Value clamped_start(Graph& g, Value s, int64_t dim, int64_t size) {
  Value s64 = fold_or_build(g, OpCode::Convert, {s}, {}, DType::I64);
  Value lo = splat(g, DType::I64, {}, 0, 0), hi = splat(g, DType::I64, {}, 0, dim - size);
  return fold_or_build(g, OpCode::Clamp, {lo, s64, hi}, {}, DType::I64);
}
Attrs axis(int64_t d) {
  Attrs a;
  a.dims = {d};
  return a;
}
}  // namespace

Value dynamic_slice(Graph& g, Value x, const std::vector<Value>& idx, const Shape& sizes) {
  const Shape xs = g.shape(x);
  Value cur = x;
  for (size_t d = 0; d < xs.size(); ++d) {
    Value s = clamped_start(g, idx[d], xs[d], sizes[d]);
    Shape cs = g.shape(cur);
    if (auto c = const_int(g, s)) {
      std::vector<int64_t> lo(cs.size(), 0), hi = cs;
      lo[d] = *c;
      hi[d] = *c + sizes[d];
      cur = slice(g, cur, lo, hi, {});
      continue;
    }
    cs[d] = sizes[d];  // gather rows s .. s+size along d
    Value ix = g.binary(OpCode::Add, g.broadcast(s, cs, {}), g.iota(DType::I64, cs, static_cast<int64_t>(d)));
    cur = g.op(OpCode::Gather, {cur, ix}, axis(static_cast<int64_t>(d)));
  }
  return cur;
}

Value dynamic_update_slice(Graph& g, Value x, Value u, const std::vector<Value>& idx) {
  const Shape xs = g.shape(x), us = g.shape(u);
  std::vector<Value> s(xs.size());
  std::vector<int64_t> cs(xs.size());
  bool all_const = true;
  for (size_t d = 0; d < xs.size(); ++d) {
    s[d] = clamped_start(g, idx[d], xs[d], us[d]);
    auto c = const_int(g, s[d]);
    all_const &= c.has_value();
    cs[d] = c.value_or(0);
  }
  if (all_const) return splice(g, x, u, cs);
  // u placed at s by gathers (position p reads u[p - s], clamped), then selected in a mask
  Value ex = u;
  Value mask;
  for (size_t d = 0; d < xs.size(); ++d) {
    Value io = g.iota(DType::I64, xs, static_cast<int64_t>(d));
    Value sb = g.broadcast(s[d], xs, {});
    Value in = g.binary(OpCode::And, g.compare(Cmp::GE, io, sb),
                        g.compare(Cmp::LT, io, g.binary(OpCode::Add, sb, splat(g, DType::I64, xs, 0, us[d]))));
    mask = mask.valid() ? g.binary(OpCode::And, mask, in) : in;
    if (us[d] == xs[d]) continue;
    Shape es = g.shape(ex);
    es[d] = xs[d];
    Value pos = g.binary(OpCode::Sub, g.iota(DType::I64, es, static_cast<int64_t>(d)), g.broadcast(s[d], es, {}));
    pos = g.op(OpCode::Clamp, {splat(g, DType::I64, {}, 0, 0), pos, splat(g, DType::I64, {}, 0, us[d] - 1)});
    ex = g.op(OpCode::Gather, {ex, pos}, axis(static_cast<int64_t>(d)));
  }
  return g.select(mask, ex, x);
}

Value pad(Graph& g, Value x, Value pv, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
          const Op& op) {
  Shape xs = g.shape(x);
  IMPORT_CHECK(lo.size() == xs.size() && hi.size() == xs.size(), op, "padding lists need ", xs.size(), " entries");
  std::vector<int64_t> s(xs.size(), 0), l = xs;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (lo[d] < 0) s[d] = -lo[d];
    if (hi[d] < 0) l[d] = xs[d] + hi[d];
  }
  Value cur = slice(g, x, s, l, {});
  for (size_t d = 0; d < xs.size(); ++d) {
    std::vector<Value> parts;
    Shape cs = g.shape(cur);
    if (lo[d] > 0) { Shape p = cs; p[d] = lo[d]; parts.push_back(g.broadcast(pv, p, {})); }
    parts.push_back(cur);
    if (hi[d] > 0) { Shape p = cs; p[d] = hi[d]; parts.push_back(g.broadcast(pv, p, {})); }
    cur = concat(g, parts, static_cast<int64_t>(d));
  }
  return cur;
}

}  // namespace torch_tpu::ir::shlo
