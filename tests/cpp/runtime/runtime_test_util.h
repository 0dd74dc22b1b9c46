// Helpers for the host runtime tests: a typed host tensor (bytes + dtype + shape) with
// element access as double / int64, and a one-call "compile and run" on the host runtime.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "runtime/host/numeric.h"
#include "runtime/host/host_runtime.h"
#include "runtime/runtime.h"

namespace torch_tpu::host::testing {

using ir::DType;
using ir::Graph;
using ir::OpCode;
using ir::Shape;
using ir::Value;

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::Bool, DType::U8,  DType::I8,   DType::I16,
                                       DType::I32,  DType::I64, DType::F16,  DType::BF16,
                                       DType::F32,  DType::F64, DType::U64};
  return v;
}

struct Tensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;

  Tensor() = default;
  Tensor(DType d, Shape s) : dtype(d), shape(std::move(s)) {
    bytes.assign(ir::numel(shape) * ir::dtype_size(d) + 8, 0);
  }
  int64_t numel() const { return ir::numel(shape); }
  void* data() { return bytes.data(); }

  // Stores v converted with the runtime's conversion rules (RNE for f16/bf16, wrap for ints).
  void set(int64_t i, double v) {
    uint8_t* p = bytes.data() + i * ir::dtype_size(dtype);
    switch (dtype) {
      case DType::Bool: p[0] = v != 0; break;
      case DType::U8: { uint8_t x = static_cast<uint8_t>(static_cast<int64_t>(v)); std::memcpy(p, &x, 1); break; }
      case DType::I8: { int8_t x = static_cast<int8_t>(static_cast<int64_t>(v)); std::memcpy(p, &x, 1); break; }
      case DType::I16: { int16_t x = static_cast<int16_t>(static_cast<int64_t>(v)); std::memcpy(p, &x, 2); break; }
      case DType::I32: { int32_t x = static_cast<int32_t>(static_cast<int64_t>(v)); std::memcpy(p, &x, 4); break; }
      case DType::I64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
      case DType::U64: { uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(v)); std::memcpy(p, &x, 8); break; }
      case DType::F16: { uint16_t x = f32_to_f16(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
      case DType::BF16: { uint16_t x = f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
      case DType::F32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
      case DType::F64: std::memcpy(p, &v, 8); break;
    }
  }
  // Exact integer store (wraps to the dtype).
  void seti(int64_t i, int64_t v) {
    if (ir::is_float(dtype)) return set(i, static_cast<double>(v));
    uint8_t* p = bytes.data() + i * ir::dtype_size(dtype);
    if (dtype == DType::Bool) v = v != 0;
    std::memcpy(p, &v, ir::dtype_size(dtype));  // little endian: low bytes
  }
  double get(int64_t i) const {
    const uint8_t* p = bytes.data() + i * ir::dtype_size(dtype);
    if (dtype == DType::F16 || dtype == DType::BF16) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    if (dtype == DType::F32) { float f; std::memcpy(&f, p, 4); return f; }
    if (dtype == DType::F64) { double f; std::memcpy(&f, p, 8); return f; }
    if (dtype == DType::U64) { uint64_t u; std::memcpy(&u, p, 8); return static_cast<double>(u); }
    return static_cast<double>(geti(i));
  }
  int64_t geti(int64_t i) const {
    if (ir::is_float(dtype)) return static_cast<int64_t>(get(i));
    const uint8_t* p = bytes.data() + i * ir::dtype_size(dtype);
    switch (dtype) {
      case DType::Bool: case DType::U8: return p[0];
      case DType::I8: return static_cast<int8_t>(p[0]);
      case DType::I16: { int16_t x; std::memcpy(&x, p, 2); return x; }
      case DType::I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
      default: { int64_t x; std::memcpy(&x, p, 8); return x; }
    }
  }
  runtime::View view() { return runtime::View{host::as_buffer(bytes.data()), dtype, shape, {}}; }
};

inline Tensor make(DType d, Shape s, const std::function<double(int64_t)>& f) {
  Tensor t(d, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, f(i));
  return t;
}

// Compiles g on the host runtime and runs it on `inputs`; returns fresh outputs.
inline std::vector<Tensor> run(const Graph& g, std::vector<Tensor> inputs) {
  auto exe = runtime::host_runtime().compile(g);
  std::vector<runtime::View> in, out;
  for (Tensor& t : inputs) in.push_back(t.view());
  std::vector<Tensor> outs;
  for (Value v : g.outputs()) outs.emplace_back(g.dtype(v), g.shape(v));
  for (Tensor& t : outs) out.push_back(t.view());
  exe->run(in, out);
  return outs;
}

// Rounds a double the way the runtime stores a value of dtype d (float types only).
inline double round_to(DType d, double v) {
  Tensor t(d, {1});
  t.set(0, v);
  return t.get(0);
}

// Relative tolerance of one result ulp (plus the input rounding effects for 16-bit types).
inline double ulp_tol(DType d) {
  switch (d) {
    case DType::BF16: return 1.0 / 128;
    case DType::F16: return 1.0 / 1024;
    case DType::F32: return 4e-6;
    default: return 1e-13;
  }
}

inline bool close(double got, double want, double rel, double abs_tol = 0) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= rel * std::fabs(want) + abs_tol;
}

// Minimum wall time (ms) of `reps` runs of `g` planned with `opt`, after one warm-up run; the
// parameters hold a fixed pattern in [-2, 2) (benchmarks).
inline double min_run_ms(const Graph& g, PlanOptions opt, int reps) {
  std::vector<Tensor> in, out;
  for (const ir::Node& n : g.nodes())
    if (n.is_param) in.push_back(make(n.dtype, n.shape, [](int64_t i) { return ((i * 7919) % 1000) / 250.0 - 2; }));
  for (Value v : g.outputs()) out.emplace_back(g.dtype(v), g.shape(v));
  auto exe = compile_host(g, opt);
  std::vector<runtime::View> iv, ov;
  for (Tensor& t : in) iv.push_back(t.view());
  for (Tensor& t : out) ov.push_back(t.view());
  exe->run(iv, ov);
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    exe->run(iv, ov);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace torch_tpu::host::testing
