"""Diffusers 0.42.1 on tpu (`make diffusers`: the pinned wheels in the environment's
diffusers-site, with the huggingface-hub it needs): tiny UNet2DConditionModel and DiT
(DiTTransformer2DModel) training steps with the loss and gradients of CPU, in strict and fused
eager and under torch.compile(backend="tpu"); DDPM and DDIM pipelines and an Euler sampling
loop (EulerDiscreteScheduler's scale_model_input / step) of tiny models generating the images of
CPU from a CPU generator. Matmuls at HIGHEST. Skipped (with the reason) without the site."""
import copy

import pytest
import torch

import torch_tpu
from torch_tpu._internal import sites

try:
    sites.add("diffusers", "diffusers", replaces=("huggingface_hub",))
    import diffusers
except ImportError as e:  # noqa: F841
    pytest.skip(f"Diffusers not installed: {e}", allow_module_level=True)

MODES = {"strict": torch_tpu.EagerMode.DEFER_NEVER, "fused": torch_tpu.EagerMode.DEFER_AND_FUSE}


def _unet_cond():
    torch.manual_seed(0)
    return diffusers.UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16, attention_head_dim=8, norm_num_groups=8)


def _dit():
    torch.manual_seed(0)
    return diffusers.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
                                           num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10,
                                           norm_num_groups=4)


def _unet():
    torch.manual_seed(0)
    return diffusers.UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1,
                                 block_out_channels=(16, 32), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                 up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8)


def _step(model, kind, dev, compiled=False):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, 8, 8, generator=g)
    t = torch.tensor([3, 7])
    noise = torch.randn(2, 4, 8, 8, generator=g)
    # eval(): no dropout (DiT drops class labels at random in train mode, and tpu's random
    # stream is not CPU's); gradients flow the same
    m = copy.deepcopy(model).to(dev).eval()
    fn = torch.compile(m, backend="tpu") if compiled else m
    if kind == "unet":
        enc = torch.randn(2, 5, 16, generator=g)
        out = fn(x.to(dev), t.to(dev), enc.to(dev)).sample
    else:
        labels = torch.tensor([1, 4])
        out = fn(x.to(dev), timestep=t.to(dev), class_labels=labels.to(dev)).sample[:, :4]
    loss = torch.nn.functional.mse_loss(out, noise.to(dev))
    loss.backward()
    return loss.detach().cpu(), {n: p.grad.cpu() for n, p in m.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("mode", ["strict", "fused", "compile"])
@pytest.mark.parametrize("kind", ["unet", "dit"])
def test_training_step_matches_cpu(kind, mode):
    model = _unet_cond() if kind == "unet" else _dit()
    want_loss, want_grads = _step(model, kind, "cpu")
    with torch_tpu.eager_mode(MODES.get(mode, torch_tpu.EagerMode.DEFER_NEVER)), torch_tpu.precision("highest"):
        got_loss, got_grads = _step(model, kind, "tpu", compiled=mode == "compile")
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-5, atol=1e-6)
    assert got_grads.keys() == want_grads.keys() and len(want_grads) > 10
    for name, g in want_grads.items():
        torch.testing.assert_close(got_grads[name], g, rtol=1e-4, atol=1e-5, msg=name)


def _generate(pipe_cls, scheduler, dev, steps):
    pipe = pipe_cls(unet=_unet(), scheduler=scheduler).to(dev)
    pipe.set_progress_bar_config(disable=True)
    kw = {"eta": 0.0} if pipe_cls is diffusers.DDIMPipeline else {}
    out = pipe(batch_size=2, generator=torch.Generator().manual_seed(0), num_inference_steps=steps, output_type="np", **kw)
    return torch.from_numpy(out.images)


@pytest.mark.parametrize("name", ["ddpm", "ddim"])
def test_pipelines_generate_the_images_of_cpu(name):
    if name == "ddpm":
        cls, sched = diffusers.DDPMPipeline, lambda: diffusers.DDPMScheduler(num_train_timesteps=50)
    else:
        cls, sched = diffusers.DDIMPipeline, lambda: diffusers.DDIMScheduler(num_train_timesteps=50)
    want = _generate(cls, sched(), "cpu", 10)
    with torch_tpu.precision("highest"):
        got = _generate(cls, sched(), "tpu", 10)
    assert got.shape == (2, 8, 8, 3)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_euler_sampling_loop_matches_cpu(compiled):
    """The loop Stable Diffusion's pipelines run, with EulerDiscreteScheduler (sigmas,
    scale_model_input, step) around a UNet2DConditionModel; under torch.compile too."""
    def sample(dev, compile_unet):
        unet = _unet_cond().to(dev)
        fn = torch.compile(unet, backend="tpu") if compile_unet else unet
        sched = diffusers.EulerDiscreteScheduler(num_train_timesteps=100)
        sched.set_timesteps(6, device=dev)
        g = torch.Generator().manual_seed(2)
        x = (torch.randn(1, 4, 8, 8, generator=g) * sched.init_noise_sigma).to(dev)
        enc = torch.randn(1, 5, 16, generator=g).to(dev)
        for t in sched.timesteps:
            eps = fn(sched.scale_model_input(x, t), t, enc).sample
            x = sched.step(eps, t, x).prev_sample
        return x.cpu()

    want = sample("cpu", False)
    with torch_tpu.precision("highest"):
        got = sample("tpu", compiled)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
