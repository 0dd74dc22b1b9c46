"""The c10d backend "tpu_dist": every collective stages its tpu tensors on the host (see
staging.py), runs on an inner gloo ProcessGroup (PyTorch's own transport: no networking of
ours), and writes the results back into the tpu tensors in stream order (see work.py).

Gloo lacks ReduceOp.AVG and PREMUL_SUM: they run as SUM with a division after / a scaling
before, on the host copies; it lacks bf16/f16/int16 too: their reductions run in float32 /
int32 on the host, other collectives move their bytes as uint8. Before each collective the ranks check they agree
on it (checks.py). CPU tensors (a group made with init_process_group("tpu_dist")
serves both devices) go to gloo untouched."""
import datetime

import torch
from torch._C import _distributed_c10d as _c10d

from torch_tpu.distributed import checks
from torch_tpu.distributed.checks import describe_tensors as _desc
from torch_tpu.distributed.staging import Staging, reduce_dtype, wire
from torch_tpu.distributed.work import CollectiveError, StagedWork, describe

NAME = "tpu_dist"
_RED = _c10d.ReduceOp.RedOpType
_GLOO_OPS = {_RED.SUM, _RED.PRODUCT, _RED.MIN, _RED.MAX, _RED.BAND, _RED.BOR, _RED.BXOR}


def _red_type(op):
    return op.op if isinstance(op, _c10d.ReduceOp) else op


def _host_math(op) -> bool:
    """Whether the collective computes on its host tensors (gloo lacks AVG and PREMUL_SUM)."""
    return _red_type(op) in (_RED.AVG, _RED.PREMUL_SUM)


def _premul_factor(op) -> float:
    f = op.factor
    if isinstance(f, torch.Tensor):
        f = f.item()
    return f


def _sum_opts(cls, opts):
    new = cls()
    new.reduceOp = _c10d.ReduceOp.SUM
    new.timeout = opts.timeout
    for attr in ("rootRank", "rootTensor"):
        if hasattr(opts, attr):
            setattr(new, attr, getattr(opts, attr))
    return new


class TpuDistBackend(_c10d.Backend):
    """A c10d Backend for device "tpu" (and "cpu"), created by init_process_group / new_group
    through the creator registered in torch_tpu.distributed. Thread safety: as gloo's (calls
    on one group are issued in the same order on every rank)."""

    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta):
        super().__init__(rank, size)
        self._gloo = _c10d.ProcessGroupGloo(_c10d.PrefixStore("gloo/", store), rank, size, timeout)

    def getBackendName(self) -> str:  # noqa: N802  (c10d's name)
        return NAME

    @property
    def gloo(self):
        """The inner gloo backend (bytes move through it)."""
        return self._gloo

    # --- plumbing ------------------------------------------------------------------------
    def _launch(self, name, staging, start, result, post=None, sync_first=False) -> StagedWork:
        what = describe(self, name)
        try:
            if sync_first:
                torch.tpu.synchronize()
            inner = start()
        except Exception as e:  # noqa: BLE001
            staging.drop()
            raise CollectiveError(f"{what} failed: {e}") from e
        return StagedWork(what, inner, staging, result, post)

    def _reduction(self, name, op, hosts):
        """(gloo ReduceOp, "avg" or None) for `op`; a PREMUL_SUM scales the host inputs
        `hosts` in place (staged copies, or a CPU tensor that is also the output)."""
        kind = _red_type(op)
        if kind in _GLOO_OPS:
            return op, None
        if kind == _RED.AVG:
            return _c10d.ReduceOp.SUM, "avg"
        if kind == _RED.PREMUL_SUM:
            factor = _premul_factor(op)
            for h in hosts:
                h.mul_(factor)
            return _c10d.ReduceOp.SUM, None
        raise CollectiveError(f"{describe(self, name)}: unsupported ReduceOp {kind}")

    def _averager(self, outs):
        n = self.size()
        for o in outs:
            if not (o.is_floating_point() or o.is_complex()):
                raise CollectiveError(f"[tpu_dist] ReduceOp.AVG needs a floating dtype; got {o.dtype}")

        def post():
            for o in outs:
                o.div_(n)
        return post

    # --- all_reduce ------------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        opts = opts or _c10d.AllreduceOptions()
        checks.agree(self, "all_reduce", _desc(tensors), [int(_red_type(opts.reduceOp))])
        st = Staging(alias=not _host_math(opts.reduceOp))
        hosts = [st.inout(t, reduce_dtype(t.dtype)) for t in tensors]
        op, post = self._reduction("all_reduce", opts.reduceOp, hosts)
        post = self._averager(hosts) if post == "avg" else None
        o = _sum_opts(_c10d.AllreduceOptions, opts) if op is not opts.reduceOp else opts
        return self._launch("all_reduce", st, lambda: self._gloo.allreduce(hosts, o), tensors, post)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts or _c10d.AllreduceCoalescedOptions()
        o = _c10d.AllreduceOptions()
        o.reduceOp, o.timeout = opts.reduceOp, opts.timeout
        flat = torch.cat([t.reshape(-1) for t in tensors]) if tensors else None
        w = self.allreduce([flat], o)
        w.wait()
        with torch.no_grad():
            off = 0
            for t in tensors:
                t.copy_(flat[off:off + t.numel()].view(t.shape))
                off += t.numel()
        return StagedWork(describe(self, "all_reduce_coalesced"), None, Staging(), tensors)

    # --- broadcast / reduce ----------------------------------------------------------------
    def broadcast(self, tensors, opts=None):
        opts = opts or _c10d.BroadcastOptions()
        checks.agree(self, "broadcast", _desc(tensors), [opts.rootRank])
        st = Staging()
        root = opts.rootRank == self.rank()
        hosts = [wire(st.read(t) if root else st.write(t)) for t in tensors]
        return self._launch("broadcast", st, lambda: self._gloo.broadcast(hosts, opts), tensors)

    def reduce(self, tensors, opts=None):
        opts = opts or _c10d.ReduceOptions()
        checks.agree(self, "reduce", _desc(tensors), [opts.rootRank, int(_red_type(opts.reduceOp))])
        st = Staging(alias=not _host_math(opts.reduceOp))
        root = opts.rootRank == self.rank()
        # gloo may scribble on a non-root's buffer: stage a copy and write back only on the root
        hosts = [st.inout(t, reduce_dtype(t.dtype)) if root else st.copy(t, reduce_dtype(t.dtype))
                 for t in tensors]
        op, post = self._reduction("reduce", opts.reduceOp, hosts)
        post = self._averager(hosts) if (post == "avg" and root) else None
        o = _sum_opts(_c10d.ReduceOptions, opts) if op is not opts.reduceOp else opts
        return self._launch("reduce", st, lambda: self._gloo.reduce(hosts, o), tensors, post)

    # --- all_gather -------------------------------------------------------------------------
    def allgather(self, output_tensors, input_tensors, opts=None):
        opts = opts or _c10d.AllgatherOptions()
        checks.agree(self, "all_gather", _desc(input_tensors) + " -> " +
                     "; ".join(_desc(g) for g in output_tensors))
        st = Staging()
        ins = [wire(st.read(t)) for t in input_tensors]
        outs = [[wire(st.write(t)) for t in group] for group in output_tensors]
        return self._launch("all_gather", st, lambda: self._gloo.allgather(outs, ins, opts), output_tensors)

    def all_gather_single(self, output, input, opts=None):
        opts = opts or _c10d.AllgatherOptions()
        checks.agree(self, "all_gather_into_tensor", _desc([input, output]))
        st = Staging()
        hin, hout = wire(st.read(input)), wire(st.write(output))
        return self._launch("all_gather_into_tensor", st,
                            lambda: self._gloo._allgather_base(hout, hin, opts), [output])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        opts = opts or _c10d.AllgatherOptions()
        for o, i in zip(outputs, inputs):
            self.all_gather_single(o, i, opts).wait()
        return StagedWork(describe(self, "all_gather_into_tensor_coalesced"), None, Staging(), outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        opts = opts or _c10d.AllgatherOptions()
        # output_lists[r][k]: input k of rank r
        for k, i in enumerate(input_list):
            self.allgather([[per_rank[k] for per_rank in output_lists]], [i], opts).wait()
        return StagedWork(describe(self, "all_gather_coalesced"), None, Staging(), output_lists)

    # --- reduce_scatter ---------------------------------------------------------------------
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        """Each rank's output i = reduction over ranks of input_tensors[i][rank] (gloo's own
        reduce_scatter)."""
        opts = opts or _c10d.ReduceScatterOptions()
        checks.agree(self, "reduce_scatter", _desc(output_tensors) + " <- " +
                     "; ".join(_desc(g) for g in input_tensors), [int(_red_type(opts.reduceOp))])
        st = Staging(alias=not _host_math(opts.reduceOp))
        outs = [st.write(t, reduce_dtype(t.dtype)) for t in output_tensors]
        ins = [[st.copy(t, reduce_dtype(t.dtype)) for t in group] for group in input_tensors]
        flat = [h for group in ins for h in group]
        op, post = self._reduction("reduce_scatter", opts.reduceOp, flat)
        post = self._averager(outs) if post == "avg" else None
        o = _sum_opts(_c10d.ReduceScatterOptions, opts) if op is not opts.reduceOp else opts
        return self._launch("reduce_scatter", st, lambda: self._gloo.reduce_scatter(outs, ins, o),
                            output_tensors, post)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts or _c10d.ReduceScatterOptions()
        checks.agree(self, "reduce_scatter_tensor", _desc([output, input]), [int(_red_type(opts.reduceOp))])
        st = Staging(alias=not _host_math(opts.reduceOp))
        hout = st.write(output, reduce_dtype(output.dtype))
        hosts = [st.copy(input, reduce_dtype(input.dtype))]
        op, post = self._reduction("reduce_scatter_tensor", opts.reduceOp, hosts)
        post = self._averager([hout]) if post == "avg" else None
        o = _sum_opts(_c10d.ReduceScatterOptions, opts) if op is not opts.reduceOp else opts
        return self._launch("reduce_scatter_tensor", st,
                            lambda: self._gloo._reduce_scatter_base(hout, hosts[0], o), [output], post)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        opts = opts or _c10d.ReduceScatterOptions()
        for o, i in zip(outputs, inputs):
            self.reduce_scatter_single(o, i, opts).wait()
        return StagedWork(describe(self, "reduce_scatter_tensor_coalesced"), None, Staging(), outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # --- all_to_all -------------------------------------------------------------------------
    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts or _c10d.AllToAllOptions()
        n = self.size()
        row_in = input.numel() // max(input.shape[0], 1) if input.dim() else 1
        row_out = output.numel() // max(output.shape[0], 1) if output.dim() else 1
        ins = [s * row_in for s in input_split_sizes] or [input.numel() // n] * n
        outs = [s * row_out for s in output_split_sizes] or [output.numel() // n] * n
        checks.agree_all_to_all(self, input.dtype, ins, outs)
        st = Staging()
        hin, hout = wire(st.read(input)), wire(st.write(output))
        return self._launch("all_to_all_single", st, lambda: self._gloo.alltoall_base(
            hout, hin, list(output_split_sizes), list(input_split_sizes), opts), [output])

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """List form, as one all_to_all_single over the flattened tensors (gloo has no list
        form)."""
        opts = opts or _c10d.AllToAllOptions()
        dev = input_tensors[0].device
        flat_in = torch.cat([t.reshape(-1) for t in input_tensors])
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=flat_in.dtype, device=dev)
        self.all_to_all_single(flat_out, flat_in, [t.numel() for t in output_tensors],
                               [t.numel() for t in input_tensors], opts).wait()
        with torch.no_grad():
            off = 0
            for t in output_tensors:
                t.copy_(flat_out[off:off + t.numel()].view(t.shape))
                off += t.numel()
        return StagedWork(describe(self, "all_to_all"), None, Staging(), output_tensors)

    # --- gather / scatter -------------------------------------------------------------------
    def gather(self, output_tensors, input_tensors, opts=None):
        opts = opts or _c10d.GatherOptions()
        checks.agree(self, "gather", _desc(input_tensors), [opts.rootRank])
        st = Staging()
        ins = [wire(st.read(t)) for t in input_tensors]
        outs = [[wire(st.write(t)) for t in group] for group in output_tensors]
        return self._launch("gather", st, lambda: self._gloo.gather(outs, ins, opts), output_tensors)

    def scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts or _c10d.ScatterOptions()
        checks.agree(self, "scatter", _desc(output_tensors), [opts.rootRank])
        st = Staging()
        outs = [wire(st.write(t)) for t in output_tensors]
        ins = [[wire(st.read(t)) for t in group] for group in input_tensors]
        return self._launch("scatter", st, lambda: self._gloo.scatter(outs, ins, opts), output_tensors)

    # --- barrier / point to point -----------------------------------------------------------
    def barrier(self, opts=None):
        """Waits for this rank's queued tpu work, then for every rank."""
        opts = opts or _c10d.BarrierOptions()
        o = _c10d.BarrierOptions()
        o.timeout = opts.timeout
        return self._launch("barrier", Staging(), lambda: self._gloo.barrier(o), [], sync_first=True)

    def send(self, tensors, dst_rank, tag):
        st = Staging()
        hosts = [wire(st.read(t)) for t in tensors]
        return self._launch(f"send to rank {dst_rank}", st,
                            lambda: self._gloo.send(hosts, dst_rank, tag), tensors)

    def recv(self, tensors, src_rank, tag):
        st = Staging()
        hosts = [wire(st.write(t)) for t in tensors]
        return self._launch(f"recv from rank {src_rank}", st,
                            lambda: self._gloo.recv(hosts, src_rank, tag), tensors)

    def recv_anysource(self, tensors, tag):
        st = Staging()
        hosts = [wire(st.write(t)) for t in tensors]
        return self._launch("recv from any source", st, lambda: self._gloo.recv_anysource(hosts, tag), tensors)
