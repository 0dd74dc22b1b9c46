"""Matrix products (mm, bmm, addmm, baddbmm, dot, mv, matmul, linear) against PyTorch CPU.

float32 runs twice: under Precision.HIGHEST compared tightly with CPU float32 (forward and
backward), and under Precision.DEFAULT (one bf16 pass, f32 accumulation) compared with CPU
float32 computed on bf16-rounded matmul operands."""
import pytest
import torch
import torch.nn.functional as F

from op_harness import BF16, F32, Input, OpSpec, cases, check, check_case, make, modes, sample_inputs

precision = torch.tpu.precision
Precision = torch.tpu.Precision

MM_DTYPES = (F32, BF16, torch.int64, torch.int32)
MM_VARIANTS = ("contig", "noncontig", "empty")


def mm_spec(name, fn, shapes, dtypes=MM_DTYPES, mm_args=None, **kw):
    spec = OpSpec(name, fn, dtypes=dtypes, shapes=shapes, variants=kw.pop("variants", MM_VARIANTS),
                  tol_scale=kw.pop("tol_scale", 4), **kw)
    spec.mm_args = tuple(range(len(shapes))) if mm_args is None else mm_args
    return spec


OPS = [
    mm_spec("mm", torch.mm, ((5, 8), (8, 3))),
    mm_spec("bmm", torch.bmm, ((2, 5, 8), (2, 8, 3))),
    mm_spec("addmm", torch.addmm, ((5, 3), (5, 8), (8, 3)), mm_args=(1, 2)),
    mm_spec("addmm_bias_row", lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2), ((3,), (5, 8), (8, 3)),
            mm_args=(1, 2)),
    mm_spec("addmm_beta0", lambda b, x, y: torch.addmm(b, x, y, beta=0), ((5, 3), (5, 8), (8, 3)), mm_args=(1, 2)),
    mm_spec("baddbmm", lambda b, x, y: torch.baddbmm(b, x, y, beta=2, alpha=0.5), ((2, 5, 3), (2, 5, 8), (2, 8, 3)),
            mm_args=(1, 2)),
    mm_spec("dot", torch.dot, ((8,), (8,))),
    mm_spec("mv", torch.mv, ((5, 8), (8,))),
    mm_spec("matmul_2d", torch.matmul, ((5, 8), (8, 3))),
    mm_spec("matmul_batched_bcast", torch.matmul, ((2, 3, 5, 8), (8, 4)), dtypes=(F32, BF16)),
    mm_spec("matmul_vec_mat", torch.matmul, ((8,), (8, 3)), dtypes=(F32, BF16)),
    mm_spec("linear", F.linear, ((4, 8), (3, 8), (3,)), dtypes=(F32, BF16), mm_args=(0, 1)),
    mm_spec("linear_3d_nobias", lambda x, w: F.linear(x, w), ((2, 4, 8), (3, 8)), dtypes=(F32, BF16)),
    mm_spec("mm_chain", lambda a, b, c: torch.tanh(a @ b) @ c, ((5, 8), (8, 6), (6, 2)), dtypes=(F32, BF16),
            mm_args=()),
]


@pytest.mark.parametrize("spec,dtype,variant,mode", cases(OPS))
def test_highest(spec, dtype, variant, mode):
    with precision(Precision.HIGHEST):
        check_case(spec, dtype, variant, mode)


def _bf16_rounded(args, which):
    out = []
    for i, a in enumerate(args):
        if isinstance(a, Input) and i in which:
            out.append(Input(a.base.to(BF16).to(F32), a.view))
        else:
            out.append(a)
    return out


@pytest.mark.parametrize("spec", [pytest.param(s, id=s.name) for s in OPS if s.mm_args])
def test_default_precision_rounds_operands_to_bf16(spec):
    args = sample_inputs(spec, F32, "contig", seed=5)
    with precision(Precision.DEFAULT):
        check(spec.fn, args, grad=False, scale=4, cpu_args=_bf16_rounded(args, spec.mm_args))


def test_default_differs_from_highest():
    gen = torch.Generator().manual_seed(1)
    a, b = make((16, 16), F32, gen), make((16, 16), F32, gen)
    ta, tb = a.to("tpu"), b.to("tpu")
    with precision(Precision.DEFAULT):
        d = (ta @ tb).cpu()
    with precision(Precision.HIGHEST):
        h = (ta @ tb).cpu()
    torch.testing.assert_close(h, a @ b, atol=1e-4, rtol=1e-5)
    assert (d - h).abs().max() > 1e-4  # DEFAULT really rounds its inputs
    torch.testing.assert_close(d, a.bfloat16().float() @ b.bfloat16().float(), atol=1e-4, rtol=1e-5)


def test_default_precision_backward_is_close():
    gen = torch.Generator().manual_seed(2)
    args = [Input(make((5, 8), F32, gen)), Input(make((8, 3), F32, gen))]
    with precision(Precision.DEFAULT):
        check(torch.mm, args, grad=True, scale=10000)  # ~bf16 tolerance (atol 0.1, rtol 1.3e-2)


def _out(a):
    return torch.empty(0, dtype=a.dtype, device=a.device)


@pytest.mark.parametrize("name,fn,shapes", [
    ("mm_out", lambda x, y: torch.mm(x, y, out=_out(x)), ((5, 8), (8, 3))),
    ("bmm_out", lambda x, y: torch.bmm(x, y, out=_out(x)), ((2, 5, 8), (2, 8, 3))),
    ("addmm_", lambda b, x, y: b.clone().addmm_(x, y, alpha=3), ((5, 3), (5, 8), (8, 3))),
    ("addmm_out", lambda b, x, y: torch.addmm(b, x, y, out=_out(x)), ((5, 3), (5, 8), (8, 3))),
    ("baddbmm_", lambda b, x, y: b.clone().baddbmm_(x, y), ((2, 5, 3), (2, 5, 8), (2, 8, 3))),
    ("mv_out", lambda x, y: torch.mv(x, y, out=_out(x)), ((5, 8), (8,))),
])
@pytest.mark.parametrize("mode", modes())
def test_inplace_and_out(name, fn, shapes, mode):
    gen = torch.Generator().manual_seed(9)
    args = [Input(make(s, F32, gen)) for s in shapes]
    with precision(Precision.HIGHEST):
        check(fn, args, grad=name.endswith("_"), scale=4, mode=mode)
