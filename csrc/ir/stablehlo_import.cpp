// The StableHLO importer's evaluator: walks @main's ops in order, binding each result name to
// an IR value (scopes for regions and inlined calls), one table row per StableHLO op, and
// the control flow the IR has no op for: while loops unrolled while their condition folds to
// a constant, case/if resolved (or all branches selected between), calls inlined.
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <unordered_map>

#include "base/error.h"
#include "ir/stablehlo_import_internal.h"

namespace torch_tpu::ir {
namespace shlo {
namespace {

using Vals = std::vector<Value>;

const std::unordered_map<std::string, OpCode>& elementwise_ops() {
  static const auto* m = [] {
    auto* t = new std::unordered_map<std::string, OpCode>;
    auto add = [&](const char* hlo, OpCode c) {
      std::string n = hlo;
      if (n.rfind("tpu.", 0) == 0) return;  // our composites are not StableHLO
      (*t)[n.find('.') == std::string::npos ? "stablehlo." + n : n] = c;
    };
#define UNARY(name, hlo, dt) add(hlo, OpCode::name);
#define BINARY(name, hlo, dt, traits) add(hlo, OpCode::name);
#include "ir/ops.def"
    return t;
  }();
  return *m;
}

Reducer reducer_of(const std::string& name, const Op& op) {
  static const std::pair<const char*, Reducer> kR[] = {
      {"stablehlo.add", Reducer::Sum},     {"stablehlo.multiply", Reducer::Prod},
      {"stablehlo.maximum", Reducer::Max}, {"stablehlo.minimum", Reducer::Min},
      {"stablehlo.and", Reducer::And},     {"stablehlo.or", Reducer::Or}};
  for (auto& [n, r] : kR)
    if (name == n) return r;
  TPU_UNIMPLEMENTED("[stablehlo import] unsupported reduce body '", name, "' at line ", op.line,
                    "; expected add, multiply, maximum, minimum, and, or");
}

Cmp direction(const Op& op) {
  std::string d;
  auto it = op.attrs.find("comparison_direction");
  if (it != op.attrs.end()) d = it->second;
  else if (!op.words.empty()) d = op.words[0];
  static const std::pair<const char*, Cmp> kD[] = {{"EQ", Cmp::EQ}, {"NE", Cmp::NE}, {"LT", Cmp::LT},
                                                   {"LE", Cmp::LE}, {"GT", Cmp::GT}, {"GE", Cmp::GE}};
  for (auto& [n, c] : kD)
    if (d.find(n) != std::string::npos) return c;
  IMPORT_CHECK(false, op, "no comparison direction");
  return Cmp::EQ;
}

class Importer {
 public:
  Importer(const Module& m, ImportedGraph& out, const ImportOptions& opt) : m_(m), out_(out), g_(out.graph), opt_(opt) {}

  void run() {
    const Func* main = m_.find("main");
    if (!main) {
      for (const Func& f : m_.funcs)
        if (f.is_public) main = main ? nullptr : &f;
      TPU_CHECK(main, "[stablehlo import] no public @main; expected one public function");
    }
    Vals args;
    for (const Type& t : main->body.arg_types) args.push_back(g_.param(t.dtype, t.shape));
    out_.num_args = static_cast<int>(args.size());
    Vals res = call(*main, args, 0);
    g_.set_outputs(res);
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  Value get(const std::string& name, const Op& op) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
      if (it->count("\x01isolated")) break;
    }
    IMPORT_CHECK(false, op, "use of undefined value ", name);
    return {};
  }
  Vals operands(const Op& op) {
    Vals v;
    for (const auto& n : op.operands) v.push_back(get(n, op));
    return v;
  }

  Vals call(const Func& f, const Vals& args, int depth) {
    TPU_CHECK(depth < 64, "[stablehlo import] call depth over 64 at @", f.name, " (recursion?)");
    TPU_CHECK(args.size() == f.body.args.size(), "[stablehlo import] @", f.name, " takes ",
              f.body.args.size(), " arguments; got ", args.size());
    Scope s;
    s["\x01isolated"] = Value{};
    scopes_.push_back(std::move(s));
    depth_ = depth;
    Vals r = region(f.body, args, false);
    scopes_.pop_back();
    return r;
  }

  // Runs a region's ops with its block arguments bound; returns its terminator's operands.
  Vals region(const Region& r, const Vals& args, bool push = true) {
    if (push) scopes_.emplace_back();
    TPU_CHECK(args.size() == r.args.size(), "[stablehlo import] region takes ", r.args.size(),
              " arguments; got ", args.size());
    for (size_t i = 0; i < args.size(); ++i) scopes_.back()[r.args[i]] = args[i];
    Vals res;
    bool returned = false;
    for (const Op& op : r.ops) {
      if (op.name == "func.return" || op.name == "stablehlo.return") {
        res = operands(op);
        returned = true;
        break;
      }
      Vals out = eval(op);
      IMPORT_CHECK(out.size() == op.results.size(), op, "produced ", out.size(), " results; the text names ",
                   op.results.size());
      for (size_t i = 0; i < out.size(); ++i) {
        if (i < op.result_types.size()) check_type(out[i], op.result_types[i], op);
        scopes_.back()[op.results[i]] = out[i];
      }
      TPU_CHECK(static_cast<int64_t>(g_.nodes().size()) <= opt_.max_nodes, "[stablehlo import] graph over ",
                opt_.max_nodes, " nodes at line ", op.line, " (a loop unrolled too far?)");
    }
    TPU_CHECK(returned, "[stablehlo import] region without a return");
    if (push) scopes_.pop_back();
    return res;
  }

  void check_type(Value v, const Type& t, const Op& op) {
    IMPORT_CHECK(g_.shape(v) == t.shape && g_.dtype(v) == t.dtype, op, "result is ",
                 dtype_name(g_.dtype(v)), shape_str(g_.shape(v)), "; the text says ", dtype_name(t.dtype),
                 shape_str(t.shape));
  }
  const Type& result_type(const Op& op) {
    IMPORT_CHECK(!op.result_types.empty(), op, "no result type");
    return op.result_types[0];
  }
  std::string attr(const Op& op, std::initializer_list<const char*> names, bool required = true) {
    for (const char* n : names) {
      auto it = op.attrs.find(n);
      if (it != op.attrs.end()) return it->second;
    }
    IMPORT_CHECK(!required, op, "missing attribute '", *names.begin(), "'");
    return "";
  }
  std::vector<int64_t> ints(const Op& op, std::initializer_list<const char*> names) {
    return parse_int_list(attr(op, names), op.line);
  }

  Vals eval(const Op& op) {
    auto ew = elementwise_ops().find(op.name);
    if (ew != elementwise_ops().end()) {
      Vals x = operands(op);
      DType out = x.empty() ? DType::F32 : g_.dtype(x[0]);
      return {fold_or_build(g_, ew->second, x, {}, out)};
    }
    std::string n = op.name.rfind("stablehlo.", 0) == 0 ? op.name.substr(10) : op.name;
    if (n == "constant") return {constant(op)};
    if (n == "compare") {
      Attrs a;
      a.direction = direction(op);
      return {fold_or_build(g_, OpCode::Compare, operands(op), a, DType::Bool)};
    }
    if (n == "select") {
      Vals x = operands(op);
      if (g_.shape(x[0]) != g_.shape(x[1])) x[0] = g_.broadcast(x[0], g_.shape(x[1]), {});
      return {fold_or_build(g_, OpCode::Select, x, {}, g_.dtype(x[1]))};
    }
    if (n == "clamp") {
      Vals x = operands(op);
      return {fold_or_build(g_, OpCode::Clamp, x, {}, g_.dtype(x[1]))};
    }
    if (n == "convert") return {fold_or_build(g_, OpCode::Convert, operands(op), {}, result_type(op).dtype)};
    if (n == "iota") return {g_.iota(result_type(op).dtype, result_type(op).shape, parse_int(attr(op, {"iota_dimension", "dim"}), op.line))};
    if (n == "broadcast_in_dim") {
      Value x = operands(op)[0];
      const Type& t = result_type(op);
      if (auto c = const_int(g_, x); c && g_.shape(x).empty()) return {splat(g_, t.dtype, t.shape, 0, *c)};
      std::vector<int64_t> dims = ints(op, {"broadcast_dimensions", "dims"});
      const Node& xn = g_.node(x);
      if (!xn.is_param && xn.op == OpCode::Broadcast) {  // broadcast of a broadcast: one broadcast
        std::vector<int64_t> inner = xn.attrs.dims;
        for (int64_t& d : inner) d = dims.at(d);
        return {g_.broadcast(Value{xn.operands[0]}, t.shape, inner)};
      }
      return {g_.broadcast(x, t.shape, dims)};
    }
    if (n == "reshape") {
      Value x = operands(op)[0];
      const Type& t = result_type(op);
      const Node& xn = g_.node(x);
      if (!xn.is_param && xn.op == OpCode::Constant) return {g_.op(OpCode::Constant, {}, xn.attrs, t.shape, t.dtype)};
      return {g_.reshape(x, t.shape)};
    }
    if (n == "transpose") return {g_.transpose(operands(op)[0], ints(op, {"permutation", "dims"}))};
    if (n == "reverse") {
      Attrs a;
      a.dims = ints(op, {"dimensions", "dims"});
      return {g_.op(OpCode::Reverse, operands(op), a)};
    }
    if (n == "slice") return {slice_op(op)};
    if (n == "concatenate") return {concat(g_, operands(op), parse_int(attr(op, {"dimension", "dim"}), op.line))};
    if (n == "dot_general" || n == "dot") return {dot(op)};
    if (n == "reduce") return reduce(op);
    if (n == "reduce_window") return {reduce_window(op)};
    if (n == "gather") return {gather(op)};
    if (n == "dynamic_slice") {
      Vals x = operands(op);
      Vals idx(x.begin() + 1, x.end());
      return {dynamic_slice(g_, x[0], idx, ints(op, {"slice_sizes", "sizes"}))};
    }
    if (n == "dynamic_update_slice") {
      Vals x = operands(op);
      Vals idx(x.begin() + 2, x.end());
      return {dynamic_update_slice(g_, x[0], x[1], idx)};
    }
    if (n == "pad") {
      Vals x = operands(op);
      std::vector<int64_t> in = ints(op, {"interior_padding", "interior"});
      for (int64_t v : in)
        if (v != 0) TPU_UNIMPLEMENTED("[stablehlo import] pad with interior padding at line ", op.line, "; expected 0");
      return {pad(g_, x[0], x[1], ints(op, {"edge_padding_low", "low"}), ints(op, {"edge_padding_high", "high"}), op)};
    }
    if (n == "while") return while_loop(op);
    if (n == "case" || n == "if") return branches(op, n == "if");
    if (n == "func.call") {
      std::string callee = attr(op, {"callee"});
      if (!callee.empty() && callee[0] == '@') callee = callee.substr(1);
      const Func* f = m_.find(callee);
      IMPORT_CHECK(f, op, "calls unknown function @", callee);
      int d = depth_;
      Vals r = with_isolation([&] { return call(*f, operands(op), d + 1); });
      depth_ = d;
      return r;
    }
    if (n == "composite") {
      std::string callee = attr(op, {"decomposition"});
      size_t at = callee.find('@');
      callee = callee.substr(at + 1);
      while (!callee.empty() && (callee.back() == ' ' || callee.back() == ',')) callee.pop_back();
      if (!callee.empty() && callee.front() == '"') callee = callee.substr(1, callee.size() - 2);
      const Func* f = m_.find(callee);
      IMPORT_CHECK(f, op, "composite without its decomposition @", callee);
      int d = depth_;
      Vals r = with_isolation([&] { return call(*f, operands(op), d + 1); });
      depth_ = d;
      return r;
    }
    if (n == "optimization_barrier") {  // one single-operand barrier per operand
      Vals r;
      for (Value v : operands(op)) r.push_back(g_.op(OpCode::OptimizationBarrier, {v}, {}));
      return r;
    }
    if (n == "custom_call") {
      std::string target = attr(op, {"call_target_name", "callee"}, false);
      TPU_UNIMPLEMENTED("[stablehlo import] unsupported op 'stablehlo.custom_call' (target ", target,
                        ") at line ", op.line,
                        "; a Pallas kernel must be lowered with interpret=True for the host runtime");
    }
    TPU_UNIMPLEMENTED("[stablehlo import] unsupported op '", op.name, "' at line ", op.line);
  }

  template <class F>
  Vals with_isolation(F&& f) {
    return f();  // call() marks its scope isolated; lookups stop there
  }

  Value constant(const Op& op) {
    const Type& t = result_type(op);
    Dense d = parse_dense(attr(op, {"value"}), t, op.line);
    if (d.splat) return splat(g_, t.dtype, t.shape, d.fvalue, d.ivalue);
    for (const ImportedConstant& c : out_.constants)
      if (c.dtype == t.dtype && c.shape == t.shape && c.bytes == d.bytes) return Value{param_node(c.param_index)};
    Value p = g_.param(t.dtype, t.shape);
    out_.constants.push_back({g_.node(p).param_index, t.dtype, t.shape, std::move(d.bytes)});
    return p;
  }
  int param_node(int param_index) {
    for (size_t i = 0; i < g_.nodes().size(); ++i)
      if (g_.nodes()[i].is_param && g_.nodes()[i].param_index == param_index) return static_cast<int>(i);
    return -1;
  }

  Value slice_op(const Op& op) {
    Value x = operands(op)[0];
    std::vector<int64_t> s, l, st;
    auto it = op.attrs.find("slice");
    if (it != op.attrs.end()) {  // pretty: [a:b, c:d:s]
      std::string v = it->second.substr(1, it->second.size() - 2);
      size_t p = 0;
      while (p <= v.size()) {
        size_t e = v.find(',', p);
        std::string part = v.substr(p, e == std::string::npos ? std::string::npos : e - p);
        std::vector<int64_t> f;
        size_t q = 0;
        while (q <= part.size()) {
          size_t c = part.find(':', q);
          f.push_back(std::stoll(part.substr(q, c == std::string::npos ? std::string::npos : c - q)));
          if (c == std::string::npos) break;
          q = c + 1;
        }
        s.push_back(f.at(0));
        l.push_back(f.size() > 1 ? f[1] : f[0] + 1);
        st.push_back(f.size() > 2 ? f[2] : 1);
        if (e == std::string::npos) break;
        p = e + 1;
      }
    } else {
      s = ints(op, {"start_indices"});
      l = ints(op, {"limit_indices"});
      st = ints(op, {"strides"});
    }
    return slice(g_, x, s, l, st);
  }

  Value dot(const Op& op) {
    Vals x = operands(op);
    Attrs a;
    if (op.name == "stablehlo.dot") {
      a.lhs_contract = {static_cast<int64_t>(g_.shape(x[0]).size()) - 1};
      a.rhs_contract = {0};
    } else if (op.attrs.count("dot_dimension_numbers")) {
      const std::string& d = op.attrs.at("dot_dimension_numbers");
      auto field = [&](const char* name) {
        size_t p = d.find(name);
        if (p == std::string::npos) return std::vector<int64_t>{};
        size_t b = d.find('[', p), e = d.find(']', b);
        return parse_int_list(d.substr(b, e - b + 1), op.line);
      };
      a.lhs_batch = field("lhs_batching_dimensions");
      a.rhs_batch = field("rhs_batching_dimensions");
      a.lhs_contract = field("lhs_contracting_dimensions");
      a.rhs_contract = field("rhs_contracting_dimensions");
    } else {
      auto pair = [&](const char* name, std::vector<int64_t>* l, std::vector<int64_t>* r) {
        std::string v = attr(op, {name}, false);
        if (v.empty()) return;
        size_t xpos = v.find(" x ");
        *l = parse_int_list(v.substr(0, xpos), op.line);
        *r = parse_int_list(v.substr(xpos + 3), op.line);
      };
      pair("batching_dims", &a.lhs_batch, &a.rhs_batch);
      pair("contracting_dims", &a.lhs_contract, &a.rhs_contract);
    }
    std::string p = attr(op, {"precision_config", "precision"}, false);
    a.precision = p.find("HIGHEST") != std::string::npos ? Precision::Highest
                  : p.find("HIGH") != std::string::npos  ? Precision::High
                                                         : opt_.default_precision;
    DType out = result_type(op).dtype;
    for (Value& v : x) v = g_.convert(v, out);  // preferred_element_type: exact widening
    return g_.dot(x[0], x[1], a);
  }

  // Our printer's NaN-propagating max/min body (printer_compound.cpp emit_min_max):
  // m = maximum|minimum(a, b), then compares of a and b with themselves and selects of a, b
  // and the previous values only, returning the last select. The IR's Max/Min propagate NaN.
  static bool nan_propagating_min_max(const Region& r, Reducer* red) {
    if (r.args.size() != 2 || r.ops.size() != 6) return false;
    const Op& m = r.ops[0];
    bool is_max = m.name == "stablehlo.maximum", is_min = m.name == "stablehlo.minimum";
    if (!(is_max || is_min) || m.operands.size() != 2) return false;
    std::set<std::string> known(r.args.begin(), r.args.end());
    if (!known.count(m.operands[0]) || !known.count(m.operands[1]) || m.operands[0] == m.operands[1]) return false;
    known.insert(m.results.at(0));
    for (size_t i = 1; i + 1 < r.ops.size(); ++i) {
      const Op& o = r.ops[i];
      if (o.name != "stablehlo.compare" && o.name != "stablehlo.select") return false;
      if (o.name == "stablehlo.compare" &&
          (o.operands.size() != 2 || o.operands[0] != o.operands[1] || !o.attrs.count("comparison_direction") ||
           o.attrs.at("comparison_direction").find("NE") == std::string::npos))
        return false;
      for (const std::string& v : o.operands)
        if (!known.count(v)) return false;
      known.insert(o.results.at(0));
    }
    const Op& ret = r.ops.back();
    if (ret.operands.size() != 1 || ret.operands[0] != r.ops[r.ops.size() - 2].results.at(0) ||
        r.ops[r.ops.size() - 2].name != "stablehlo.select")
      return false;
    *red = is_max ? Reducer::Max : Reducer::Min;
    return true;
  }

  // The reducer of a reduce / reduce_window: `applies OP` or a body that is one binary op of
  // its two block arguments (or our NaN-propagating max/min).
  Reducer body_reducer(const Op& op) {
    if (op.attrs.count("applies")) return reducer_of(op.attrs.at("applies"), op);
    IMPORT_CHECK(op.regions.size() == 1, op, "no reducer body");
    const Region& r = op.regions[0];
    if (Reducer nan_red; nan_propagating_min_max(r, &nan_red)) return nan_red;
    IMPORT_CHECK(r.ops.size() == 2 && r.ops[0].operands.size() == 2 && r.ops[1].operands.size() == 1 &&
                     r.ops[1].operands[0] == r.ops[0].results.at(0) && r.args.size() == 2 &&
                     ((r.ops[0].operands[0] == r.args[0] && r.ops[0].operands[1] == r.args[1]) ||
                      (r.ops[0].operands[0] == r.args[1] && r.ops[0].operands[1] == r.args[0])),
                 op, "reducer body is not one binary op of its two arguments");
    return reducer_of(r.ops[0].name, op);
  }

  // The result combined with a non-identity init value (each output reduced it in once).
  Value with_init(Value y, Value init, Reducer red) {
    DType t = g_.dtype(init);
    bool identity = false;
    if (auto c = const_float(g_, init)) {
      identity = (red == Reducer::Sum && *c == 0) || (red == Reducer::Prod && *c == 1) ||
                 (red == Reducer::Max && std::isinf(*c) && *c < 0) || (red == Reducer::Min && std::isinf(*c) && *c > 0);
    } else if (auto ci = const_int(g_, init)) {
      int bits = static_cast<int>(dtype_size(t)) * 8;
      int64_t lo = t == DType::Bool || t == DType::U8 || t == DType::U64 ? 0 : (bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1)));
      identity = ((red == Reducer::Sum || red == Reducer::Or) && *ci == 0) || (red == Reducer::Prod && *ci == 1) ||
                 (red == Reducer::Max && *ci == lo) || (red == Reducer::And && (*ci == -1 || (t == DType::Bool && *ci == 1)));
    }
    if (identity) return y;
    static const OpCode kComb[] = {OpCode::Add, OpCode::Mul, OpCode::Max, OpCode::Min, OpCode::And, OpCode::Or};
    return g_.binary(kComb[static_cast<int>(red)], y, g_.broadcast(init, g_.shape(y), {}));
  }

  Value reduce_window(const Op& op) {
    Vals x = operands(op);
    IMPORT_CHECK(x.size() == 2, op, "variadic reduce_window is not supported; expected one input");
    Reducer red = body_reducer(op);
    if (red != Reducer::Sum && red != Reducer::Max && red != Reducer::Min)
      TPU_UNIMPLEMENTED("[stablehlo import] reduce_window with a multiply/and/or body at line ", op.line,
                        "; expected add, maximum or minimum");
    size_t r = g_.shape(x[0]).size();
    auto list = [&](const char* name) {
      std::string v = attr(op, {name}, false);
      return v.empty() ? std::vector<int64_t>(r, 1) : parse_int_list(v, op.line);
    };
    Attrs a;
    a.reducer = red;
    a.window = ints(op, {"window_dimensions"});
    a.window_strides = list("window_strides");
    a.lhs_dilation = list("base_dilations");
    a.rhs_dilation = list("window_dilations");
    std::string pad = attr(op, {"padding"}, false);
    std::vector<int64_t> p = pad.empty() ? std::vector<int64_t>(2 * r, 0)
                                         : parse_int_list(pad.substr(pad.find('['), pad.rfind(']') - pad.find('[') + 1), op.line);
    IMPORT_CHECK(p.size() == 2 * r, op, "padding needs ", r, " [lo, hi] pairs");
    for (size_t d = 0; d < r; ++d) {
      a.pad_lo.push_back(p[2 * d]);
      a.pad_hi.push_back(p[2 * d + 1]);
    }
    return with_init(g_.reduce_window(x[0], a), x[1], red);
  }

  // stablehlo.gather of whole slices along one axis (jnp `x[idx]`, `take`): each index picks
  // one row of axis a. Written as the IR's axis gather (both clamp out-of-range indices) on
  // the operand with a moved first, then reshaped and permuted into the offset_dims layout.
  Value gather(const Op& op) {
    Vals x = operands(op);
    std::string dn = attr(op, {"dimension_numbers"});
    auto field = [&](const char* name) {
      size_t p = dn.find(std::string(name) + " = ");
      if (p == std::string::npos) return std::vector<int64_t>{};
      size_t b = p + std::strlen(name) + 3;
      size_t e = dn[b] == '[' ? dn.find(']', b) + 1 : dn.find_first_of(",>", b);
      return parse_int_list(dn.substr(b, e - b), op.line);
    };
    std::vector<int64_t> offset = field("offset_dims"), collapsed = field("collapsed_slice_dims"),
                         smap = field("start_index_map"), obatch = field("operand_batching_dims"),
                         ivd = field("index_vector_dim"), sizes = ints(op, {"slice_sizes"});
    const Shape xs = g_.shape(x[0]);
    Shape is = g_.shape(x[1]);
    const int64_t r = static_cast<int64_t>(xs.size());
    bool ok = collapsed.size() == 1 && smap == collapsed && obatch.empty() && ivd.size() == 1 &&
              static_cast<int64_t>(sizes.size()) == r;
    int64_t a = ok ? collapsed[0] : 0;
    for (int64_t d = 0; ok && d < r; ++d) ok = sizes[d] == (d == a ? 1 : xs[d]);
    ok = ok && (ivd[0] == static_cast<int64_t>(is.size()) || (ivd[0] == static_cast<int64_t>(is.size()) - 1 && is.back() == 1));
    if (!ok)
      TPU_UNIMPLEMENTED("[stablehlo import] unsupported 'stablehlo.gather' at line ", op.line,
                        "; only whole slices along one axis (x[idx], take) import");
    if (ivd[0] < static_cast<int64_t>(is.size())) is.pop_back();
    int64_t k = numel(is);
    std::vector<int64_t> perm = {a};  // operand with axis a first
    Shape rest;
    for (int64_t d = 0; d < r; ++d)
      if (d != a) { perm.push_back(d); rest.push_back(xs[d]); }
    Value xt = g_.transpose(x[0], perm);
    Shape ishape = {k};
    ishape.insert(ishape.end(), rest.begin(), rest.end());
    Value idx = g_.broadcast(g_.reshape(x[1], {k}), ishape, {0});
    Attrs ax;
    ax.dims = {0};
    Value y = g_.op(OpCode::Gather, {xt, idx}, ax);  // [k, rest...]
    Shape bs = is;
    bs.insert(bs.end(), rest.begin(), rest.end());
    y = g_.reshape(y, bs);  // [batch..., rest...]
    const int64_t nb = static_cast<int64_t>(is.size()), nr = static_cast<int64_t>(bs.size());
    std::vector<int64_t> out_perm(nr);
    int64_t bi = 0, oi = 0;
    for (int64_t p = 0; p < nr; ++p)
      out_perm[p] = std::find(offset.begin(), offset.end(), p) != offset.end() ? nb + oi++ : bi++;
    return g_.transpose(y, out_perm);
  }

  // jnp.argmax / argmin: reduce(values, iota along the one reduced dim) whose body compares
  // GT (argmax) or LT (argmin) first; ties and NaN as the IR's ArgMax/ArgMin (first index,
  // NaN is the extreme), which is what JAX's body computes.
  Vals arg_reduce(const Op& op, const Vals& x) {
    std::vector<int64_t> dims = ints(op, {"dimensions"});
    const Node& io = g_.node(x[1]);
    bool iota = !io.is_param && io.op == OpCode::Iota && dims.size() == 1 && io.attrs.dims[0] == dims[0];
    Cmp dir = Cmp::EQ;
    if (iota && op.regions.size() == 1 && !op.regions[0].ops.empty() &&
        op.regions[0].ops[0].name == "stablehlo.compare")
      dir = direction(op.regions[0].ops[0]);
    if (!iota || (dir != Cmp::GT && dir != Cmp::LT))
      TPU_UNIMPLEMENTED("[stablehlo import] unsupported variadic 'stablehlo.reduce' at line ", op.line,
                        "; only one input, or argmax/argmin (values and an iota) import");
    Attrs a;
    a.dims = dims;
    Value idx = g_.op(dir == Cmp::GT ? OpCode::ArgMax : OpCode::ArgMin, {x[0]}, a);
    Value val = g_.reduce(x[0], dir == Cmp::GT ? Reducer::Max : Reducer::Min, dims);
    return {val, g_.convert(idx, g_.dtype(x[1]))};
  }

  Vals reduce(const Op& op) {
    Vals x = operands(op);
    if (x.size() == 4) return arg_reduce(op, x);
    IMPORT_CHECK(x.size() == 2, op, "variadic reduce of ", x.size() / 2,
                 " inputs is not supported; expected one input and its init value");
    Reducer red = body_reducer(op);
    std::vector<int64_t> dims = ints(op, {"dimensions"});
    bool unit = true;  // reducing only size-1 dims: one element each, a reshape
    for (int64_t d : dims) unit &= g_.shape(x[0]).at(d) == 1;
    Value y = unit && !dims.empty() ? g_.reshape(x[0], result_type(op).shape) : g_.reduce(x[0], red, dims);
    return {with_init(y, x[1], red)};
  }

  Vals while_loop(const Op& op) {
    IMPORT_CHECK(op.regions.size() == 2, op, "while needs cond and body regions");
    Vals carried = operands(op);
    for (int64_t it = 0;; ++it) {
      Vals c = region(op.regions[0], carried);
      IMPORT_CHECK(c.size() == 1, op, "while condition returns ", c.size(), " values");
      auto known = const_int(g_, c[0]);
      if (!known)
        TPU_UNIMPLEMENTED("[stablehlo import] unsupported op 'stablehlo.while' at line ", op.line,
                          ": its trip count is not known at import time (the IR has no while op; loops "
                          "whose condition folds to a constant, such as fori_loop over static bounds and "
                          "Pallas grids, are unrolled)");
      if (!*known) break;
      TPU_CHECK(it < opt_.max_loop_iterations, "[stablehlo import] while loop at line ", op.line, " runs over ",
                opt_.max_loop_iterations, " iterations; expected fewer to unroll");
      carried = region(op.regions[1], carried);
    }
    return carried;
  }

  // case(index) / if(pred): the branch when the index is known, else every branch computed and
  // the results selected (branches are pure).
  Vals branches(const Op& op, bool is_if) {
    Value idx = operands(op).at(0);
    int64_t n = static_cast<int64_t>(op.regions.size());
    if (auto c = const_int(g_, idx)) {
      int64_t k = is_if ? (*c ? 0 : 1) : (*c < 0 || *c >= n ? n - 1 : *c);
      return region(op.regions[k], {});
    }
    std::vector<Vals> rs;
    for (const Region& r : op.regions) rs.push_back(region(r, {}));
    Vals res = rs.back();
    for (int64_t k = n - 2; k >= 0; --k) {
      Value pred = is_if ? idx : g_.compare(Cmp::EQ, idx, splat(g_, g_.dtype(idx), {}, 0, k));
      for (size_t j = 0; j < res.size(); ++j) {
        Value p = g_.shape(res[j]).empty() ? pred : g_.broadcast(pred, g_.shape(res[j]), {});
        res[j] = g_.select(p, rs[k][j], res[j]);
      }
    }
    return res;
  }

  const Module& m_;
  ImportedGraph& out_;
  Graph& g_;
  const ImportOptions& opt_;
  std::vector<Scope> scopes_;
  int depth_ = 0;
};

}  // namespace
}  // namespace shlo

std::vector<Value> inline_graph(Graph& dst, const Graph& src, const std::vector<Value>& params) {
  const auto& nodes = src.nodes();
  std::vector<char> live(nodes.size(), 0);
  for (Value v : src.outputs()) live[v.id] = 1;
  for (size_t i = nodes.size(); i-- > 0;)
    if (live[i])
      for (int o : nodes[i].operands) live[o] = 1;
  std::vector<Value> map(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.is_param) {
      TPU_CHECK(n.param_index < static_cast<int>(params.size()), "[inline_graph] got ", params.size(),
                " parameters; the graph has more");
      map[i] = params[n.param_index];
      continue;
    }
    if (!live[i]) continue;
    std::vector<Value> ops;
    for (int o : n.operands) ops.push_back(map[o]);
    map[i] = dst.op(n.op, ops, n.attrs, n.shape, n.dtype);
  }
  std::vector<Value> outs;
  for (Value v : src.outputs()) outs.push_back(map[v.id]);
  return outs;
}

ImportedGraph import_stablehlo(const std::string& text, const ImportOptions& options) {
  shlo::Module m = shlo::parse_stablehlo(text);
  ImportedGraph raw;
  shlo::Importer(m, raw, options).run();
  ImportedGraph out;  // without the dead nodes the import left (loop counters, replaced splices)
  out.num_args = raw.num_args;
  out.constants = std::move(raw.constants);
  std::vector<Value> params;
  for (const Node& n : raw.graph.nodes())
    if (n.is_param) params.push_back(out.graph.param(n.dtype, n.shape));
  out.graph.set_outputs(inline_graph(out.graph, raw.graph, params));
  out.graph.verify();
  return out;
}

}  // namespace torch_tpu::ir
