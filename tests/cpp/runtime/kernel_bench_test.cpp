// Micro-benchmark of the host runtime's hot kernels (disabled by default; run with
//   OMP_NUM_THREADS=1 tpu_cpp_tests --gtest_also_run_disabled_tests --gtest_filter='KernelBench*'
// Prints the minimum time per element (ns) of each kernel over interleaved repetitions;
// numbers are recorded in docs/decisions/host-vector-math.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "runtime/host/host_runtime.h"
#include "runtime_test_util.h"

namespace torch_tpu::host::testing {
namespace {

using runtime::View;

// Minimum wall time (ms) of `reps` runs of `g` (unfused: one kernel per node).
double min_ms(const Graph& g, int reps) { return min_run_ms(g, {false}, reps); }

void report(const std::string& name, const Graph& g, int64_t elems, int reps = 15) {
  double ms = min_ms(g, reps);
  std::printf("[kbench] %-40s %9.3f ms  %7.3f ns/elem\n", name.c_str(), ms, ms * 1e6 / static_cast<double>(elems));
}

TEST(KernelBench, DISABLED_UnaryMath) {
  const int64_t n = 1 << 20;
  struct Row {
    const char* name;
    OpCode op;
  };
  const Row rows[] = {{"exp", OpCode::Exp},         {"expm1", OpCode::Expm1}, {"log", OpCode::Log},
                      {"log1p", OpCode::Log1p},     {"tanh", OpCode::Tanh},   {"logistic", OpCode::Logistic},
                      {"erf", OpCode::Erf},         {"sin", OpCode::Sin},     {"cos", OpCode::Cos},
                      {"sqrt", OpCode::Sqrt},       {"rsqrt", OpCode::Rsqrt}, {"negate (copy-like)", OpCode::Negate}};
  for (DType d : {DType::F32, DType::BF16}) {
    for (const Row& r : rows) {
      Graph g;
      Value x = g.param(d, {n});
      if (r.op == OpCode::Log || r.op == OpCode::Sqrt || r.op == OpCode::Rsqrt)
        x = g.unary(OpCode::Abs, x);  // keep the domain valid (abs is cheap next to the op)
      g.set_outputs({g.unary(r.op, x)});
      report(std::string(r.name) + " [1M] " + ir::dtype_name(d), g, n);
    }
  }
}

TEST(KernelBench, DISABLED_Binary) {
  const int64_t n = 1 << 20;
  for (DType d : {DType::F32, DType::BF16})
    for (OpCode op : {OpCode::Add, OpCode::Mul, OpCode::Sub, OpCode::Div}) {
      Graph g;
      Value x = g.param(d, {n}), y = g.param(d, {n});
      g.set_outputs({g.binary(op, x, y)});
      report(std::string(ir::op_info(op).hlo) + " [1M] " + ir::dtype_name(d), g, n);
    }
}

TEST(KernelBench, DISABLED_Transpose) {
  struct Row {
    const char* name;
    Shape shape;
    std::vector<int64_t> perm;
  };
  const Row rows[] = {
      {"2-D [1024,1024] (1,0)", {1024, 1024}, {1, 0}},
      {"2-D [512,384] (1,0)", {512, 384}, {1, 0}},
      {"batched [64,128,128] (0,2,1)", {64, 128, 128}, {0, 2, 1}},
      {"heads [8,128,4,32] (0,2,1,3)", {8, 128, 4, 32}, {0, 2, 1, 3}},
      {"heads^T [8,128,4,32] (0,2,3,1)", {8, 128, 4, 32}, {0, 2, 3, 1}},
      {"merge [8,4,128,32] (0,2,1,3)", {8, 4, 128, 32}, {0, 2, 1, 3}},
  };
  for (DType d : {DType::F32, DType::BF16})
    for (const Row& r : rows) {
      Graph g;
      Value x = g.param(d, r.shape);
      g.set_outputs({g.transpose(x, r.perm)});
      report(std::string("transpose ") + r.name + " " + ir::dtype_name(d), g, ir::numel(r.shape));
    }
}

TEST(KernelBench, DISABLED_DotPacking) {
  // Shapes where packing (f32 -> bf16 parts) is a visible share next to the GEMM.
  struct Row {
    int64_t m, k, n;
  };
  for (Row r : {Row{1024, 128, 128}, Row{4096, 512, 16}, Row{1024, 512, 512}})
    for (ir::Precision p : {ir::Precision::Default, ir::Precision::High, ir::Precision::Highest}) {
      Graph g;
      Value a = g.param(DType::F32, {r.m, r.k}), b = g.param(DType::F32, {r.k, r.n});
      ir::Attrs at;
      at.lhs_contract = {1};
      at.rhs_contract = {0};
      at.precision = p;
      g.set_outputs({g.dot(a, b, at)});
      const char* pn = p == ir::Precision::Default ? "DEFAULT" : p == ir::Precision::High ? "HIGH" : "HIGHEST";
      report("dot f32 " + std::to_string(r.m) + "x" + std::to_string(r.k) + "x" + std::to_string(r.n) + " " + pn,
             g, r.m * r.k + r.k * r.n);
    }
}

}  // namespace
}  // namespace torch_tpu::host::testing
