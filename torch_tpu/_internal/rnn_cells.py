"""The fused RNN cell ops that ATen's LSTM / GRU call on accelerators (CUDA, XPU, PrivateUse1),
written as tpu op sequences (each op lowered to the IR; a fused window or a compiled graph
fuses them again). PyTorch has no decomposition for them.

Workspaces are ours (only our backward kernels read them), laid out as CUDA's:
  LSTM  [i, f, g, o] after their activations            ([B, 4H])
  GRU   [r, z, n, hx, hn] (hn = the hidden n-gate pre-activation, bias included) ([B, 5H])
Backward formulas follow the chain rule through those activations; with create_graph
autograd uses PyTorch's composite `_thnn_differentiable_*_backward` instead."""
import torch

aten = torch.ops.aten


def lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias
    if hidden_bias is not None:
        gates = gates + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], 1)


def lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    tcy = cy.tanh()
    gc = grad_cy if grad_cy is not None else torch.zeros_like(cy)
    if grad_hy is not None:
        go = grad_hy * tcy * o * (1 - o)
        gc = gc + grad_hy * o * (1 - tcy * tcy)
    else:
        go = torch.zeros_like(o)
    gi = gc * g * i * (1 - i)
    gf = gc * cx * f * (1 - f)
    gg = gc * i * (1 - g * g)
    grad_gates = torch.cat([gi, gf, gg, go], 1)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, gc * f, grad_bias


def gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat([r, z, n, hx, hn], 1)


def gru_cell_backward(grad_hy, workspace, has_bias):
    r, z, n, hx, hn = workspace.chunk(5, 1)
    dn = grad_hy * (1 - z) * (1 - n * n)
    dz = grad_hy * (hx - n) * z * (1 - z)
    dr = dn * hn * r * (1 - r)
    grad_input = torch.cat([dr, dz, dn], 1)
    grad_hidden = torch.cat([dr, dz, dn * r], 1)
    gb_in = grad_input.sum(0) if has_bias else None
    gb_hid = grad_hidden.sum(0) if has_bias else None
    return grad_input, grad_hidden, grad_hy * z, gb_in, gb_hid


def table():
    """{aten overload: python kernel} for decompositions.install()."""
    return {
        aten._thnn_fused_lstm_cell.default: lstm_cell,
        aten._thnn_fused_lstm_cell_backward_impl.default: lstm_cell_backward,
        aten._thnn_fused_gru_cell.default: gru_cell,
        aten._thnn_fused_gru_cell_backward.default: gru_cell_backward,
    }
