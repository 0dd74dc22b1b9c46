// Every IR op prints as StableHLO the plugin compiles: one small single-op graph per row of
// ir/ops.def (per dtype class, per reducer/direction/target where those change the text),
// printed with Graph::to_stablehlo() and compiled. The ops that fail today are listed in
// kKnownFailures with the reason; the test fails when a new op breaks or a listed one starts
// to compile (then delete its row). Compiling is not running: results are checked elsewhere.
#include <functional>
#include <map>
#include <set>

#include "ir/custom_call.h"
#include "ir/graph.h"
#include "pjrt_test_util.h"

namespace torch_tpu::pjrt {
namespace {

using ir::Attrs;
using ir::DType;
using ir::Graph;
using ir::OpCode;
using ir::Value;

// Key: an op name (every variant of it fails) or "Op[variant]" (only that variant fails).
const std::map<std::string, std::string> kKnownFailures = {
    {"Erfcx", "tpu.* op: no StableHLO/CHLO op; needs a decomposition pass before printing"},
    {"BesselI0", "tpu.* op (as Erfcx)"},
    {"BesselI1", "tpu.* op (as Erfcx)"},
    {"BesselJ0", "tpu.* op (as Erfcx)"},
    {"BesselJ1", "tpu.* op (as Erfcx)"},
    {"BesselY0", "tpu.* op (as Erfcx)"},
    {"BesselY1", "tpu.* op (as Erfcx)"},
    {"BesselK0", "tpu.* op (as Erfcx)"},
    {"BesselK1", "tpu.* op (as Erfcx)"},
    {"AiryAi", "tpu.* op (as Erfcx)"},
    {"Hypot", "tpu.* op (as Erfcx)"},
    {"ChebyshevT", "tpu.* op (as Erfcx)"},
    {"ChebyshevU", "tpu.* op (as Erfcx)"},
    {"ChebyshevV", "tpu.* op (as Erfcx)"},
    {"ChebyshevW", "tpu.* op (as Erfcx)"},
    {"ShiftedChebyshevT", "tpu.* op (as Erfcx)"},
    {"ShiftedChebyshevU", "tpu.* op (as Erfcx)"},
    {"ShiftedChebyshevV", "tpu.* op (as Erfcx)"},
    {"ShiftedChebyshevW", "tpu.* op (as Erfcx)"},
    {"HermiteH", "tpu.* op (as Erfcx)"},
    {"HermiteHe", "tpu.* op (as Erfcx)"},
    {"LaguerreL", "tpu.* op (as Erfcx)"},
    {"LegendreP", "tpu.* op (as Erfcx)"},
    {"Gcd", "tpu.* op (as Erfcx)"},
    // Printed as is, a LAPACK target has no handler in a bare plugin (NOT_FOUND; jaxlib registers
    // them): the pjrt runtime rewrites them first (ir/passes/decompose_linalg.h), except
    // sytrf/sytrs. The XLA targets (XlaQr, XlaHouseholderProduct, XlaEigh) compile.
    {"CustomCall[Getrf]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[Geqrf]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[Orgqr]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[Ormqr]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[Potrf]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[Syevd]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[Gesdd]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[Sytrf]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[Sytrs]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[LuPivotsToPermutation]", "LAPACK target: no FFI handler in a bare plugin (decompose_linalg rewrites it)"},
    {"CustomCall[SdpaFwd]", "host attention kernel: no handler in a plugin (decompose_linalg expands it)"},
    {"CustomCall[SdpaBwd]", "host attention kernel: no handler in a plugin (decompose_linalg expands it)"},
};

struct Case {
  std::string op;       // ops.def name
  std::string variant;  // dtype / attrs
  std::function<void(Graph&)> build;  // adds params, the op, and sets the outputs
};

Attrs dims_attr(std::vector<int64_t> d) {
  Attrs a;
  a.dims = std::move(d);
  return a;
}

std::vector<DType> dtypes_of(uint8_t classes) {
  std::vector<DType> out;
  if (classes & ir::F) out.insert(out.end(), {DType::F32, DType::BF16, DType::F16, DType::F64});
  if (classes & ir::I) out.insert(out.end(), {DType::I32, DType::I64, DType::U8, DType::I8});
  if (classes & ir::B) out.push_back(DType::Bool);
  return out;
}

void add(std::vector<Case>& cs, OpCode op, std::string variant, std::function<void(Graph&)> f) {
  cs.push_back({ir::op_info(op).name, std::move(variant), std::move(f)});
}

void elementwise_cases(std::vector<Case>& cs) {
  for (int k = 0; k < static_cast<int>(OpCode::kNumOps); ++k) {
    OpCode op = static_cast<OpCode>(k);
    const ir::OpInfo& info = ir::op_info(op);
    if (info.kind != ir::OpKind::kUnary && info.kind != ir::OpKind::kBinary) continue;
    for (DType t : dtypes_of(info.dtypes)) {
      add(cs, op, ir::dtype_name(t), [op, t, unary = info.kind == ir::OpKind::kUnary](Graph& g) {
        Value x = g.param(t, {2, 3});
        g.set_outputs({unary ? g.unary(op, x) : g.binary(op, x, g.param(t, {2, 3}))});
      });
    }
  }
  for (DType t : {DType::F32, DType::BF16, DType::I32, DType::U8, DType::U64, DType::Bool})
    add(cs, OpCode::Compare, ir::dtype_name(t), [t](Graph& g) {
      std::vector<Value> outs;
      Value x = g.param(t, {4}), y = g.param(t, {4});
      for (ir::Cmp c : {ir::Cmp::EQ, ir::Cmp::NE, ir::Cmp::LT, ir::Cmp::LE, ir::Cmp::GT, ir::Cmp::GE})
        outs.push_back(g.compare(c, x, y));
      g.set_outputs(outs);
    });
  for (DType t : {DType::F32, DType::I64, DType::Bool})
    add(cs, OpCode::Select, ir::dtype_name(t), [t](Graph& g) {
      g.set_outputs({g.select(g.param(DType::Bool, {3}), g.param(t, {3}), g.param(t, {3}))});
    });
  for (DType t : {DType::F32, DType::I32})
    add(cs, OpCode::Clamp, ir::dtype_name(t), [t](Graph& g) {
      g.set_outputs({g.op(OpCode::Clamp, {g.param(t, {}), g.param(t, {5}), g.param(t, {})})});
    });
  std::vector<std::pair<DType, DType>> converts = {
      {DType::F32, DType::BF16}, {DType::F32, DType::I32}, {DType::I32, DType::F32},
      {DType::Bool, DType::F32}, {DType::F32, DType::Bool}, {DType::F64, DType::F16},
      {DType::U64, DType::F32}, {DType::I64, DType::U8}};
  for (auto [from, to] : converts)
    add(cs, OpCode::Convert, std::string(ir::dtype_name(from)) + "->" + ir::dtype_name(to),
        [from, to](Graph& g) { g.set_outputs({g.convert(g.param(from, {3}), to)}); });
}

void leaf_and_shape_cases(std::vector<Case>& cs) {
  for (DType t : {DType::F32, DType::BF16, DType::F64, DType::I64, DType::U8, DType::Bool})
    add(cs, OpCode::Constant, ir::dtype_name(t), [t](Graph& g) {
      g.set_outputs({g.constant(1, t, {2, 2}), g.constant(0, t, {})});
    });
  for (DType t : {DType::I64, DType::F32})
    add(cs, OpCode::Iota, ir::dtype_name(t), [t](Graph& g) { g.set_outputs({g.iota(t, {2, 4}, 1)}); });
  add(cs, OpCode::Broadcast, "f32", [](Graph& g) {
    g.set_outputs({g.broadcast(g.param(DType::F32, {3}), {2, 3}, {1})});
  });
  add(cs, OpCode::Reshape, "f32", [](Graph& g) { g.set_outputs({g.reshape(g.param(DType::F32, {2, 3}), {3, 2})}); });
  add(cs, OpCode::Transpose, "f32", [](Graph& g) {
    g.set_outputs({g.transpose(g.param(DType::F32, {2, 3, 4}), {2, 0, 1})});
  });
  add(cs, OpCode::Slice, "f32", [](Graph& g) {
    g.set_outputs({g.slice(g.param(DType::F32, {4, 6}), {1, 0}, {3, 5}, {1, 2})});
  });
  add(cs, OpCode::Concat, "f32", [](Graph& g) {
    g.set_outputs({g.concat({g.param(DType::F32, {2, 3}), g.param(DType::F32, {2, 1})}, 1)});
  });
  add(cs, OpCode::Reverse, "f32", [](Graph& g) {
    g.set_outputs({g.op(OpCode::Reverse, {g.param(DType::F32, {2, 3})}, dims_attr({0, 1}))});
  });
  add(cs, OpCode::OptimizationBarrier, "f32", [](Graph& g) {
    Value b = g.op(OpCode::OptimizationBarrier, {g.unary(OpCode::Exp, g.param(DType::F32, {2, 3}))});
    g.set_outputs({g.binary(OpCode::Mul, b, b)});
  });
}

void reduce_cases(std::vector<Case>& cs) {
  using ir::Reducer;
  std::vector<std::tuple<Reducer, DType, const char*>> rs = {
      {Reducer::Sum, DType::F32, "sum,f32"},   {Reducer::Prod, DType::F32, "prod,f32"},
      {Reducer::Max, DType::F32, "max,f32"},   {Reducer::Min, DType::F32, "min,f32"},
      {Reducer::Sum, DType::BF16, "sum,bf16"}, {Reducer::Max, DType::I32, "max,i32"},
      {Reducer::And, DType::Bool, "and,i1"},   {Reducer::Or, DType::Bool, "or,i1"}};
  for (auto [r, t, name] : rs)
    add(cs, OpCode::Reduce, name, [r = r, t = t](Graph& g) {
      g.set_outputs({g.reduce(g.param(t, {2, 3}), r, {1})});
    });
  for (OpCode op : {OpCode::ArgMax, OpCode::ArgMin})
    for (DType t : {DType::F32, DType::I32})
      add(cs, op, ir::dtype_name(t), [op, t](Graph& g) {
        g.set_outputs({g.op(op, {g.param(t, {2, 3})}, dims_attr({1}))});
      });
  for (ir::Precision p : {ir::Precision::Default, ir::Precision::High, ir::Precision::Highest})
    add(cs, OpCode::Dot, "f32,precision" + std::to_string(int(p)), [p](Graph& g) {
      Attrs a;
      a.lhs_contract = {1}, a.rhs_contract = {0}, a.precision = p;
      g.set_outputs({g.dot(g.param(DType::F32, {2, 3}), g.param(DType::F32, {3, 4}), a)});
    });
  add(cs, OpCode::Dot, "bf16,batched", [](Graph& g) {
    Attrs a;
    a.lhs_batch = {0}, a.rhs_batch = {0}, a.lhs_contract = {2}, a.rhs_contract = {1};
    g.set_outputs({g.dot(g.param(DType::BF16, {5, 2, 3}), g.param(DType::BF16, {5, 3, 4}), a)});
  });
  for (OpCode op : {OpCode::RngUniform, OpCode::RngNormal})
    for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64})
      add(cs, op, ir::dtype_name(t), [op, t](Graph& g) {
        g.set_outputs({g.op(op, {g.param(DType::U64, {2})}, {}, {3, 5}, t)});
      });
}

void axis_cases(std::vector<Case>& cs) {
  for (DType it : {DType::I64, DType::I32}) {
    std::string v = std::string("f32,") + ir::dtype_name(it);
    add(cs, OpCode::Gather, v, [it](Graph& g) {
      g.set_outputs({g.op(OpCode::Gather, {g.param(DType::F32, {3, 4}), g.param(it, {3, 2})}, dims_attr({1}))});
    });
    add(cs, OpCode::Scatter, v, [it](Graph& g) {
      g.set_outputs({g.op(OpCode::Scatter, {g.param(DType::F32, {3, 4}), g.param(it, {2, 4}),
                                            g.param(DType::F32, {2, 4})}, dims_attr({0}))});
    });
  }
  for (DType t : {DType::F32, DType::I32, DType::Bool})
    add(cs, OpCode::ScatterAdd, ir::dtype_name(t), [t](Graph& g) {
      g.set_outputs({g.op(OpCode::ScatterAdd, {g.param(t, {3, 4}), g.param(DType::I64, {3, 2}), g.param(t, {3, 2})},
                          dims_attr({1}))});
    });
  for (ir::Reducer r : {ir::Reducer::Prod, ir::Reducer::Max, ir::Reducer::Min})
    add(cs, OpCode::ScatterReduce, "f32,reducer" + std::to_string(int(r)), [r](Graph& g) {
      Attrs a = dims_attr({0});
      a.reducer = r;
      g.set_outputs({g.op(OpCode::ScatterReduce, {g.param(DType::F32, {3, 4}), g.param(DType::I64, {2, 4}),
                                                  g.param(DType::F32, {2, 4})}, a)});
    });
  for (OpCode op : {OpCode::Sort, OpCode::ArgSort})
    for (DType t : {DType::F32, DType::I32, DType::BF16})
      for (int desc : {0, 1})
        add(cs, op, std::string(ir::dtype_name(t)) + (desc ? ",desc" : ",asc"), [op, t, desc](Graph& g) {
          Attrs a = dims_attr({1});
          a.ivalue = desc;
          g.set_outputs({g.op(op, {g.param(t, {2, 5})}, a)});
        });
  for (OpCode op : {OpCode::Cumsum, OpCode::Cumprod})
    for (DType t : {DType::F32, DType::BF16, DType::I32})
      add(cs, op, ir::dtype_name(t), [op, t](Graph& g) {
        g.set_outputs({g.op(op, {g.param(t, {3, 4})}, dims_attr({1}))});
      });
}

void linalg_and_window_cases(std::vector<Case>& cs) {
  for (DType t : {DType::F32, DType::F64})
    add(cs, OpCode::TriangularSolve, ir::dtype_name(t), [t](Graph& g) {
      g.set_outputs({g.op(OpCode::TriangularSolve, {g.param(t, {3, 3}), g.param(t, {3, 2})}, dims_attr({1, 1, 0, 0}))});
    });
  using T = ir::CustomCallTarget;
  auto call = [](Graph& g, T t, std::vector<Value> ops, std::vector<int64_t> params) {
    int n = ir::custom_call_info(t).results;
    std::vector<Value> outs;
    for (int i = 0; i < n; ++i) outs.push_back(g.op(OpCode::CustomCall, ops, ir::custom_call_attrs(t, i, params)));
    g.set_outputs(outs);
  };
  for (int k = 0; k < static_cast<int>(T::kNumTargets); ++k) {
    T t = static_cast<T>(k);
    add(cs, OpCode::CustomCall, ir::custom_call_info(t).name, [t, call](Graph& g) {
      Value a = g.param(DType::F32, {5, 3}), sq = g.param(DType::F32, {3, 3});
      switch (t) {
        case T::Getrf: case T::Geqrf: call(g, t, {a}, {}); break;
        case T::Orgqr: call(g, t, {a, g.param(DType::F32, {3})}, {}); break;
        case T::Ormqr: call(g, t, {a, g.param(DType::F32, {3}), g.param(DType::F32, {5, 2})}, {1, 0}); break;
        case T::Potrf: case T::Sytrf: call(g, t, {sq}, {1}); break;
        case T::Syevd: case T::Gesdd: call(g, t, {t == T::Syevd ? sq : a}, {1, 1}); break;
        case T::Sytrs: call(g, t, {sq, g.param(DType::I32, {3}), g.param(DType::F32, {3, 2})}, {1}); break;
        case T::LuPivotsToPermutation: call(g, t, {g.param(DType::I32, {3})}, {5}); break;
        case T::XlaQr: call(g, t, {a}, {}); break;
        case T::XlaHouseholderProduct: call(g, t, {a, g.param(DType::F32, {3})}, {}); break;
        case T::XlaEigh: call(g, t, {sq}, {1}); break;
        case T::SdpaFwd:
        case T::SdpaBwd: {
          Value q = g.param(DType::F32, {2, 5, 4}), kv = g.param(DType::F32, {2, 3, 4});
          std::vector<Value> ops{q, kv, kv};
          if (t == T::SdpaBwd) ops.insert(ops.end(), {g.param(DType::F32, {2, 5, 4}), g.param(DType::F32, {2, 5})});
          call(g, t, ops, {1, 0x3F000000, 0, 0});
          break;
        }
        case T::kNumTargets: break;
      }
    });
  }
  add(cs, OpCode::Convolution, "f32,1d", [](Graph& g) {
    Attrs w;
    w.window_strides = w.lhs_dilation = w.rhs_dilation = {1};
    w.pad_lo = w.pad_hi = {0};
    g.set_outputs({g.conv(g.param(DType::F32, {1, 2, 3}), g.param(DType::F32, {3, 2, 1}), w)});
  });
  add(cs, OpCode::Convolution, "f32,2d,grouped,strided", [](Graph& g) {
    Attrs w;
    w.window_strides = {2, 1}, w.lhs_dilation = {1, 1}, w.rhs_dilation = {1, 2};
    w.pad_lo = {1, 1}, w.pad_hi = {1, 0}, w.groups = 2;
    w.precision = ir::Precision::Highest;
    g.set_outputs({g.conv(g.param(DType::F32, {2, 4, 6, 6}), g.param(DType::F32, {6, 2, 3, 3}), w)});
  });
  add(cs, OpCode::Convolution, "bf16,2d", [](Graph& g) {
    Attrs w;
    w.window_strides = w.lhs_dilation = w.rhs_dilation = {1, 1};
    w.pad_lo = w.pad_hi = {1, 1};
    g.set_outputs({g.conv(g.param(DType::BF16, {1, 2, 5, 5}), g.param(DType::BF16, {4, 2, 3, 3}), w)});
  });
  for (ir::Reducer r : {ir::Reducer::Sum, ir::Reducer::Max, ir::Reducer::Min})
    add(cs, OpCode::ReduceWindow, "f32,reducer" + std::to_string(int(r)), [r](Graph& g) {
      Attrs w;
      w.window = {1, 1, 2, 2}, w.window_strides = {1, 1, 2, 2};
      w.pad_lo = {0, 0, 1, 0}, w.pad_hi = {0, 0, 0, 1};
      w.lhs_dilation = {1, 1, 1, 1}, w.rhs_dilation = {1, 1, 1, 1};
      w.reducer = r;
      g.set_outputs({g.reduce_window(g.param(DType::F32, {1, 2, 5, 5}), w)});
    });
}

// The plugin's diagnostic without our prefix and XLA's generic parse-failure tail.
std::string short_message(const std::string& s, size_t max_chars = 220) {
  std::string out = s;
  if (size_t p = out.find("expected OK: "); p != std::string::npos) out = out.substr(p + 13);
  for (const char* cut : {"<unknown>:0: error: Failed to parse", "\n-:", " -:"})
    if (size_t p = out.find(cut, 1); p != std::string::npos) out = out.substr(0, p);
  for (char& ch : out)
    if (ch == '\n') ch = ' ';
  return out.substr(0, max_chars);
}

TEST(PjrtOps, EveryOpCompiles) {
  TPU_PJRT_CLIENT_OR_SKIP(c);
  std::vector<Case> cases;
  elementwise_cases(cases);
  leaf_and_shape_cases(cases);
  reduce_cases(cases);
  axis_cases(cases);
  linalg_and_window_cases(cases);

  // Every row of ops.def has at least one case (a new OTHER row needs one here).
  std::set<std::string> covered;
  for (const Case& k : cases) covered.insert(k.op);
  for (int k = 0; k < static_cast<int>(OpCode::kNumOps); ++k)
    EXPECT_TRUE(covered.count(ir::op_info(static_cast<OpCode>(k)).name))
        << ir::op_info(static_cast<OpCode>(k)).name << " has no case in ops_compile_test.cpp";

  std::map<std::string, std::pair<int, int>> per_op;  // op -> (variants, failures)
  std::map<std::string, std::string> failures;        // "Op[variant]" -> message
  for (const Case& k : cases) {
    std::string key = k.op + "[" + k.variant + "]";
    per_op[k.op].first++;
    std::string text;
    try {
      Graph g;
      k.build(g);
      text = g.to_stablehlo();
      c->compile(text);
    } catch (const torch_tpu::Error& e) {
      per_op[k.op].second++;
      failures[key] = e.what();
      if (text.empty()) failures[key] = std::string("(building/printing) ") + e.what();
    }
  }
  // Failing keys: the op name when every variant fails, else the failing variants.
  std::set<std::string> failing;
  for (const auto& [key, msg] : failures) {
    std::string op = key.substr(0, key.find('['));
    failing.insert(per_op[op].first == per_op[op].second ? op : key);
  }
  std::set<std::string> known;
  for (const auto& [key, reason] : kKnownFailures) known.insert(key);
  // One line per failing key: the variants that fail and the first plugin message.
  for (const std::string& f : failing) {
    auto it = failures.count(f) ? failures.find(f) : failures.lower_bound(f + "[");
    std::printf("  [fails] %s (%d/%d variants): %s\n", f.c_str(), per_op[it->first.substr(0, it->first.find('['))].second,
                per_op[it->first.substr(0, it->first.find('['))].first, short_message(it->second).c_str());
  }
  std::printf("  [summary] %zu cases over %zu ops; %zu cases fail; %zu failing keys (%zu known)\n",
              cases.size(), per_op.size(), failures.size(), failing.size(), known.size());
  for (const std::string& f : failing)
    EXPECT_TRUE(known.count(f)) << "new failure: " << f << ": "
                                << (failures.count(f) ? failures[f] : failures.lower_bound(f + "[")->second);
  for (const std::string& k : known)
    EXPECT_TRUE(failing.count(k)) << "listed as failing but compiles now (remove it from kKnownFailures): " << k;
}

}  // namespace
}  // namespace torch_tpu::pjrt
