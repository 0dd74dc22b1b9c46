"""Adam(fused=True) / AdamW(fused=True) / SGD(fused=True) on tpu: aten::_fused_adam_,
_fused_adamw_ and _fused_sgd_ as lowered ops, with the fused kernels' semantics (CPU's and
CUDA's):

- grad_scale: grads are divided by it (and the unscaled grads written back, as CUDA does);
- found_inf == 1 skips the whole update (no host sync: every write is a torch.where);
- maximize negates the grad; Adam adds weight_decay * param to the grad, AdamW scales the
  param by 1 - lr * weight_decay;
- state_steps were already incremented by the optimizer; bias corrections use them.
"""
import torch

aten = torch.ops.aten


def _writer(found_inf):
    """put(dst, new): dst = new, unless found_inf == 1 (then dst keeps its value; no host sync)."""
    keep = None if found_inf is None else (found_inf.reshape(()) == 1)

    def put(dst, new):
        dst.copy_(new if keep is None else torch.where(keep, dst, new.to(dst.dtype)))

    return put


def _unscaled(g, grad_scale, maximize, put):
    """The grad divided by grad_scale (written back, as the fused kernels do), negated for maximize."""
    grad = g
    if grad_scale is not None:
        grad = grad / grad_scale.reshape(()).to(grad.dtype)
        put(g, grad)
    return -grad if maximize else grad


def _update(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
            weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, decoupled):
    put = _writer(found_inf)
    for i, (p, g, m, v, step) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs, state_steps)):
        grad = _unscaled(g, grad_scale, maximize, put)
        param = p
        if weight_decay != 0:
            if decoupled:
                param = p * (1 - lr * weight_decay)
            else:
                grad = grad + weight_decay * p
        new_m = m * beta1 + grad * (1 - beta1)
        new_v = v * beta2 + grad * grad * (1 - beta2)
        s = step.reshape(()).to(torch.float32)
        bias1 = 1 - torch.pow(torch.tensor(beta1, dtype=torch.float32, device=s.device), s)
        bias2_sqrt = torch.sqrt(1 - torch.pow(torch.tensor(beta2, dtype=torch.float32, device=s.device), s))
        if amsgrad:
            new_max = torch.maximum(max_exp_avg_sqs[i], new_v)
            put(max_exp_avg_sqs[i], new_max)
            denom = torch.sqrt(new_max) / bias2_sqrt + eps
        else:
            denom = torch.sqrt(new_v) / bias2_sqrt + eps
        lr_t = lr.reshape(()) if isinstance(lr, torch.Tensor) else lr
        new_p = param - (lr_t / bias1) * new_m / denom
        put(m, new_m)
        put(v, new_v)
        put(p, new_p)


def _sgd(params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov,
         maximize, is_first_step, grad_scale=None, found_inf=None):
    """SGD's fused kernel: grads unscaled by grad_scale (and written back), maximize negates,
    weight decay adds weight_decay * param, momentum buffers start as the grad on the first
    step and are momentum * buf + (1 - dampening) * grad after, nesterov steps along
    grad + momentum * buf; found_inf == 1 skips the update."""
    lr_t = lr.reshape(()) if isinstance(lr, torch.Tensor) else lr
    put = _writer(found_inf)
    for i, (p, g) in enumerate(zip(params, grads)):
        grad = _unscaled(g, grad_scale, maximize, put)
        if weight_decay != 0:
            grad = grad + weight_decay * p
        if momentum != 0:
            buf = momentum_buffer_list[i]
            new_buf = grad if is_first_step else buf * momentum + grad * (1 - dampening)
            put(buf, new_buf)
            grad = grad + momentum * new_buf if nesterov else new_buf
        put(p, p - lr_t * grad)


def _make(decoupled):
    def fused(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
              weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        _update(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, decoupled)

    return fused


def table() -> dict:
    out = {}
    for name, decoupled in (("_fused_adam_", False), ("_fused_adamw_", True)):
        packet = getattr(aten, name, None)
        if packet is None:
            continue
        for overload in ("default", "tensor_lr"):
            op = getattr(packet, overload, None)
            if op is not None:
                out[op] = _make(decoupled)
    packet = getattr(aten, "_fused_sgd_", None)
    for overload in ("default", "tensor_lr"):
        op = getattr(packet, overload, None) if packet is not None else None
        if op is not None:
            out[op] = _sgd
    return out
