// Pooling over the last 1-3 dims (docs/decisions/convolution.md):
//   avg_pool2d/3d          reduce_window sum / a per-dim separable divisor; backward: the
//                          scaled gradient summed by reduce_window with base dilation = stride
//   max_pool2d/3d_with_indices, adaptive_max_pool2d/3d
//                          one pass over the window taps (strided slices of the padded input,
//                          or gathers for adaptive windows) keeping value and flat index, with
//                          PyTorch CPU's order (first maximum; NaN wins); backward: scatter_add
//                          of the gradient at the indices
//   _adaptive_avg_pool2d/3d  per pooled dim: reduce_window (equal windows) or a sum of gathered
//                          taps, so NaN/Inf stay in their windows; backward: a dot_general with the
//                          transposed averaging matrix built from iota
// Sums run in f32 for bf16/f16 (PyTorch CPU's accumulate type).
#include "lowering/from_aten/common.h"

namespace torch_tpu::lowering {
namespace {

using ir::Cmp;
using ir::Reducer;

// kernel_size / stride / padding / dilation as PyTorch's pooling expands them.
std::vector<int64_t> expand(Lower& L, const c10::IValue& v, int64_t S, const char* what,
                            const std::vector<int64_t>* dflt = nullptr) {
  std::vector<int64_t> r = v.isNone() ? std::vector<int64_t>{} : v.toIntVector();
  if (r.empty() && dflt) return *dflt;
  TORCH_CHECK(r.size() == 1 || static_cast<int64_t>(r.size()) == S, "[", L.op(), "] ", what,
              " must either be a single int, or a tuple of ", S, " ints; got ", r.size(), " values");
  if (r.size() == 1) r.assign(S, r[0]);
  return r;
}

int64_t pool_out(int64_t X, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
  int64_t num = X + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil && (out - 1) * s >= X + p) --out;
  return out;
}

struct Pool {
  int64_t S;                       // pooled dims (the last S of the input)
  std::vector<int64_t> X, Y, k, s, p, d;
  ir::Shape in_shape, out_shape;
};

// Checks and output sizes, as PyTorch's pool2d_shape_check / pool3d_shape_check.
Pool pool_geometry(Lower& L, const at::Tensor& x, int64_t S, Args a, int ki, bool has_dilation,
                   bool ceil) {
  Pool P;
  P.S = S;
  int64_t r = x.dim();
  TORCH_CHECK(r == S + 1 || r == S + 2, "[", L.op(), "] expected ", S + 1, "D or ", S + 2,
              "D (batch mode) tensor for input; got ", r, "D");
  for (int64_t i = r == S + 2 ? 1 : 0; i < r; ++i)  // unbatched input: no dim may be empty
    TORCH_CHECK(x.size(i) > 0, "[", L.op(), "] expected input to have non-zero size for non-batch dimensions; got ",
                x.sizes());
  P.k = expand(L, a[ki], S, "kernel_size");
  P.s = expand(L, a[ki + 1], S, "stride", &P.k);
  P.p = expand(L, a[ki + 2], S, "padding");
  P.d = has_dilation ? expand(L, a[ki + 3], S, "dilation") : std::vector<int64_t>(S, 1);
  P.in_shape = shape_of(x);
  P.out_shape = P.in_shape;
  for (int64_t i = 0; i < S; ++i) {
    TORCH_CHECK(P.k[i] > 0, "[", L.op(), "] kernel size should be greater than zero; got ", P.k[i]);
    TORCH_CHECK(P.s[i] > 0, "[", L.op(), "] stride should be greater than zero; got ", P.s[i]);
    TORCH_CHECK(P.d[i] > 0, "[", L.op(), "] dilation should be greater than zero; got ", P.d[i]);
    TORCH_CHECK(P.p[i] >= 0 && P.p[i] <= P.k[i] / 2, "[", L.op(),
                "] pad should be at most half of effective kernel size; got pad ", P.p[i], ", kernel size ", P.k[i]);
    int64_t X = x.size(r - S + i), Y = pool_out(X, P.k[i], P.p[i], P.s[i], P.d[i], ceil);
    TORCH_CHECK(Y >= 1, "[", L.op(), "] output size is too small; got input ", x.sizes(), " giving output size ",
                Y, " in pooled dim ", i);
    P.X.push_back(X);
    P.Y.push_back(Y);
    P.out_shape[r - S + i] = Y;
  }
  return P;
}

Value iota64(Lower& L, int64_t n) { return L.g.iota(DType::I64, {n}, 0); }
Value c64(Lower& L, int64_t v, int64_t n) { return L.g.constant(static_cast<double>(v), DType::I64, {n}); }
Value add64(Lower& L, Value x, int64_t v) { return L.g.binary(OpCode::Add, x, c64(L, v, L.g.shape(x)[0])); }
Value mul64(Lower& L, Value x, int64_t v) { return L.g.binary(OpCode::Mul, x, c64(L, v, L.g.shape(x)[0])); }
Value div64(Lower& L, Value x, int64_t v) { return L.g.binary(OpCode::Div, x, c64(L, v, L.g.shape(x)[0])); }

// ---- max pooling with indices ----------------------------------------------------------------

// One pooled dim of a window-tap pass: for tap t, the operand slice/gather along `axis`, the
// input positions [Y] (i64) and whether they are inside the window and the input ([Y] i1).
struct TapDim {
  int64_t axis, X, Y, taps;
  std::function<Value(Value, int64_t)> take;
  std::function<Value(int64_t)> pos, valid;
};

struct Best {
  Value val, idx, seen;
};

// Folds every tap combination into (max value, flat index) in row-major tap order.
void fold_taps(Lower& L, const std::vector<TapDim>& dims, size_t i, Value cur, Value pos, Value valid,
               const ir::Shape& out, Best& b) {
  if (i == dims.size()) {
    Value nan = L.g.compare(Cmp::NE, cur, cur);
    Value better = L.g.binary(OpCode::Or, L.g.compare(Cmp::GT, cur, b.val), nan);
    Value pick = L.g.binary(OpCode::And, valid, L.g.binary(OpCode::Or, L.g.unary(OpCode::Not, b.seen), better));
    b.val = L.g.select(pick, cur, b.val);
    b.idx = L.g.select(pick, pos, b.idx);
    b.seen = L.g.binary(OpCode::Or, b.seen, valid);
    return;
  }
  const TapDim& d = dims[i];
  int64_t plane = 1;
  for (size_t j = i + 1; j < dims.size(); ++j) plane *= dims[j].X;
  for (int64_t t = 0; t < d.taps; ++t) {
    Value p = L.g.broadcast(mul64(L, d.pos(t), plane), out, {d.axis});
    Value v = L.g.broadcast(d.valid(t), out, {d.axis});
    fold_taps(L, dims, i + 1, d.take(cur, t), L.g.binary(OpCode::Add, pos, p),
              L.g.binary(OpCode::And, valid, v), out, b);
  }
}

std::vector<Value> max_taps(Lower& L, Value x, const std::vector<TapDim>& dims, const ir::Shape& out) {
  DType dt = L.g.dtype(x);  // the initial best is never read (the first valid tap wins)
  Best b{L.g.constant(ir::is_float(dt) ? -INFINITY : 0.0, dt, out), L.g.constant(0, DType::I64, out), L.g.constant(0, DType::Bool, out)};
  fold_taps(L, dims, 0, x, L.g.constant(0, DType::I64, out), L.g.constant(1, DType::Bool, out), out, b);
  return {b.val, b.idx};
}

// Pads `x` along `axis` with lo / hi copies of a constant.
Value pad_axis(Lower& L, Value x, int64_t axis, int64_t lo, int64_t hi, double v) {
  std::vector<Value> parts;
  ir::Shape s = L.g.shape(x);
  if (lo > 0) {
    s[axis] = lo;
    parts.push_back(L.g.constant(v, L.g.dtype(x), s));
  }
  parts.push_back(x);
  if (hi > 0) {
    s[axis] = hi;
    parts.push_back(L.g.constant(v, L.g.dtype(x), s));
  }
  return L.g.concat(parts, axis);
}

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
std::vector<Value> max_pool(Lower& L, Args a, int64_t S) {
  const at::Tensor& self = a[0].toTensor();
  Pool P = pool_geometry(L, self, S, a, 1, true, a[5].toBool());
  DType dt = to_ir(self.scalar_type(), L.op());
  TORCH_CHECK(dt != DType::Bool, "[", L.op(), "] unsupported dtype; got ", self.scalar_type(),
              ", expected a float or integer type");
  Value x = L.in(self);
  int64_t r = self.dim();
  std::vector<TapDim> dims;
  for (int64_t i = 0; i < S; ++i) {
    int64_t ax = r - S + i, X = P.X[i], Y = P.Y[i], k = P.k[i], s = P.s[i], p = P.p[i], d = P.d[i];
    int64_t need = (Y - 1) * s + (k - 1) * d + 1;  // padded length the taps read
    x = pad_axis(L, x, ax, p, std::max<int64_t>(0, need - X - p), 0.0);
    TapDim td{ax, X, Y, k, nullptr, nullptr, nullptr};
    td.take = [&L, ax, Y, s, d](Value v, int64_t t) {
      ir::Shape sh = L.g.shape(v);
      std::vector<int64_t> start(sh.size(), 0), limit = sh, step(sh.size(), 1);
      start[ax] = t * d, limit[ax] = t * d + (Y - 1) * s + 1, step[ax] = s;
      return L.g.slice(v, start, limit, step);
    };
    td.pos = [&L, Y, s, p, d, X](int64_t t) {
      Value pos = add64(L, mul64(L, iota64(L, Y), s), t * d - p);
      return L.g.op(OpCode::Clamp, {L.g.constant(0, DType::I64), pos, L.g.constant(static_cast<double>(X - 1), DType::I64)});
    };
    td.valid = [&L, Y, s, p, d, X](int64_t t) {
      Value pos = add64(L, mul64(L, iota64(L, Y), s), t * d - p);
      return L.g.binary(OpCode::And, L.g.compare(Cmp::GE, pos, c64(L, 0, Y)), L.g.compare(Cmp::LT, pos, c64(L, X, Y)));
    };
    dims.push_back(std::move(td));
  }
  return max_taps(L, x, dims, P.out_shape);
}

// Adaptive windows along one dim: start(o) = floor(o X / Y), end(o) = ceil((o + 1) X / Y).
Value win_start(Lower& L, int64_t X, int64_t Y) { return div64(L, mul64(L, iota64(L, Y), X), Y); }
Value win_end(Lower& L, int64_t X, int64_t Y) {
  return div64(L, add64(L, mul64(L, add64(L, iota64(L, Y), 1), X), Y - 1), Y);
}
int64_t max_window(int64_t X, int64_t Y) {
  int64_t m = 0;
  for (int64_t o = 0; o < Y; ++o) m = std::max(m, ((o + 1) * X + Y - 1) / Y - o * X / Y);
  return m;
}

std::vector<int64_t> adaptive_sizes(Lower& L, const at::Tensor& x, const c10::IValue& v, int64_t S) {
  std::vector<int64_t> out = v.toIntVector();
  TORCH_CHECK(static_cast<int64_t>(out.size()) == S, "[", L.op(), "] output_size must be ", S, " ints; got ",
              out.size());
  int64_t r = x.dim();
  TORCH_CHECK(r == S + 1 || r == S + 2, "[", L.op(), "] expected ", S + 1, "D or ", S + 2,
              "D tensor for input; got ", r, "D");
  for (int64_t i = 1; i < r; ++i)
    TORCH_CHECK(x.size(i) > 0, "[", L.op(), "] expected input to have non-zero size for non-batch dimensions; got ",
                x.sizes());
  for (int64_t o : out) TORCH_CHECK(o >= 0, "[", L.op(), "] output_size must be non-negative; got ", o);
  return out;
}

// adaptive_max_pool{2,3}d(self, output_size)
std::vector<Value> adaptive_max_pool(Lower& L, Args a, int64_t S) {
  const at::Tensor& self = a[0].toTensor();
  std::vector<int64_t> Ys = adaptive_sizes(L, self, a[1], S);
  DType dt = to_ir(self.scalar_type(), L.op());
  TORCH_CHECK(ir::is_float(dt), "[", L.op(), "] unsupported dtype; got ", self.scalar_type(), ", expected a float type");
  Value x = L.in(self);
  int64_t r = self.dim();
  ir::Shape out = shape_of(self);
  for (int64_t i = 0; i < S; ++i) out[r - S + i] = Ys[i];
  if (ir::numel(out) == 0) return {L.g.constant(0, dt, out), L.g.constant(0, DType::I64, out)};
  std::vector<TapDim> dims;
  for (int64_t i = 0; i < S; ++i) {
    int64_t ax = r - S + i, X = self.size(ax), Y = Ys[i];
    TapDim td{ax, X, Y, max_window(X, Y), nullptr, nullptr, nullptr};
    auto pos = [&L, X, Y](int64_t t) {
      Value p = add64(L, win_start(L, X, Y), t);
      return L.g.binary(OpCode::Min, p, add64(L, win_end(L, X, Y), -1));
    };
    td.pos = pos;
    td.valid = [&L, X, Y](int64_t t) { return L.g.compare(Cmp::LT, add64(L, win_start(L, X, Y), t), win_end(L, X, Y)); };
    td.take = [&L, ax, pos](Value v, int64_t t) {
      ir::Shape sh = L.g.shape(v);
      int64_t Yn = L.g.shape(pos(t))[0];
      sh[ax] = Yn;
      ir::Attrs at;
      at.dims = {ax};
      return L.g.op(OpCode::Gather, {v, L.g.broadcast(pos(t), sh, {ax})}, at);
    };
    dims.push_back(std::move(td));
  }
  return max_taps(L, x, dims, out);
}

// max_pool*_backward / adaptive_max_pool*_backward: scatter_add of grad_output at indices
// (flat positions in the pooled plane).
Value index_backward(Lower& L, const at::Tensor& go, const at::Tensor& self, const at::Tensor& indices, int64_t S) {
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  int64_t r = self.dim();
  TORCH_CHECK(go.sizes() == indices.sizes(), "[", L.op(), "] grad_output and indices shapes differ; got ",
              go.sizes(), " and ", indices.sizes());
  ir::Shape lead(self.sizes().begin(), self.sizes().end() - S), gl = lead, il = lead;
  int64_t plane = 1, oplane = 1;
  for (int64_t i = r - S; i < r; ++i) plane *= self.size(i), oplane *= go.size(i);
  gl.push_back(plane);
  il.push_back(oplane);
  Value g = L.g.reshape(L.in(go, ct), il), idx = L.g.reshape(L.in(indices, DType::I64), il);
  ir::Attrs at;
  at.dims = {static_cast<int64_t>(lead.size())};
  Value res = L.g.op(OpCode::ScatterAdd, {L.g.constant(0, ct, gl), idx, g}, at);
  return L.g.convert(L.g.reshape(res, shape_of(self)), dt);
}

// ---- average pooling ---------------------------------------------------------------------------

// Per-dim divisor counts [Y] (f32/f64) of avg_pool, PyTorch CPU's pool_size rules.
Value avg_count(Lower& L, const Pool& P, int64_t i, bool include_pad, DType ct) {
  int64_t Y = P.Y[i], X = P.X[i], k = P.k[i], s = P.s[i], p = P.p[i];
  Value start = add64(L, mul64(L, iota64(L, Y), s), -p);
  Value end = L.g.binary(OpCode::Min, add64(L, start, k), c64(L, X + p, Y));
  if (!include_pad) {
    start = L.g.binary(OpCode::Max, start, c64(L, 0, Y));
    end = L.g.binary(OpCode::Min, end, c64(L, X, Y));
  }
  Value n = L.g.binary(OpCode::Max, L.g.binary(OpCode::Sub, end, start), c64(L, 1, Y));
  return L.g.convert(n, ct);
}

// The divisor of every output element, shape out.
Value avg_divisor(Lower& L, const Pool& P, const c10::IValue& override_, bool include_pad, DType ct) {
  if (!override_.isNone()) {
    int64_t d = override_.toInt();
    TORCH_CHECK(d != 0, "[", L.op(), "] divisor must be not zero");
    return L.g.constant(static_cast<double>(d), ct, P.out_shape);
  }
  int64_t r = static_cast<int64_t>(P.out_shape.size());
  Value div = L.g.constant(1, ct, P.out_shape);
  for (int64_t i = 0; i < P.S; ++i)
    div = L.g.binary(OpCode::Mul, div, L.g.broadcast(avg_count(L, P, i, include_pad, ct), P.out_shape, {r - P.S + i}));
  return div;
}

ir::Attrs full_window(int64_t r) {
  ir::Attrs a;
  a.window.assign(r, 1), a.window_strides.assign(r, 1), a.pad_lo.assign(r, 0), a.pad_hi.assign(r, 0);
  a.lhs_dilation.assign(r, 1), a.rhs_dilation.assign(r, 1);
  a.reducer = Reducer::Sum;
  return a;
}

// Slices v to `shape` (a prefix of each dim).
Value crop(Lower& L, Value v, const ir::Shape& shape) {
  if (L.g.shape(v) == shape) return v;
  return L.g.slice(v, std::vector<int64_t>(shape.size(), 0), shape, std::vector<int64_t>(shape.size(), 1));
}

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
std::vector<Value> avg_pool(Lower& L, Args a, int64_t S) {
  const at::Tensor& self = a[0].toTensor();
  Pool P = pool_geometry(L, self, S, a, 1, false, a[4].toBool());
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  TORCH_CHECK(dt != DType::Bool, "[", L.op(), "] \"avg_pool\" not implemented for 'Bool'");
  if (!ir::is_float(dt)) ct = dt;
  int64_t r = self.dim();
  ir::Attrs w = full_window(r);
  for (int64_t i = 0; i < S; ++i) {
    int64_t ax = r - S + i;
    w.window[ax] = P.k[i], w.window_strides[ax] = P.s[i], w.pad_lo[ax] = P.p[i];
    w.pad_hi[ax] = std::max<int64_t>(0, (P.Y[i] - 1) * P.s[i] + P.k[i] - P.X[i] - P.p[i]);
  }
  Value sum = crop(L, L.g.reduce_window(L.in(self, ct), w), P.out_shape);
  Value div = avg_divisor(L, P, a[6], a[5].toBool(), ct);
  return one(L.g.convert(L.g.binary(OpCode::Div, sum, div), dt));
}

// avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
//                         count_include_pad, divisor_override)
std::vector<Value> avg_pool_backward(Lower& L, Args a, int64_t S) {
  const at::Tensor &go = a[0].toTensor(), &self = a[1].toTensor();
  Pool P = pool_geometry(L, self, S, a, 2, false, a[5].toBool());
  TORCH_CHECK(shape_of(go) == P.out_shape, "[", L.op(), "] grad_output shape mismatch; got ", go.sizes(),
              ", expected ", ir::shape_str(P.out_shape));
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  int64_t r = self.dim();
  Value g = L.g.binary(OpCode::Div, L.in(go, ct), avg_divisor(L, P, a[7], a[6].toBool(), ct));
  ir::Attrs w = full_window(r);
  for (int64_t i = 0; i < S; ++i) {
    int64_t ax = r - S + i, k = P.k[i], s = P.s[i], p = P.p[i];
    w.window[ax] = k, w.lhs_dilation[ax] = s, w.pad_lo[ax] = k - 1 - p;
    w.pad_hi[ax] = std::max<int64_t>(0, P.X[i] - 1 - (P.Y[i] - 1) * s + p);
  }
  return one(L.g.convert(crop(L, L.g.reduce_window(g, w), P.in_shape), dt));
}

// ---- adaptive average pooling: one averaging matrix per pooled dim -----------------------

// P [Y, X]: P[o, x] = 1 / (end(o) - start(o)) inside window o, else 0.
Value avg_matrix(Lower& L, int64_t X, int64_t Y, DType ct) {
  Value st = L.g.broadcast(win_start(L, X, Y), {Y, X}, {0}), en = L.g.broadcast(win_end(L, X, Y), {Y, X}, {0});
  Value col = L.g.iota(DType::I64, {Y, X}, 1);
  Value in = L.g.binary(OpCode::And, L.g.compare(Cmp::GE, col, st), L.g.compare(Cmp::LT, col, en));
  Value cnt = L.g.convert(L.g.binary(OpCode::Sub, en, st), ct);
  return L.g.select(in, L.g.binary(OpCode::Div, L.g.constant(1, ct, {Y, X}), cnt), L.g.constant(0, ct, {Y, X}));
}

// Contracts dim `ax` of v with dim `mdim` of m [Y, X] (or [X, Y]) and puts the result back at ax.
Value apply_along(Lower& L, Value v, Value m, int64_t ax, int64_t mdim) {
  int64_t r = static_cast<int64_t>(L.g.shape(v).size());
  ir::Attrs d;
  d.lhs_contract = {ax};
  d.rhs_contract = {mdim};
  d.precision = ir::Precision::Highest;
  Value y = L.g.dot(v, m, d);  // [dims of v without ax..., free dim of m]
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r - 1; ++i) {
    if (i == ax) perm.push_back(r - 1);
    perm.push_back(i);
  }
  if (ax == r - 1) perm.push_back(r - 1);
  return L.g.transpose(y, perm);
}

// The window means of v along `ax` (X -> Y adaptive windows). Not a dot with the averaging
// matrix: its zeros would spread a NaN/Inf to every window (0 * inf = NaN). Equal windows
// (Y divides X: global pooling among them) are one reduce_window; others sum max_window(X, Y)
// gathered taps, the taps outside a window selected away.
Value avg_along(Lower& L, Value v, int64_t ax, int64_t X, int64_t Y) {
  ir::Shape sh = L.g.shape(v);
  DType ct = L.g.dtype(v);
  int64_t r = static_cast<int64_t>(sh.size());
  sh[ax] = Y;
  if (Y == 0 || ir::numel(sh) == 0) return L.g.constant(0, ct, sh);
  if (X % Y == 0) {
    ir::Attrs w = full_window(r);
    w.window[ax] = w.window_strides[ax] = X / Y;
    Value sum = L.g.reduce_window(v, w);
    return L.g.binary(OpCode::Div, sum, L.g.constant(static_cast<double>(X / Y), ct, sh));
  }
  Value st = win_start(L, X, Y), en = win_end(L, X, Y);
  Value sum = L.g.constant(0, ct, sh);
  for (int64_t t = 0; t < max_window(X, Y); ++t) {
    Value pos = L.g.binary(OpCode::Min, add64(L, st, t), add64(L, en, -1));
    ir::Attrs at;
    at.dims = {ax};
    Value tap = L.g.op(OpCode::Gather, {v, L.g.broadcast(pos, sh, {ax})}, at);
    Value valid = L.g.broadcast(L.g.compare(Cmp::LT, add64(L, st, t), en), sh, {ax});
    sum = L.g.binary(OpCode::Add, sum, L.g.select(valid, tap, L.g.constant(0, ct, sh)));
  }
  Value cnt = L.g.broadcast(L.g.convert(L.g.binary(OpCode::Sub, en, st), ct), sh, {ax});
  return L.g.binary(OpCode::Div, sum, cnt);
}

// _adaptive_avg_pool{2,3}d(self, output_size)
std::vector<Value> adaptive_avg_pool(Lower& L, Args a, int64_t S) {
  const at::Tensor& self = a[0].toTensor();
  std::vector<int64_t> Ys = adaptive_sizes(L, self, a[1], S);
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  TORCH_CHECK(ir::is_float(dt), "[", L.op(), "] unsupported dtype; got ", self.scalar_type(), ", expected a float type");
  Value x = L.in(self, ct);
  int64_t r = self.dim();
  for (int64_t i = 0; i < S; ++i) {
    int64_t ax = r - S + i;
    x = avg_along(L, x, ax, self.size(ax), Ys[i]);
  }
  return one(L.g.convert(x, dt));
}

// _adaptive_avg_pool{2,3}d_backward(grad_output, self)
std::vector<Value> adaptive_avg_pool_backward(Lower& L, Args a, int64_t S) {
  const at::Tensor &go = a[0].toTensor(), &self = a[1].toTensor();
  DType dt = to_ir(self.scalar_type(), L.op()), ct = opmath(dt);
  int64_t r = self.dim();
  TORCH_CHECK(go.dim() == r, "[", L.op(), "] grad_output rank mismatch; got ", go.dim(), ", expected ", r);
  Value g = L.in(go, ct);
  for (int64_t i = 0; i < S; ++i) {
    int64_t ax = r - S + i;
    g = apply_along(L, g, avg_matrix(L, self.size(ax), go.size(ax), ct), ax, 0);
  }
  return one(L.g.convert(g, dt));
}

template <int S>
std::vector<Value> max_pool_s(Lower& L, Args a) { return max_pool(L, a, S); }
template <int S>
std::vector<Value> max_pool_backward_s(Lower& L, Args a) {
  // (grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
  return one(index_backward(L, a[0].toTensor(), a[1].toTensor(), a[7].toTensor(), S));
}
template <int S>
std::vector<Value> adaptive_max_pool_s(Lower& L, Args a) { return adaptive_max_pool(L, a, S); }
template <int S>
std::vector<Value> adaptive_max_pool_backward_s(Lower& L, Args a) {
  // (grad_output, self, indices)
  return one(index_backward(L, a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), S));
}
template <int S>
std::vector<Value> avg_pool_s(Lower& L, Args a) { return avg_pool(L, a, S); }
template <int S>
std::vector<Value> avg_pool_backward_s(Lower& L, Args a) { return avg_pool_backward(L, a, S); }
template <int S>
std::vector<Value> adaptive_avg_pool_s(Lower& L, Args a) { return adaptive_avg_pool(L, a, S); }
template <int S>
std::vector<Value> adaptive_avg_pool_backward_s(Lower& L, Args a) { return adaptive_avg_pool_backward(L, a, S); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_ops(m, {
      {"max_pool2d_with_indices", max_pool_s<2>}, {"max_pool2d_with_indices.out", max_pool_s<2>},
      {"max_pool3d_with_indices", max_pool_s<3>}, {"max_pool3d_with_indices.out", max_pool_s<3>},
      {"max_pool2d_with_indices_backward", max_pool_backward_s<2>},
      {"max_pool2d_with_indices_backward.grad_input", max_pool_backward_s<2>},
      {"max_pool3d_with_indices_backward", max_pool_backward_s<3>},
      {"max_pool3d_with_indices_backward.grad_input", max_pool_backward_s<3>},
      {"adaptive_max_pool2d", adaptive_max_pool_s<2>}, {"adaptive_max_pool2d.out", adaptive_max_pool_s<2>},
      {"adaptive_max_pool3d", adaptive_max_pool_s<3>}, {"adaptive_max_pool3d.out", adaptive_max_pool_s<3>},
      {"adaptive_max_pool2d_backward", adaptive_max_pool_backward_s<2>},
      {"adaptive_max_pool2d_backward.grad_input", adaptive_max_pool_backward_s<2>},
      {"adaptive_max_pool3d_backward", adaptive_max_pool_backward_s<3>},
      {"adaptive_max_pool3d_backward.grad_input", adaptive_max_pool_backward_s<3>},
      {"avg_pool2d", avg_pool_s<2>}, {"avg_pool2d.out", avg_pool_s<2>},
      {"avg_pool3d", avg_pool_s<3>}, {"avg_pool3d.out", avg_pool_s<3>},
      {"avg_pool2d_backward", avg_pool_backward_s<2>}, {"avg_pool2d_backward.grad_input", avg_pool_backward_s<2>},
      {"avg_pool3d_backward", avg_pool_backward_s<3>}, {"avg_pool3d_backward.grad_input", avg_pool_backward_s<3>},
      {"_adaptive_avg_pool2d", adaptive_avg_pool_s<2>}, {"_adaptive_avg_pool2d.out", adaptive_avg_pool_s<2>},
      {"_adaptive_avg_pool3d", adaptive_avg_pool_s<3>}, {"_adaptive_avg_pool3d.out", adaptive_avg_pool_s<3>},
      {"adaptive_avg_pool3d.out", adaptive_avg_pool_s<3>},
      {"_adaptive_avg_pool2d_backward", adaptive_avg_pool_backward_s<2>},
      {"_adaptive_avg_pool2d_backward.out", adaptive_avg_pool_backward_s<2>},
      {"_adaptive_avg_pool3d_backward", adaptive_avg_pool_backward_s<3>},
      {"_adaptive_avg_pool3d_backward.out", adaptive_avg_pool_backward_s<3>},
  });
}

}  // namespace
}  // namespace torch_tpu::lowering
