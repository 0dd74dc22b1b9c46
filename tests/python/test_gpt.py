"""A GPT trains on tpu: one training step equals CPU (HIGHEST precision) in loss and in every
parameter gradient; 30 AdamW(foreach) + clip_grad_norm_ steps track CPU's losses; sampling
with a fixed seed is deterministic; nothing falls back to CPU. The model is examples/gpt.py
at a reduced size (2 layers, context 32) to keep the suite fast."""
import copy

import pytest
import torch

import torch_tpu

import example_loader

gpt = example_loader.load("gpt")

CHARS, DATA = gpt.load_data()
HIGHEST = torch_tpu.Precision.HIGHEST


def _setup(norm="layer", tied=True, ctx=32, batch=4, n_batches=4):
    torch.manual_seed(0)
    cfg = gpt.Config(vocab=len(CHARS.chars), ctx=ctx, layers=2, heads=4, width=64, norm=norm, tied=tied)
    model = gpt.GPT(cfg)
    gen = torch.Generator().manual_seed(1)
    batches = [gpt.get_batch(DATA, batch, ctx, gen) for _ in range(n_batches)]
    return model, batches


@pytest.mark.parametrize("norm,tied,smoothing", [("layer", True, 0.0), ("rms", False, 0.1)])
def test_one_step_matches_cpu(norm, tied, smoothing):
    model, batches = _setup(norm, tied)
    x, y = batches[0]
    y = y.clone()
    y[0, :5] = -1  # ignore_index
    results = {}
    torch_tpu._C._reset_fallback_counts()
    for dev in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(dev)
        with torch_tpu.precision(HIGHEST):
            _, loss = m(x.to(dev), y.to(dev), label_smoothing=smoothing)
            loss.backward()
        results[dev] = (loss.detach().cpu(), {n: p.grad.detach().cpu() for n, p in m.named_parameters()})
    assert torch_tpu.metrics()["fallbacks"] == {}
    torch.testing.assert_close(results["tpu"][0], results["cpu"][0], atol=1e-6, rtol=1e-6)
    grads_t, grads_c = results["tpu"][1], results["cpu"][1]
    assert grads_t.keys() == grads_c.keys()
    for name in grads_c:
        scale = grads_c[name].abs().max().item()
        torch.testing.assert_close(grads_t[name], grads_c[name], atol=3e-6 * scale + 1e-9, rtol=1e-5,
                                   msg=lambda m, n=name: f"grad of {n}: {m}")


def _train(model, batches, dev, steps):
    m = copy.deepcopy(model).to(dev)
    opt = gpt.make_optimizer(m, lr=3e-3)
    losses = []
    for s in range(steps):
        x, y = batches[s % len(batches)]
        losses.append(gpt.train_step(m, opt, x.to(dev), y.to(dev)).item())
    return torch.tensor(losses), m


def test_thirty_steps_track_cpu():
    model, batches = _setup()
    torch_tpu._C._reset_fallback_counts()
    with torch_tpu.precision(HIGHEST):
        tpu, m_tpu = _train(model, batches, "tpu", 30)
    cpu, m_cpu = _train(model, batches, "cpu", 30)
    assert torch_tpu.metrics()["fallbacks"] == {}
    rel = ((tpu - cpu).abs() / cpu.abs()).max().item()
    assert rel < 2e-3, f"max relative loss difference {rel:.2e}\ntpu {tpu}\ncpu {cpu}"  # measured 4.5e-4
    assert tpu[-5:].mean() < 0.8 * tpu[:3].mean()
    for (n, a), b in zip(m_tpu.named_parameters(), m_cpu.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), atol=2e-3, rtol=1e-2, msg=lambda m, n=n: f"{n}: {m}")


def test_default_precision_trains():
    model, batches = _setup()
    with torch_tpu.precision(torch_tpu.Precision.DEFAULT):
        tpu, _ = _train(model, batches, "tpu", 10)
    cpu, _ = _train(model, batches, "cpu", 10)
    rel = ((tpu - cpu).abs() / cpu.abs()).max().item()
    assert rel < 3e-2, f"max relative loss difference {rel:.2e}"


def test_sampling_is_deterministic():
    model, _ = _setup()
    m = model.to("tpu").eval()
    prompt = CHARS.encode("\n").view(1, 1).to("tpu")
    outs = []
    torch_tpu._C._reset_fallback_counts()
    for _ in range(2):
        g = torch.Generator(device="tpu").manual_seed(42)
        outs.append(m.generate(prompt, 20, top_k=10, generator=g).cpu())
    torch.manual_seed(5)
    a = m.generate(prompt, 10).cpu()
    torch.manual_seed(5)
    b = m.generate(prompt, 10).cpu()
    assert torch.equal(outs[0], outs[1]) and torch.equal(a, b)
    assert outs[0].shape == (1, 21)
    assert int(outs[0].max()) < len(CHARS.chars) and int(outs[0].min()) >= 0
    assert torch_tpu.metrics()["fallbacks"] == {}


def test_fused_mode_trains_like_strict():
    model, batches = _setup(n_batches=2)
    losses = {}
    for mode in (torch_tpu.EagerMode.DEFER_NEVER, torch_tpu.EagerMode.DEFER_AND_FUSE):
        with torch_tpu.eager_mode(mode):
            losses[mode], _ = _train(model, batches, "tpu", 3)
    torch.testing.assert_close(losses[torch_tpu.EagerMode.DEFER_AND_FUSE], losses[torch_tpu.EagerMode.DEFER_NEVER],
                               atol=1e-6, rtol=1e-6)


def test_bucketed_generation_equals_the_plain_loop():
    """generate() pads the context to powers of two in one buffer; with top_k=1 (argmax) its
    tokens equal the plain loop's (self(idx[:, -ctx:])[:, -1] per token) on CPU, also past the
    context length (a tiny ctx makes the window slide)."""
    torch.manual_seed(0)
    cfg = gpt.Config(vocab=len(CHARS.chars), ctx=8, width=32, layers=2, heads=2)
    model = gpt.GPT(cfg).eval()
    prompt = CHARS.encode("\nth").view(1, 3)
    idx = prompt.clone()
    with torch.no_grad():
        for _ in range(14):
            logits = model(idx[:, -cfg.ctx:])[:, -1, :]
            idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
    cpu = model.generate(prompt, 14, top_k=1)
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        tpu = model.to("tpu").generate(prompt.to("tpu"), 14, top_k=1).cpu()
    assert torch.equal(cpu, idx) and torch.equal(tpu, idx)
