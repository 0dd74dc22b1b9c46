// StableHLO modules printed by JAX 0.12 (jax.jit(f).lower(...).as_text(), and the generic
// form for kGenericBatchedDot), the importer's test inputs. Regenerate with the functions named.
#pragma once

namespace torch_tpu::ir::samples {

// f(x[4,3]) = fori_loop(0, 4, lambda i, acc: acc + x[i] * 2, zeros(3))
inline constexpr const char* kForiLoop = R"mlir(module @jit_f1 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x3xf32>) -> (tensor<3xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1:4 = stablehlo.while(%iterArg = %arg0, %iterArg_1 = %c_0, %iterArg_2 = %c, %iterArg_3 = %0) : tensor<4x3xf32>, tensor<i32>, tensor<i32>, tensor<3xf32>
    cond {
      %c_4 = stablehlo.constant dense<4> : tensor<i32>
      %2 = stablehlo.compare LT, %iterArg_1, %c_4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %c_4 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.add %iterArg_2, %c_4 : tensor<i32>
      %3 = stablehlo.convert %iterArg_2 : tensor<i32>
      %c_5 = stablehlo.constant dense<0> : tensor<i32>
      %4 = stablehlo.compare LT, %3, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_6 = stablehlo.constant dense<4> : tensor<i32>
      %5 = stablehlo.add %3, %c_6 : tensor<i32>
      %6 = stablehlo.select %4, %5, %3 : tensor<i1>, tensor<i32>
      %c_7 = stablehlo.constant dense<0> : tensor<i32>
      %c_8 = stablehlo.constant dense<0> : tensor<i32>
      %7 = stablehlo.compare LT, %c_7, %c_8, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_9 = stablehlo.constant dense<0> : tensor<i32>
      %c_10 = stablehlo.constant dense<3> : tensor<i32>
      %8 = stablehlo.add %c_9, %c_10 : tensor<i32>
      %c_11 = stablehlo.constant dense<0> : tensor<i32>
      %9 = stablehlo.select %7, %8, %c_11 : tensor<i1>, tensor<i32>
      %10 = stablehlo.dynamic_slice %iterArg, %6, %9, sizes = [1, 3] : (tensor<4x3xf32>, tensor<i32>, tensor<i32>) -> tensor<1x3xf32>
      %11 = stablehlo.reshape %10 : (tensor<1x3xf32>) -> tensor<3xf32>
      %cst_12 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %12 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<3xf32>
      %13 = stablehlo.multiply %11, %12 : tensor<3xf32>
      %14 = stablehlo.add %iterArg_3, %13 : tensor<3xf32>
      %c_13 = stablehlo.constant dense<1> : tensor<i32>
      %15 = stablehlo.add %iterArg_1, %c_13 : tensor<i32>
      stablehlo.return %iterArg, %15, %2, %14 : tensor<4x3xf32>, tensor<i32>, tensor<i32>, tensor<3xf32>
    }
    return %1#3 : tensor<3xf32>
  }
})mlir";

// f(x[3,3], w[5]) = (concat([y[:, ::2], flip(y, 0)[:, 1:2]], 1).astype(bf16), argmax(w)), y = pad(x, ((1,0),(0,2))) + [1..5]
inline constexpr const char* kPadFlipArgmax = R"mlir(module @jit_f2 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x3xf32>, %arg1: tensor<5xf32>) -> (tensor<4x4xbf16> {jax.result_info = "result[0]"}, tensor<i32> {jax.result_info = "result[1]"}) {
    %cst = stablehlo.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00]> : tensor<5xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = call @_pad(%arg0, %c) : (tensor<3x3xf32>, tensor<i32>) -> tensor<4x5xf32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [1] : (tensor<5xf32>) -> tensor<1x5xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x5xf32>) -> tensor<4x5xf32>
    %3 = stablehlo.add %0, %2 : tensor<4x5xf32>
    %4 = stablehlo.slice %3 [0:4, 0:5:2] : (tensor<4x5xf32>) -> tensor<4x3xf32>
    %5 = call @_flip(%3) : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %6 = stablehlo.slice %5 [0:4, 1:2] : (tensor<4x5xf32>) -> tensor<4x1xf32>
    %7 = stablehlo.concatenate %4, %6, dim = 1 : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
    %8 = stablehlo.convert %7 : (tensor<4x4xf32>) -> tensor<4x4xbf16>
    %9 = call @argmax(%arg1) : (tensor<5xf32>) -> tensor<i32>
    return %8, %9 : tensor<4x4xbf16>, tensor<i32>
  }
  func.func private @_pad(%arg0: tensor<3x3xf32>, %arg1: tensor<i32>) -> tensor<4x5xf32> {
    %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %1 = stablehlo.pad %arg0, %0, low = [1, 0], high = [0, 2], interior = [0, 0] : (tensor<3x3xf32>, tensor<f32>) -> tensor<4x5xf32>
    return %1 : tensor<4x5xf32>
  }
  func.func private @_flip(%arg0: tensor<4x5xf32>) -> tensor<4x5xf32> {
    %0 = stablehlo.reverse %arg0, dims = [0] : tensor<4x5xf32>
    return %0 : tensor<4x5xf32>
  }
  func.func private @argmax(%arg0: tensor<5xf32>) -> tensor<i32> {
    %0 = stablehlo.iota dim = 0 : tensor<5xi32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [0] : (tensor<5xf32>, tensor<5xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i32>, %arg4: tensor<i32>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i32>
      stablehlo.return %9, %10 : tensor<f32>, tensor<i32>
    }
    return %1#1 : tensor<i32>
  }
})mlir";

// f(a[2,3,4], b[2,4,5]) = einsum("bij,bjk->bik", a, b).max(-1), generic form
inline constexpr const char* kGenericBatchedDot = R"mlir("builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{arg_attrs = [{}, {}], function_type = (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<2x3x4xf32>, %arg1: tensor<2x4x5xf32>):
    %0 = "stablehlo.dot_general"(%arg0, %arg1) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
    %1 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %2 = "stablehlo.reduce"(%0, %1) <{dimensions = array<i64: 2>}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %3 = "stablehlo.maximum"(%arg2, %arg3) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%3) : (tensor<f32>) -> ()
    }) : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x3xf32>
    "func.return"(%2) : (tensor<2x3xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ())mlir";

// a Pallas RMSNorm (interpret=True), grid (2,), blocks of 8 rows: x[16,32], w[32]
inline constexpr const char* kPallasRmsNorm = R"mlir(module @jit_rmsnorm attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x32xf32>, %arg1: tensor<32xf32>) -> (tensor<16x32xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1:5 = stablehlo.while(%iterArg = %c, %iterArg_1 = %c_0, %iterArg_2 = %arg0, %iterArg_3 = %arg1, %iterArg_4 = %0) : tensor<i32>, tensor<i32>, tensor<16x32xf32>, tensor<32xf32>, tensor<16x32xf32>
    cond {
      %c_5 = stablehlo.constant dense<2> : tensor<i32>
      %2 = stablehlo.compare LT, %iterArg, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %c_5 = stablehlo.constant dense<8> : tensor<i32>
      %2 = stablehlo.multiply %c_5, %iterArg_1 : tensor<i32>
      %c_6 = stablehlo.constant dense<8> : tensor<i32>
      %3 = stablehlo.multiply %c_6, %iterArg_1 : tensor<i32>
      %c_7 = stablehlo.constant dense<0> : tensor<i32>
      %4 = stablehlo.compare LT, %2, %c_7, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_8 = stablehlo.constant dense<16> : tensor<i32>
      %5 = stablehlo.add %2, %c_8 : tensor<i32>
      %6 = stablehlo.select %4, %5, %2 : tensor<i1>, tensor<i32>
      %c_9 = stablehlo.constant dense<0> : tensor<i32>
      %c_10 = stablehlo.constant dense<0> : tensor<i32>
      %7 = stablehlo.compare LT, %c_9, %c_10, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_11 = stablehlo.constant dense<0> : tensor<i32>
      %c_12 = stablehlo.constant dense<32> : tensor<i32>
      %8 = stablehlo.add %c_11, %c_12 : tensor<i32>
      %c_13 = stablehlo.constant dense<0> : tensor<i32>
      %9 = stablehlo.select %7, %8, %c_13 : tensor<i1>, tensor<i32>
      %10 = stablehlo.dynamic_slice %iterArg_2, %6, %9, sizes = [8, 32] : (tensor<16x32xf32>, tensor<i32>, tensor<i32>) -> tensor<8x32xf32>
      %c_14 = stablehlo.constant dense<0> : tensor<i32>
      %c_15 = stablehlo.constant dense<0> : tensor<i32>
      %11 = stablehlo.compare LT, %c_14, %c_15, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_16 = stablehlo.constant dense<0> : tensor<i32>
      %c_17 = stablehlo.constant dense<32> : tensor<i32>
      %12 = stablehlo.add %c_16, %c_17 : tensor<i32>
      %c_18 = stablehlo.constant dense<0> : tensor<i32>
      %13 = stablehlo.select %11, %12, %c_18 : tensor<i1>, tensor<i32>
      %14 = stablehlo.dynamic_slice %iterArg_3, %13, sizes = [32] : (tensor<32xf32>, tensor<i32>) -> tensor<32xf32>
      %c_19 = stablehlo.constant dense<0> : tensor<i32>
      %15 = stablehlo.compare LT, %3, %c_19, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_20 = stablehlo.constant dense<16> : tensor<i32>
      %16 = stablehlo.add %3, %c_20 : tensor<i32>
      %17 = stablehlo.select %15, %16, %3 : tensor<i1>, tensor<i32>
      %c_21 = stablehlo.constant dense<0> : tensor<i32>
      %c_22 = stablehlo.constant dense<0> : tensor<i32>
      %18 = stablehlo.compare LT, %c_21, %c_22, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_23 = stablehlo.constant dense<0> : tensor<i32>
      %c_24 = stablehlo.constant dense<32> : tensor<i32>
      %19 = stablehlo.add %c_23, %c_24 : tensor<i32>
      %c_25 = stablehlo.constant dense<0> : tensor<i32>
      %20 = stablehlo.select %18, %19, %c_25 : tensor<i1>, tensor<i32>
      %21 = stablehlo.dynamic_slice %iterArg_4, %17, %20, sizes = [8, 32] : (tensor<16x32xf32>, tensor<i32>, tensor<i32>) -> tensor<8x32xf32>
      %22 = stablehlo.multiply %10, %10 : tensor<8x32xf32>
      %cst_26 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %23 = stablehlo.reduce(%22 init: %cst_26) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
      %24 = stablehlo.broadcast_in_dim %23, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
      %cst_27 = stablehlo.constant dense<3.200000e+01> : tensor<f32>
      %25 = stablehlo.broadcast_in_dim %cst_27, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
      %26 = stablehlo.divide %24, %25 : tensor<8x1xf32>
      %cst_28 = stablehlo.constant dense<9.99999997E-7> : tensor<f32>
      %27 = stablehlo.broadcast_in_dim %cst_28, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
      %28 = stablehlo.add %26, %27 : tensor<8x1xf32>
      %29 = stablehlo.rsqrt %28 : tensor<8x1xf32>
      %30 = stablehlo.broadcast_in_dim %29, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x32xf32>
      %31 = stablehlo.multiply %10, %30 : tensor<8x32xf32>
      %32 = stablehlo.broadcast_in_dim %14, dims = [1] : (tensor<32xf32>) -> tensor<1x32xf32>
      %33 = stablehlo.broadcast_in_dim %32, dims = [0, 1] : (tensor<1x32xf32>) -> tensor<8x32xf32>
      %34 = stablehlo.multiply %31, %33 : tensor<8x32xf32>
      %c_29 = stablehlo.constant dense<0> : tensor<i32>
      %35 = stablehlo.compare LT, %2, %c_29, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_30 = stablehlo.constant dense<16> : tensor<i32>
      %36 = stablehlo.add %2, %c_30 : tensor<i32>
      %37 = stablehlo.select %35, %36, %2 : tensor<i1>, tensor<i32>
      %c_31 = stablehlo.constant dense<0> : tensor<i32>
      %c_32 = stablehlo.constant dense<0> : tensor<i32>
      %38 = stablehlo.compare LT, %c_31, %c_32, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_33 = stablehlo.constant dense<0> : tensor<i32>
      %c_34 = stablehlo.constant dense<32> : tensor<i32>
      %39 = stablehlo.add %c_33, %c_34 : tensor<i32>
      %c_35 = stablehlo.constant dense<0> : tensor<i32>
      %40 = stablehlo.select %38, %39, %c_35 : tensor<i1>, tensor<i32>
      %41 = stablehlo.dynamic_update_slice %iterArg_2, %10, %37, %40 : (tensor<16x32xf32>, tensor<8x32xf32>, tensor<i32>, tensor<i32>) -> tensor<16x32xf32>
      %c_36 = stablehlo.constant dense<0> : tensor<i32>
      %c_37 = stablehlo.constant dense<0> : tensor<i32>
      %42 = stablehlo.compare LT, %c_36, %c_37, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_38 = stablehlo.constant dense<0> : tensor<i32>
      %c_39 = stablehlo.constant dense<32> : tensor<i32>
      %43 = stablehlo.add %c_38, %c_39 : tensor<i32>
      %c_40 = stablehlo.constant dense<0> : tensor<i32>
      %44 = stablehlo.select %42, %43, %c_40 : tensor<i1>, tensor<i32>
      %45 = stablehlo.dynamic_update_slice %iterArg_3, %14, %44 : (tensor<32xf32>, tensor<32xf32>, tensor<i32>) -> tensor<32xf32>
      %c_41 = stablehlo.constant dense<0> : tensor<i32>
      %46 = stablehlo.compare LT, %3, %c_41, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_42 = stablehlo.constant dense<16> : tensor<i32>
      %47 = stablehlo.add %3, %c_42 : tensor<i32>
      %48 = stablehlo.select %46, %47, %3 : tensor<i1>, tensor<i32>
      %c_43 = stablehlo.constant dense<0> : tensor<i32>
      %c_44 = stablehlo.constant dense<0> : tensor<i32>
      %49 = stablehlo.compare LT, %c_43, %c_44, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_45 = stablehlo.constant dense<0> : tensor<i32>
      %c_46 = stablehlo.constant dense<32> : tensor<i32>
      %50 = stablehlo.add %c_45, %c_46 : tensor<i32>
      %c_47 = stablehlo.constant dense<0> : tensor<i32>
      %51 = stablehlo.select %49, %50, %c_47 : tensor<i1>, tensor<i32>
      %52 = stablehlo.dynamic_update_slice %iterArg_4, %34, %48, %51 : (tensor<16x32xf32>, tensor<8x32xf32>, tensor<i32>, tensor<i32>) -> tensor<16x32xf32>
      %c_48 = stablehlo.constant dense<1> : tensor<i32>
      %53 = stablehlo.add %iterArg, %c_48 : tensor<i32>
      %c_49 = stablehlo.constant dense<1> : tensor<i32>
      %54 = stablehlo.add %iterArg_1, %c_49 : tensor<i32>
      %c_50 = stablehlo.constant dense<true> : tensor<i1>
      %55 = func.call @_where(%c_50, %54, %iterArg_1) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
      %c_51 = stablehlo.constant dense<2> : tensor<i32>
      %56 = stablehlo.compare EQ, %55, %c_51, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %c_52 = stablehlo.constant dense<0> : tensor<i32>
      %57 = func.call @_where_0(%56, %c_52, %55) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
      stablehlo.return %53, %57, %41, %45, %52 : tensor<i32>, tensor<i32>, tensor<16x32xf32>, tensor<32xf32>, tensor<16x32xf32>
    }
    return %1#4 : tensor<16x32xf32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
  func.func private @_where_0(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.convert %arg1 : tensor<i32>
    %1 = stablehlo.select %arg0, %0, %arg2 : tensor<i1>, tensor<i32>
    return %1 : tensor<i32>
  }
})mlir";

}  // namespace torch_tpu::ir::samples
