// The lowering toolkit: a Lower turns one ATen call into one IR graph, binds tensors and
// scalars as parameters, and launches it on the device stream (via the compile cache).
// Ops register through one table per family (OpTable) with generic boxed kernels that
// derive the in-place (`op_`) and `out=` variants from the functional lowering.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <functional>
#include <optional>
#include <vector>

#include "base/error.h"
#include "ir/graph.h"

namespace torch_tpu::lowering {

using ir::DType;
using ir::Value;

DType to_ir(at::ScalarType t, const char* op);
at::ScalarType to_aten(DType t);
// Matmul precision for new graphs (process-wide; see docs/decisions/precision-scope.md).
ir::Precision matmul_precision();
void set_matmul_precision(ir::Precision p);

using Args = c10::ArrayRef<c10::IValue>;

class Lower {
 public:
  explicit Lower(const char* op) : op_(op) {}
  const char* op() const { return op_; }
  ir::Graph g;

  // A tensor argument as a parameter. A CPU 0-dim tensor becomes a scalar parameter; any
  // other non-tpu tensor is an error. `as` converts to that dtype (no-op when equal).
  Value in(const at::Tensor& t);
  Value in(const at::Tensor& t, DType as) { return g.convert(in(t), as); }
  // As in(t), but a view with gaps (q / k / v sliced from one projection) is bound as whole
  // rows of its storage and derived in the graph too (exec::FlatRun::kWholeRows), where a fused
  // loop reads it in place: the graph then depends on the view's offset, so the op is not
  // replayed by the fast path. Host runtime only (pjrt reads views out of whole storages in
  // its program); a torch.compile capture binds views itself (capture.cpp).
  Value in_rows(const at::Tensor& t);
  // A CPU tensor read by the command as it runs (transfers only; the caller keeps it
  // unchanged until then — pass a private copy).
  Value in_host(const at::Tensor& cpu);
  // A Philox state parameter (ui64[2] = {seed, offset}) for rng ops, reserving `n` counters
  // from `gen` (or the device's default generator).
  Value rng_state(const std::optional<at::Generator>& gen, uint64_t n);
  // A scalar argument as a 0-d parameter of dtype `dt` (value passed at run time, so
  // graphs are reused across values).
  Value scalar(const at::Scalar& s, DType dt);
  // One of the op's own arguments `v` (a Scalar, or a 0-dim CPU tensor; `v` must be the
  // element of the args, not a copy) as a run-time operand, declaring that the graph is the
  // same for every value of it: the fast path then serves all values with one entry instead
  // of one per value (optimizer and scheduler scalars change every step). Use it only when
  // the lowering neither branches on nor checks the value (else: scalar()). A tpu tensor `v`
  // is bound as in().
  Value scalar_arg(const c10::IValue& v, DType dt);
  // A literal 0-d constant (part of the graph).
  Value cst(double v, DType dt) { return g.constant(v, dt); }
  // Constant broadcast to the shape of `like`.
  Value cst_like(double v, Value like) { return g.constant(v, g.dtype(like), g.shape(like)); }
  Value bcast(Value x, const ir::Shape& s) { return g.broadcast_to(x, s); }

  // Runs the graph; returns new contiguous tpu tensors for `outs`.
  std::vector<at::Tensor> run(const std::vector<Value>& outs);
  at::Tensor run1(Value out) { return run({out})[0]; }
  // Runs the graph writing outs[i] into dsts[i] (same shape; dtype converted to dst's).
  void run_into(std::vector<Value> outs, const std::vector<at::Tensor>& dsts);
  // The device of the tensors seen so far (default: current device).
  int device() const { return device_; }
  // A device-side check: `flag` (0-d bool) is computed with the graph; when it is true after
  // the command ran, `message` is raised at the next sync point (at once in debug mode), as
  // any asynchronous op error. Costs one extra output; the host never waits for it.
  void check(Value flag, std::string message) { checks_.push_back({flag, std::move(message)}); }
  // check() raising IndexError (where PyTorch CPU raises IndexError: index, index_select, ...).
  void check_index(Value flag, const std::string& message) { check(flag, kIndexErrorTag + message); }
  // One more result of the same graph, written into the op's argument `arg` (a tpu tensor of
  // `v`'s shape; converted to its dtype) that the schema does not return: batch norm's running
  // statistics. The boxed kernel writes it after the op's results; the fast path replays it.
  void also_write(int arg, Value v) { also_.push_back({arg, v}); }
  const std::vector<std::pair<int, Value>>& also_writes() const { return also_; }

  // Fast-path recording (see fast_path.h): the op's arguments, and per parameter the
  // argument it came from (-1: a scalar whose value is in `bits`).
  void set_args(const Args* args) { args_ = args; }
  bool cacheable() const { return cacheable_ && checks_.empty(); }
  // The messages of the checks launched with the graph (its last outputs are their flags, in
  // this order): the fast path replays them with the graph.
  const std::vector<std::string>& check_messages() const { return check_msgs_; }
  struct BindInfo {
    int arg;
    uint64_t bits;
    DType dtype;
    int value_arg;  // >= 0: a scalar_arg operand, its value read from that argument
    int elem;       // >= 0: the tensor is element `elem` of the list argument `arg`
    bool flat;      // the param is the flat storage run the tensor's view spans (exec::flat_run)
  };
  std::vector<BindInfo> bind_info() const;

 private:
  Value bind(const at::Tensor& t, bool rows);  // in() / in_rows()
  struct Binding {
    at::Tensor tensor;   // defined for tensor params
    uint64_t bits = 0;   // scalar value, stored in the param's dtype
    DType dtype;         // the parameter's dtype
    int src = -1;        // argument index of a tensor param (fast path), -1 for scalars
    uint64_t rng_n = 0;  // rng state param: Philox counters reserved (a captured graph re-reserves)
    std::optional<at::Generator> gen;
    int value_arg = -1;  // argument index of a scalar_arg operand
    int elem = -1;       // >= 0: src is a list argument and the tensor its element `elem`
    bool flat = false;   // `tensor` is the flat run of the argument's storage (see BindInfo)
  };
  // `flags` (0-d bool outputs among dsts) and `messages`: range checks run after the graph.
  void launch(const std::vector<at::Tensor>& dsts, std::vector<at::Tensor> flags = {},
              std::vector<std::string> messages = {});
  // launch() plus the check flags (Lower::check) as extra outputs and a command testing them.
  void launch_checked(std::vector<at::Tensor> dsts);
  const char* op_;
  std::vector<Binding> binds_;
  std::vector<std::pair<Value, std::string>> checks_;
  std::vector<std::string> check_msgs_;
  std::vector<std::pair<int, Value>> also_;
  int device_ = -1;
  const Args* args_ = nullptr;
  bool cacheable_ = true;
};

// A family's lowering: reads the functional arguments from `args` (the schema's leading
// arguments) and returns the IR values of the outputs.
using LowerFn = std::vector<Value> (*)(Lower& L, Args args);

// Registers a boxed kernel at PrivateUse1 for each schema name. The same LowerFn serves
// "op", "op_" (writes into self) and "op.out" (writes into the out arguments).
struct OpEntry {
  const char* name;  // "add.Tensor", "add_.Tensor", "add.out", ...
  LowerFn fn;
};
void register_ops(torch::Library& m, std::initializer_list<OpEntry> ops);

// The bits of `s` in a 0-d parameter of dtype `dt` (the launch's scalar operand).
uint64_t scalar_bits(const at::Scalar& s, DType dt);

// Helpers shared by the families.
std::vector<int64_t> dims_arg(const c10::IValue& v, int64_t rank);  // int[]? dims, wrapped
int64_t wrap_dim(int64_t d, int64_t rank);
ir::Shape shape_of(const at::Tensor& t);
// PyTorch's "opmath": compute bf16/f16 in f32.
inline DType opmath(DType t) { return (t == DType::BF16 || t == DType::F16) ? DType::F32 : t; }

}  // namespace torch_tpu::lowering
