"""NN ops against PyTorch CPU: softmax/log_softmax, layer_norm, nll_loss, cross_entropy
(weights, ignore_index, reductions, label smoothing, probability targets), mse_loss,
forward and backward; dropout by its statistics and its exact backward."""
import pytest
import torch
import torch.nn.functional as F

from op_harness import BF16, F32, FLOATS, Input, OpSpec, cases, check, check_case, make

V = ("contig", "noncontig", "0dim", "empty")


def cls_inputs(n=5, c=4, ignore=None, weight=False, probs=False, spatial=False):
    """make_inputs for classification losses: logits [n, c] (+ target, + class weights)."""
    def make_inputs(variant, dtype, gen):
        nn = 0 if variant == "empty" else n
        if variant == "noncontig":
            logits = Input(make((c, 2 * nn), dtype, gen), lambda b: b.t()[::2])
        elif variant == "0dim":  # unbatched: logits [c], target []
            logits = Input(make((c,), dtype, gen))
        elif spatial:
            logits = Input(make((nn, c, 3), dtype, gen))
        else:
            logits = Input(make((nn, c), dtype, gen))
        tshape = logits.view(logits.base).shape if logits.view else logits.base.shape
        tshape = tshape[:1] + tshape[2:] if len(tshape) > 1 else ()
        if probs:
            target = Input(torch.softmax(make(tuple(tshape[:1]) + (c,) + tuple(tshape[1:]), F32, gen), 1 if tshape else 0).to(dtype))
        else:
            t = torch.randint(0, c, tshape, generator=gen)
            if ignore is not None and t.numel():
                t.view(-1)[:: 3] = ignore
            target = Input(t)
        args = [logits, target]
        if weight:
            args.append(Input(make((c,), dtype, gen, 0.2, 2.0)))
        return args
    return make_inputs


P3 = ((3,), (3,), (3,), (3,))  # weight, bias, running_mean, running_var
VAR = {4: (0.5, 2.0)}  # running_var > 0


def bn(x, w, b, rm, rv, training, momentum=0.1, eps=1e-5):
    """F.batch_norm on clones of the running statistics, which it returns too."""
    rm, rv = rm.detach().clone(), rv.detach().clone()
    return F.batch_norm(x, rm, rv, w, b, training, momentum, eps), rm, rv


def with_stats(op, x, w, b, rm, rv, *args):
    """An op that updates the running statistics in place: its results, then the statistics."""
    rm, rv = rm.detach().clone(), rv.detach().clone()
    return tuple(op(x, w, b, rm, rv, *args)) + (rm, rv)


def spec(name, fn, dtypes=FLOATS, variants=V, **kw):
    kw.setdefault("shapes", ((3, 5),))
    kw.setdefault("tol_scale", 4)
    return OpSpec(name, fn, dtypes=dtypes, variants=variants, **kw)


OPS = [
    spec("softmax_last", lambda x: torch.softmax(x, -1)),
    spec("softmax_dim0", lambda x: torch.softmax(x, 0), shapes=((3, 4, 2),)),
    spec("log_softmax_last", lambda x: F.log_softmax(x, -1)),
    spec("log_softmax_dim1", lambda x: F.log_softmax(x, 1), shapes=((2, 4, 3),), variants=V[:2] + ("empty",)),
    spec("softmax_dtype_f32", lambda x: torch.softmax(x, -1, dtype=torch.float32)),
    spec("log_softmax_large", lambda x: F.log_softmax(x * 40, -1)),
    spec("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b), shapes=((2, 3, 4), (4,), (4,)),
         variants=("contig", "noncontig", "empty")),
    spec("layer_norm_2d_shape", lambda x, w, b: F.layer_norm(x, (3, 4), w, b, eps=1e-3),
         shapes=((2, 3, 4), (3, 4), (3, 4)), variants=("contig", "noncontig")),
    spec("layer_norm_no_affine", lambda x: F.layer_norm(x, (5,)), variants=("contig", "noncontig", "empty")),
    spec("layer_norm_weight_only", lambda x, w: F.layer_norm(x, (5,), w), shapes=((3, 5), (5,)),
         variants=("contig", "noncontig")),
    spec("nll_loss", F.nll_loss, make_inputs=cls_inputs()),
    spec("nll_loss_sum", lambda x, t: F.nll_loss(x, t, reduction="sum"), make_inputs=cls_inputs()),
    spec("nll_loss_none", lambda x, t: F.nll_loss(x, t, reduction="none"), make_inputs=cls_inputs()),
    spec("nll_loss_weight", lambda x, t, w: F.nll_loss(x, t, w), make_inputs=cls_inputs(weight=True)),
    spec("nll_loss_ignore", lambda x, t: F.nll_loss(x, t, ignore_index=2), make_inputs=cls_inputs(ignore=2)),
    spec("nll_loss_ignore_neg", lambda x, t, w: F.nll_loss(x, t, w, ignore_index=-100, reduction="sum"),
         make_inputs=cls_inputs(ignore=-100, weight=True)),
    spec("cross_entropy", F.cross_entropy, make_inputs=cls_inputs()),
    spec("cross_entropy_weight_ignore", lambda x, t, w: F.cross_entropy(x, t, w, ignore_index=1),
         make_inputs=cls_inputs(weight=True, ignore=1)),
    spec("cross_entropy_none", lambda x, t: F.cross_entropy(x, t, reduction="none"), make_inputs=cls_inputs()),
    spec("cross_entropy_label_smoothing", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
         make_inputs=cls_inputs()),
    spec("cross_entropy_probs", F.cross_entropy, make_inputs=cls_inputs(probs=True)),
    spec("cross_entropy_spatial", F.cross_entropy, variants=("contig",), make_inputs=cls_inputs(spatial=True)),
    # batch norm (csrc/lowering/from_aten/batch_norm.cpp): the running statistics are cloned
    # first (a leaf that requires grad can't be updated in place) and returned as outputs.
    spec("batch_norm_train", lambda x, w, b, rm, rv: bn(x, w, b, rm, rv, True), shapes=((4, 3, 5),) + P3,
         domains=VAR, variants=("contig", "noncontig", "empty")),
    spec("batch_norm_train_1d", lambda x, w, b, rm, rv: bn(x, w, b, rm, rv, True, eps=1e-3), shapes=((6, 3),) + P3,
         domains=VAR, variants=("contig", "noncontig")),
    spec("batch_norm_train_2d", lambda x, w, b, rm, rv: bn(x, w, b, rm, rv, True, momentum=0.3),
         shapes=((2, 3, 4, 5),) + P3, domains=VAR, variants=("contig", "noncontig")),
    spec("batch_norm_eval", lambda x, w, b, rm, rv: bn(x, w, b, rm, rv, False), shapes=((4, 3, 5),) + P3,
         domains=VAR, variants=("contig", "noncontig", "empty")),
    spec("batch_norm_no_affine", lambda x, rm, rv: bn(x, None, None, rm, rv, True), shapes=((4, 3, 2, 2), (3,), (3,)),
         domains={2: (0.5, 2.0)}, variants=("contig",)),
    spec("batch_norm_no_running_stats", lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
         shapes=((4, 3, 5), (3,), (3,)), variants=("contig", "noncontig")),
    spec("native_batch_norm_saved_stats", lambda x, w, b: torch.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5),
         shapes=((4, 3, 5), (3,), (3,)), variants=("contig",)),
    spec("native_batch_norm_legit_no_stats",
         lambda x, w, b: torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5),
         shapes=((4, 3, 5), (3,), (3,)), variants=("contig",)),
    spec("native_batch_norm_legit", lambda x, w, b, rm, rv: with_stats(torch.ops.aten._native_batch_norm_legit, x, w, b,
                                                                      rm, rv, True, 0.2, 1e-5),
         shapes=((4, 3, 5),) + P3, domains=VAR, variants=("contig",)),
    spec("batch_norm_with_update", lambda x, w, b, rm, rv: with_stats(torch.ops.aten._batch_norm_with_update, x, w, b,
                                                                     rm, rv, 0.2, 1e-5),
         shapes=((4, 3, 5),) + P3, domains=VAR, variants=("contig",)),
    # group norm (csrc/lowering/from_aten/group_norm.cpp)
    spec("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), shapes=((2, 4, 5), (4,), (4,)),
         variants=("contig", "noncontig", "empty")),
    spec("group_norm_2d", lambda x, w, b: F.group_norm(x, 3, w, b, eps=1e-3), shapes=((2, 6, 3, 2), (6,), (6,)),
         variants=("contig", "noncontig")),
    spec("group_norm_hw1", lambda x, w, b: F.group_norm(x, 2, w, b), shapes=((3, 8), (8,), (8,))),
    spec("group_norm_no_affine", lambda x: F.group_norm(x, 1, eps=1e-4), shapes=((2, 3, 4),)),
    spec("native_group_norm_stats", lambda x, w, b: torch.native_group_norm(x, w, b, 2, 4, 6, 2, 1e-5),
         shapes=((2, 4, 6), (4,), (4,)), variants=("contig",)),
    # weight norm (csrc/lowering/from_aten/weight_norm.cpp): dim first or last. (Not the internal
    # _weight_norm_interface on non-contiguous v: CPU's kernel reads such v as contiguous.)
    spec("weight_norm_dim0", lambda v, g: torch._weight_norm(v, g, 0), shapes=((4, 3, 5), (4, 1, 1)),
         variants=("contig", "noncontig")),
    spec("weight_norm_last", lambda v, g: torch._weight_norm(v, g, 2), shapes=((4, 3, 5), (1, 1, 5)),
         variants=("contig", "noncontig")),
    spec("mse_loss", F.mse_loss, shapes=((3, 5), (3, 5))),
    spec("mse_loss_sum", lambda a, b: F.mse_loss(a, b, reduction="sum"), shapes=((3, 5), (3, 5))),
    spec("mse_loss_none", lambda a, b: F.mse_loss(a, b, reduction="none"), shapes=((3, 5), (3, 5))),
]


@pytest.mark.parametrize("spec,dtype,variant,mode", cases(OPS))
def test_op(spec, dtype, variant, mode):
    check_case(spec, dtype, variant, mode)


def test_mse_loss_broadcast_target_warns_and_matches():
    gen = torch.Generator().manual_seed(4)
    args = [Input(make((3, 5), F32, gen)), Input(make((5,), F32, gen))]
    with pytest.warns(UserWarning):
        check(F.mse_loss, args, scale=4)


def test_softmax_all_neg_inf_row():
    x = torch.tensor([[0.0, 1.0, 2.0], [float("-inf")] * 3])
    check(lambda t: torch.softmax(t, -1), [Input(x)], grad=False)


# --- dropout: random, so statistics + exact relation between output, mask and grad --------
@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_train_statistics_and_backward(dtype):
    torch.manual_seed(0)
    p = 0.3
    x = torch.rand(200, 50, dtype=dtype).add_(0.5).to("tpu").requires_grad_()
    y = F.dropout(x, p, training=True)
    y.backward(torch.ones_like(y))
    yc, xc, g = y.detach().cpu().float(), x.detach().cpu().float(), x.grad.cpu().float()
    kept = yc != 0
    assert abs(1 - kept.float().mean().item() - p) < 0.02
    scale = 1 / (1 - p)
    tol = 1e-5 if dtype == F32 else 1e-2
    torch.testing.assert_close(yc[kept], (xc * scale).to(dtype).float()[kept], atol=tol, rtol=tol)
    torch.testing.assert_close(g, kept.float() * scale, atol=tol, rtol=tol)


def test_dropout_eval_p0_p1_and_reproducible():
    x = torch.randn(64, 8).to("tpu")
    assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), x.cpu())
    assert torch.equal(F.dropout(x, 0.0, training=True).cpu(), x.cpu())
    assert torch.equal(F.dropout(x, 1.0, training=True).cpu(), torch.zeros(64, 8))
    torch.manual_seed(123)
    a = F.dropout(x, 0.5).cpu()
    torch.manual_seed(123)
    b = F.dropout(x, 0.5).cpu()
    c = F.dropout(x, 0.5).cpu()
    assert torch.equal(a, b) and not torch.equal(b, c)
    with pytest.raises(ValueError):
        F.dropout(x, 1.5)


def test_nn_modules_end_to_end():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                            torch.nn.Linear(16, 4))
    mt = torch.nn.Sequential(*[l for l in m])  # same modules; copy parameters below
    import copy
    mt = copy.deepcopy(m).to("tpu")
    x, t = torch.randn(6, 8), torch.randint(0, 4, (6,))
    with torch.tpu.precision(torch.tpu.Precision.HIGHEST):
        lt = F.cross_entropy(mt(x.to("tpu")), t.to("tpu"))
        lt.backward()
    lc = F.cross_entropy(m(x), t)
    lc.backward()
    torch.testing.assert_close(lt.cpu(), lc, atol=1e-5, rtol=1e-5)
    for pc, pt in zip(m.parameters(), mt.parameters()):
        torch.testing.assert_close(pt.grad.cpu(), pc.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("bias", [True, False])
def test_rnn_fused_cells_match_cpu(kind, bias):
    """nn.LSTM / nn.GRU (and their cells) reach ATen's fused cell ops on an accelerator
    (_thnn_fused_lstm_cell / _thnn_fused_gru_cell and their backwards): tpu op sequences in
    torch_tpu/_internal/rnn_cells.py. Outputs, final states and every gradient vs CPU."""
    import copy

    import torch_tpu

    torch.manual_seed(0)
    cls = getattr(torch.nn, kind)
    seq = kind in ("LSTM", "GRU")
    m = cls(5, 7, num_layers=2, batch_first=True, bias=bias) if seq else cls(5, 7, bias=bias)
    x = torch.randn(3, 4, 5) if seq else torch.randn(3, 5)
    outs = []
    for dev in ("cpu", "tpu"):
        mm = copy.deepcopy(m).to(dev)
        xx = x.detach().clone().to(dev).requires_grad_()
        with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
            y = mm(xx)
            flat = [y[0], *(y[1] if isinstance(y[1], tuple) else (y[1],))] if seq else list(y if isinstance(y, tuple) else (y,))
            sum(t.square().sum() * (i + 1) for i, t in enumerate(flat)).backward()
        outs.append([t.detach().cpu() for t in flat] + [xx.grad.cpu()] + [p.grad.cpu() for p in mm.parameters()])
    for a, b in zip(*outs):
        torch.testing.assert_close(b, a, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("mode,dims,kw", [
    ("nearest", 1, {"scale_factor": 2.5}), ("nearest", 2, {"size": (7, 3)}), ("nearest", 3, {"scale_factor": 1.5}),
    ("nearest-exact", 2, {"size": (5, 9)}), ("linear", 1, {"size": 11, "align_corners": True}),
    ("bilinear", 2, {"scale_factor": (1.7, 0.6), "align_corners": False}),
    ("bilinear", 2, {"size": (9, 4), "align_corners": True}),
    ("trilinear", 3, {"size": (3, 5, 6), "align_corners": False}),
    ("bicubic", 2, {"scale_factor": 2.0, "align_corners": False}), ("bicubic", 2, {"size": (3, 8), "align_corners": True}),
])
def test_interpolate_backward_matches_cpu(mode, dims, kw):
    """F.interpolate backward (torch_tpu/_internal/upsample_grad.py: the adjoint per spatial
    dim) vs CPU, up- and downsampling, sizes and scale factors, align_corners both ways."""
    torch.manual_seed(0)
    x = torch.randn((2, 3) + (5, 6, 4)[:dims])
    w = torch.randn_like(F.interpolate(x, mode=mode, **kw))
    grads = []
    for dev in ("cpu", "tpu"):
        xx = x.detach().clone().to(dev).requires_grad_()
        y = F.interpolate(xx, mode=mode, **kw)
        (y * w.to(dev)).sum().backward()
        grads.append((y.detach().cpu(), xx.grad.cpu()))
    torch.testing.assert_close(grads[1][0], grads[0][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grads[1][1], grads[0][1], atol=1e-5, rtol=1e-5)


def test_group_norm_channels_last_matches_cpu():
    """native_group_norm on a channels-last input (PyTorch's ref views its result as the
    input's shape, which needs a contiguous input: torch_tpu/_internal/decompositions.py)."""
    torch.manual_seed(0)
    x = torch.randn(2, 6, 5, 3).to(memory_format=torch.channels_last)
    wt, b = torch.randn(6), torch.randn(6)
    res = []
    for dev in ("cpu", "tpu"):
        xx = x.detach().clone().to(dev).requires_grad_()
        y = F.group_norm(xx, 2, wt.to(dev), b.to(dev))
        (y * torch.arange(y.numel()).reshape(y.shape).to(dev)).sum().backward()
        res.append((y.detach().cpu(), xx.grad.cpu()))
    torch.testing.assert_close(res[1][0], res[0][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(res[1][1], res[0][1], atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalizes_weight_like_cpu(norm_type):
    """F.embedding(max_norm=...) renormalizes the looked-up rows of the weight in place
    (embedding_renorm_), repeated indices included; output and weight vs CPU."""
    torch.manual_seed(0)
    w = torch.randn(10, 4) * 3
    idx = torch.tensor([[1, 3, 3], [9, 0, 1]])
    res = []
    for dev in ("cpu", "tpu"):
        ww = w.clone().to(dev)
        y = F.embedding(idx.to(dev), ww, max_norm=1.5, norm_type=norm_type)
        res.append((y.cpu(), ww.cpu()))
    torch.testing.assert_close(res[1][0], res[0][0], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(res[1][1], res[0][1], atol=1e-6, rtol=1e-6)
    assert not torch.equal(res[0][1], w)  # rows were renormalized


def test_sgn_backward_is_zero():
    x = torch.randn(5).to("tpu").requires_grad_()
    torch.sgn(x).sum().backward()  # autograd asks for an _efficientzerotensor
    assert x.grad.cpu().eq(0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
def test_geometric_distribution_every_dtype(dtype):
    """geometric_(p): mean 1/p, support {1, 2, ...}, finite, reproducible under the seed."""
    torch.manual_seed(3)
    t = torch.empty(200000, dtype=dtype, device="tpu").geometric_(0.3).cpu().double()
    assert t.min() >= 1 and torch.isfinite(t).all() and torch.equal(t, t.floor())
    assert abs(t.mean().item() - 1 / 0.3) < 0.03
    torch.manual_seed(3)
    assert torch.equal(torch.empty(200000, dtype=dtype, device="tpu").geometric_(0.3).cpu().double(), t)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("extra", ["plain", "psw", "padding", "last_offset", "freq"])
def test_embedding_bag_matches_cpu(mode, extra):
    """F.embedding_bag forward and backward (weight, per-sample weights) vs CPU: bags from
    offsets incl. an empty bag, padding_idx, include_last_offset, scale_grad_by_freq."""
    if (extra == "psw" and mode != "sum") or (extra == "freq" and mode == "max"):
        pytest.skip("PyTorch rejects the combination")
    torch.manual_seed(0)
    w = torch.randn(10, 3)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 0])
    offsets = torch.tensor([0, 3, 3, 6] + ([10] if extra == "last_offset" else []))
    psw = torch.randn(10) if extra == "psw" else None
    kw = dict(mode=mode, include_last_offset=extra == "last_offset", padding_idx=2 if extra == "padding" else None,
              scale_grad_by_freq=extra == "freq")
    res = []
    for dev in ("cpu", "tpu"):
        ww = w.clone().to(dev).requires_grad_()
        pp = psw.clone().to(dev).requires_grad_() if psw is not None else None
        y = F.embedding_bag(idx.to(dev), ww, offsets.to(dev), per_sample_weights=pp, **kw)
        (y * torch.arange(y.numel(), dtype=y.dtype).reshape(y.shape).to(dev)).sum().backward()
        res.append([y.detach().cpu(), ww.grad.cpu()] + ([pp.grad.cpu()] if pp is not None else []))
    for a, b in zip(*res):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("out_size", [(None, 3, 2), (4, 4, 1), (3, 5, 2), (1, 1, 1)])
def test_adaptive_avg_pool_keeps_nonfinite_in_its_window(out_size):
    """NaN / Inf reach only the windows that contain them (found by the fuzzer: the averaging
    matrix's zeros spread them, 0 * inf = NaN, to every output along the dim)."""
    x = torch.randn(2, 1, 8, 7, 3)
    x[0, 0, 0, 0, 0] = float("nan")
    x[1, 0, 5, 5, 1] = float("inf")
    x[1, 0, 2, 1, 2] = float("-inf")
    expected = F.adaptive_avg_pool3d(x, out_size)
    torch.testing.assert_close(F.adaptive_avg_pool3d(x.to("tpu"), out_size).cpu(), expected, equal_nan=True)
    x1 = x[:, 0, :, :, 0]
    torch.testing.assert_close(F.adaptive_avg_pool1d(x1.to("tpu"), 5).cpu(), F.adaptive_avg_pool1d(x1, 5), equal_nan=True)


def test_batch_norm_one_value_per_channel_and_saved_stats_dtype():
    """Training on one value per channel updates the running variance to NaN as CPU does (found
    by the fuzzer: the decomposition's n / (n - 1) raised ZeroDivisionError); the saved mean and
    invstd have CPU's dtype (bf16 for an all-bf16 call, float32 with float32 parameters)."""
    x = torch.randn(1, 2, generator=torch.Generator().manual_seed(6)) * 3
    res = []
    for dev in ("cpu", "tpu"):
        rm, rv = torch.zeros(2, device=dev), torch.ones(2, device=dev)
        out = torch.native_batch_norm(x.to(dev), None, None, rm, rv, True, 0.5, 1e-5)
        res.append([o.cpu() for o in out] + [rm.cpu(), rv.cpu()])
    for a, e in zip(res[1], res[0]):  # the output is 0; CPU's fma leaves ~|x| / sqrt(eps) * 2^-24
        torch.testing.assert_close(a, e, equal_nan=True, atol=2e-4, rtol=1.3e-6)
    xb = torch.randn(4, 2).bfloat16()
    for params in ((None, None, None, None), (torch.ones(2), None, torch.zeros(2), torch.ones(2)),
                   (torch.ones(2).bfloat16(), None, torch.zeros(2).bfloat16(), torch.ones(2).bfloat16())):
        e = torch.native_batch_norm(xb, *params, True, 0.5, 1e-5)
        a = torch.native_batch_norm(xb.to("tpu"), *[p if p is None else p.to("tpu") for p in params], True, 0.5, 1e-5)
        assert [t.dtype for t in a] == [t.dtype for t in e]
    e = torch.ops.aten._native_batch_norm_legit(xb, None, None, True, 0.5, 1e-5)
    a = torch.ops.aten._native_batch_norm_legit(xb.to("tpu"), None, None, True, 0.5, 1e-5)
    assert [t.dtype for t in a] == [t.dtype for t in e]


def test_dropout_backward_propagates_nonfinite_gradients_like_cpu():
    """grad * mask * scale: an Inf/NaN gradient where the mask is 0 gives NaN as on CPU (found
    by the fuzzer: a select gave 0)."""
    g = torch.tensor([float("inf"), float("nan"), 1.0, -2.0])
    m = torch.tensor([False, False, True, False])
    for dt in (torch.float32, torch.bfloat16):
        e = torch.ops.aten.native_dropout_backward(g.to(dt), m, 2.0)
        a = torch.ops.aten.native_dropout_backward(g.to(dt).to("tpu"), m.to("tpu"), 2.0).cpu()
        torch.testing.assert_close(a, e, equal_nan=True)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_norm_modules_train_like_cpu_without_decompositions(mode):
    """BatchNorm2d (train, then eval) and GroupNorm in a conv net, three SGD steps in strict
    and fused mode (the later steps replay the fast path): outputs, gradients, running
    statistics vs CPU; and no Python decomposition ran (C++ lowerings, issue 17)."""
    import copy

    import torch_tpu
    from torch_tpu._internal import decompositions

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 3), torch.nn.GroupNorm(4, 8), torch.nn.BatchNorm2d(8, momentum=None))
    xs = [torch.randn(4, 3, 6, 6) for _ in range(3)]
    res = []
    before = decompositions.counts()
    for dev in ("cpu", "tpu"):
        m = copy.deepcopy(net).to(dev)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        eager = torch_tpu.EagerMode.DEFER_AND_FUSE if mode == "fused" and dev == "tpu" else torch_tpu.get_eager_mode()
        outs = []
        with torch_tpu.eager_mode(eager), torch_tpu.precision(torch_tpu.Precision.HIGHEST):
            for x in xs:
                y = m(x.to(dev))
                opt.zero_grad()
                (y * y).mean().backward()
                opt.step()
                outs.append(y.detach().cpu())
            m.eval()
            with torch.no_grad():
                outs.append(m(xs[0].to(dev)).cpu())
        outs += [t.detach().cpu() for t in list(m.parameters()) + list(m.buffers())]
        res.append(outs)
    for a, e in zip(res[1], res[0]):
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-4)
    after = decompositions.counts()
    assert {k: v for k, v in after.items() if v != before.get(k, 0)} == {}


def test_batch_norm_mixed_dtype_like_cpu():
    """A bf16 input with f32 parameters and running statistics ("mixed"): bf16 output, f32
    saved statistics and running statistics, gradients in each tensor's dtype."""
    gen = torch.Generator().manual_seed(3)
    x = make((4, 3, 5), BF16, gen)
    w, b = make((3,), F32, gen), make((3,), F32, gen)
    rm, rv = make((3,), F32, gen), make((3,), F32, gen, 0.5, 2.0)
    res = []
    for dev in ("cpu", "tpu"):
        xx, ww, bb = (t.clone().to(dev).requires_grad_() for t in (x, w, b))
        rrm, rrv = rm.clone().to(dev), rv.clone().to(dev)
        out = torch.native_batch_norm(xx, ww, bb, rrm, rrv, True, 0.1, 1e-5)
        out[0].float().square().sum().backward()
        res.append(list(out) + [rrm, rrv, xx.grad, ww.grad, bb.grad])
    for a, e in zip(res[1], res[0]):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a.detach().cpu(), e.detach(), atol=2e-2, rtol=2e-2)

