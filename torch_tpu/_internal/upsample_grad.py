"""Backward kernels of the upsampling ops (F.interpolate / nn.Upsample: nearest, nearest-exact,
linear, bilinear, trilinear, bicubic) as tpu op sequences. Their forwards already run on tpu
through PyTorch's decompositions (gathers); PyTorch has no decomposition of the backwards.

Upsampling is separable: along each spatial dim an output element reads a few input
elements (1 for nearest, 2 for linear, 4 for bicubic) with weights that depend only on its
index along that dim. The backward is the adjoint, applied one dim at a time (last dim
first): the gradient is scattered back with index_add, each tap weighted. Source indices and
weights follow PyTorch CPU's (aten/native/UpSample.h: area_pixel_compute_source_index,
nearest_idx, cubic convolution with A = -0.75)."""
import torch

aten = torch.ops.aten


def _scale(isize, osize, align_corners, scale):
    """Source-index step for one dim (area_pixel_compute_scale)."""
    if align_corners:
        return (isize - 1) / (osize - 1) if osize > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else isize / osize


def _src(osize, isize, align_corners, scale, cubic, device):
    """Real-valued source coordinate of each output index (float32, as the CPU kernel)."""
    s = _scale(isize, osize, align_corners, scale)
    dst = torch.arange(osize, dtype=torch.float32, device=device)
    if align_corners:
        return dst * s
    src = (dst + 0.5) * s - 0.5
    return src if cubic else src.clamp(min=0)


def _taps_nearest(osize, isize, scale, exact, device):
    s = isize / (isize * scale) if scale is not None and scale > 0 else isize / osize
    dst = torch.arange(osize, dtype=torch.float32, device=device)
    idx = ((dst + (0.5 if exact else 0.0)) * s).to(torch.int64).clamp(max=isize - 1)
    return [(idx, None)]


def _taps_linear(osize, isize, align_corners, scale, device):
    src = _src(osize, isize, align_corners, scale, False, device)
    i0 = src.floor().to(torch.int64).clamp(max=isize - 1)
    i1 = (i0 + 1).clamp(max=isize - 1)
    l1 = src - i0.to(torch.float32)
    return [(i0, 1 - l1), (i1, l1)]


def _taps_cubic(osize, isize, align_corners, scale, device):
    a = -0.75
    src = _src(osize, isize, align_corners, scale, True, device)
    f = src.floor()
    t = src - f
    i = f.to(torch.int64)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    return [((i + k - 1).clamp(0, isize - 1), w) for k, w in enumerate(weights)]


def _adjoint(grad, input_size, taps_per_dim):
    """grad [N, C, *osize] -> [N, C, *isize]: per spatial dim (last first), index_add of
    each weighted tap."""
    g = grad
    nsp = len(taps_per_dim)
    for d in reversed(range(nsp)):
        dim = 2 + d
        shape = list(g.shape)
        shape[dim] = input_size[dim]
        acc = torch.zeros(shape, dtype=g.dtype, device=g.device)
        view = [1] * g.dim()
        view[dim] = g.shape[dim]
        for idx, w in taps_per_dim[d]:
            src = g if w is None else g * w.to(g.dtype).reshape(view)
            acc = acc.index_add(dim, idx, src)
        g = acc
    return g


def _scales_list(n, scales):
    scales = list(scales) + [None] * (n - len(scales))
    return scales[:n]


def _nearest_backward(exact):
    def fn(grad_output, output_size, input_size, *scales):
        n = len(output_size)
        sc = _scales_list(n, scales)
        taps = [_taps_nearest(output_size[d], input_size[2 + d], sc[d], exact, grad_output.device) for d in range(n)]
        return _adjoint(grad_output, input_size, taps)

    return fn


def _interp_backward(cubic):
    def fn(grad_output, output_size, input_size, align_corners, *scales):
        n = len(output_size)
        sc = _scales_list(n, scales)
        make = _taps_cubic if cubic else _taps_linear
        taps = [make(output_size[d], input_size[2 + d], align_corners, sc[d], grad_output.device) for d in range(n)]
        return _adjoint(grad_output, input_size, taps)

    return fn


def table():
    """{aten overload: python kernel} for decompositions.install() (functional and
    .grad_input overloads; the latter get their out= handling there)."""
    t = {}
    for d in (1, 2, 3):
        for name, fn in ((f"upsample_nearest{d}d_backward", _nearest_backward(False)),
                         (f"_upsample_nearest_exact{d}d_backward", _nearest_backward(True))):
            packet = getattr(aten, name)
            t[packet.default] = fn
            t[packet.grad_input] = fn
    for name, cubic in (("upsample_linear1d_backward", False), ("upsample_bilinear2d_backward", False),
                        ("upsample_trilinear3d_backward", False), ("upsample_bicubic2d_backward", True)):
        packet = getattr(aten, name)
        t[packet.default] = _interp_backward(cubic)
        t[packet.grad_input] = _interp_backward(cubic)
    return t
