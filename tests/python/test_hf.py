"""Hugging Face models as users load and train them: from_pretrained(device_map="tpu") through
accelerate, tied weights, torch.autocast("tpu") with CUDA's op lists, GradScaler("tpu"), and
the fine-tune example. Checkpoints are made locally (save_pretrained of a tiny model)."""
import copy
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import torch_tpu

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

HIGHEST = torch_tpu.Precision.HIGHEST
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tiny_llama():
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny_llama")
    _tiny_llama().save_pretrained(d)
    return d


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_from_pretrained_device_map_tpu(checkpoint, dtype):
    Auto = transformers.AutoModelForCausalLM
    ref = Auto.from_pretrained(checkpoint, dtype=dtype)
    dev = Auto.from_pretrained(checkpoint, device_map="tpu", dtype=dtype)
    for n, p in dev.named_parameters():
        assert p.device.type == "tpu" and p.dtype == dtype, n
    assert dev.lm_head.weight is dev.model.embed_tokens.weight
    ids = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad(), torch_tpu.precision(HIGHEST):
        want = ref(ids).logits
        got = dev(ids.to("tpu")).logits.cpu()
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(got, want, **tol)


def test_from_pretrained_missing_tensor_reports_like_cpu(checkpoint, tmp_path):
    from safetensors.torch import load_file, save_file

    for f in ("config.json", "generation_config.json"):
        if (checkpoint / f).exists():
            (tmp_path / f).write_bytes((checkpoint / f).read_bytes())
    sd = load_file(str(checkpoint / "model.safetensors"))
    del sd["model.layers.1.mlp.up_proj.weight"]
    save_file(sd, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    Auto = transformers.AutoModelForCausalLM
    _, cpu_info = Auto.from_pretrained(tmp_path, output_loading_info=True)
    m, tpu_info = Auto.from_pretrained(tmp_path, device_map="tpu", output_loading_info=True)
    assert set(tpu_info["missing_keys"]) == set(cpu_info["missing_keys"])
    assert "model.layers.1.mlp.up_proj.weight" in set(tpu_info["missing_keys"])
    assert m.model.layers[1].mlp.up_proj.weight.device.type == "tpu"


def test_from_pretrained_unsupported_dtype_tensor(checkpoint, tmp_path):
    # A float8 tensor in the checkpoint: tpu stores no float8, but loading casts to the model's
    # dtype as on CPU, so the tpu model holds CPU's values; a float8 tensor moved to tpu by hand
    # is a clear error naming the dtype.
    from safetensors.torch import load_file, save_file

    for f in ("config.json", "generation_config.json"):
        if (checkpoint / f).exists():
            (tmp_path / f).write_bytes((checkpoint / f).read_bytes())
    sd = load_file(str(checkpoint / "model.safetensors"))
    name = "model.layers.1.mlp.up_proj.weight"
    sd[name] = sd[name].to(torch.float8_e4m3fn)
    save_file(sd, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    Auto = transformers.AutoModelForCausalLM
    cpu = Auto.from_pretrained(tmp_path)
    dev = Auto.from_pretrained(tmp_path, device_map="tpu")
    w_cpu, w_dev = cpu.model.layers[1].mlp.up_proj.weight, dev.model.layers[1].mlp.up_proj.weight
    assert w_dev.device.type == "tpu" and w_dev.dtype == w_cpu.dtype
    assert torch.equal(w_dev.cpu(), w_cpu)
    with pytest.raises(NotImplementedError, match="Float8_e4m3fn"):
        sd[name].to("tpu")


def test_tied_hf_model_trains_like_cpu():
    ref = _tiny_llama()
    dev = copy.deepcopy(ref)
    # SGD: Adam's first steps are ~lr * sign(grad), which turns float rounding in gradients
    # near zero into lr-sized differences; SGD compares the gradients themselves.
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.5, momentum=0.9)
    opt_dev = torch.optim.SGD(dev.parameters(), lr=0.5, momentum=0.9)  # built before .to("tpu")
    dev.to("tpu")
    assert dev.lm_head.weight is dev.model.embed_tokens.weight
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(4))
    with torch_tpu.precision(HIGHEST):
        for _ in range(2):
            for m, opt, x in ((ref, opt_ref, ids), (dev, opt_dev, ids.to("tpu"))):
                opt.zero_grad()
                m(input_ids=x, labels=x).loss.backward()
                opt.step()
    for n, p in ref.named_parameters():
        torch.testing.assert_close(dict(dev.named_parameters())[n].cpu(), p, rtol=1e-4, atol=1e-5, msg=n)


def test_autocast_follows_cudas_op_lists():
    a = torch.randn(4, 8).to("tpu")
    w = torch.randn(3, 8).to("tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(a, w)
        assert y.dtype == torch.bfloat16  # lower_precision_fp
        assert (a @ a.T).dtype == torch.bfloat16
        assert torch.softmax(y, -1).dtype == torch.float32  # fp32 list
        assert torch.nn.functional.layer_norm(y, (3,)).dtype == torch.float32
        assert torch.addcmul(a, y.new_ones(4, 3).float()[:, :1], a).dtype == torch.float32  # promote
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(torch.rand(3).to("tpu"), torch.rand(3).to("tpu"))
    assert torch.nn.functional.linear(a, w).dtype == torch.float32  # off again
    ref = torch.nn.functional.linear(a.cpu().bfloat16(), w.cpu().bfloat16())
    with torch.autocast("tpu", dtype=torch.bfloat16):
        torch.testing.assert_close(torch.nn.functional.linear(a, w).cpu(), ref, rtol=2e-2, atol=2e-2)


def test_grad_scaler_matches_cpu():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    dev = copy.deepcopy(ref).to("tpu")
    x, y = torch.randn(4, 8), torch.randn(4, 1)

    def run(m, device, x, y):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        sc = torch.amp.GradScaler(device, init_scale=2.0**16, growth_interval=2)
        scales = []
        for i in range(6):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            sc.scale(loss).backward()
            if i == 2:  # an overflow: the step is skipped and the scale backs off
                next(m.parameters()).grad.view(-1)[0] = float("inf")
            sc.step(opt)
            sc.update()
            scales.append(sc.get_scale())
        return scales, [p.detach().cpu() for p in m.parameters()]

    with torch_tpu.precision(HIGHEST):
        s_ref, p_ref = run(ref, "cpu", x, y)
        s_dev, p_dev = run(dev, "tpu", x.to("tpu"), y.to("tpu"))
    assert s_dev == s_ref
    for a, b in zip(p_dev, p_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_finetune_example_runs():
    cmd = [sys.executable, str(ROOT / "examples" / "hf_finetune.py"), "--steps", "12", "--batch", "4", "--ctx", "32",
           "--sample", "8"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    last = r.stdout.strip().splitlines()[-1]  # "loss A -> B"
    first, final = (float(t) for t in last.split()[1::2])
    assert final < first, r.stdout
    assert "sample:" in r.stdout


def test_static_cache_generate_compiles_once():
    # transformers compiles the decode step on tpu when the cache is static: one capture, then
    # one replay per token, and the tokens are CPU's greedy tokens.
    from torch_tpu._internal import compile as tpu_compile

    m = _tiny_llama().eval()
    ids = torch.randint(0, 64, (1, 5), generator=torch.Generator().manual_seed(1))
    want = m.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=0)
    m.to("tpu")
    with torch_tpu.precision(HIGHEST):
        first = m.generate(ids.to("tpu"), max_new_tokens=10, do_sample=False, pad_token_id=0,
                           cache_implementation="static")
        s1 = tpu_compile.stats()
        again = m.generate(ids.to("tpu"), max_new_tokens=10, do_sample=False, pad_token_id=0,
                           cache_implementation="static")
        s2 = tpu_compile.stats()
    assert torch.equal(first.cpu(), want) and torch.equal(again.cpu(), want)
    assert s2["captures"] == s1["captures"], (s1, s2)
    assert s2["replays"] - s1["replays"] >= 9  # the decode steps replay the captured graph


def test_device_map_auto_and_accelerator_pick_tpu(checkpoint):
    """accelerate finds tpu as it finds cuda (torch_tpu/_internal/accelerate_hooks.py):
    device_map="auto" places every weight on tpu (integer device 0 is tpu:0), infer_auto_device_map
    sees tpu memory, and Accelerator().device is tpu."""
    import accelerate
    from accelerate.utils import get_max_memory

    mem = get_max_memory()
    assert 0 in mem and mem[0] > 0 and "cpu" in mem and list(mem)[0] == 0, mem
    assert get_max_memory({0: "1GiB", "cpu": "2GiB"}) == {0: 1 << 30, "cpu": 2 << 30}
    with pytest.raises(ValueError, match="tpu index"):
        get_max_memory({5: "1GiB"})
    dev = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, device_map="auto")
    assert {p.device for p in dev.parameters()} == {torch.device("tpu", 0)}
    ref = transformers.AutoModelForCausalLM.from_pretrained(checkpoint)
    ids = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(4))
    with torch.no_grad(), torch_tpu.precision(HIGHEST):
        torch.testing.assert_close(dev(ids.to("tpu")).logits.cpu(), ref(ids).logits, rtol=1e-4, atol=1e-4)
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        assert accelerate.Accelerator().device == torch.device("tpu", 0)
        AcceleratorState._reset_state(reset_partial_state=True)
        assert accelerate.Accelerator(cpu=True).device == torch.device("cpu")
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_hf_trainer_trains_on_tpu_like_cpu(checkpoint, tmp_path):
    """transformers' Trainer takes its device from accelerate: on tpu without being told, with
    the losses of a CPU run (use_cpu=True) of the same data and seed."""
    ids = torch.randint(0, 64, (16, 12), generator=torch.Generator().manual_seed(5))

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return len(ids)

        def __getitem__(self, i):
            return {"input_ids": ids[i], "labels": ids[i]}

    losses = {}
    for name, use_cpu in (("cpu", True), ("tpu", False)):
        model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint)
        args = transformers.TrainingArguments(output_dir=str(tmp_path / name), per_device_train_batch_size=4,
                                              max_steps=4, learning_rate=1e-3, logging_steps=1, report_to=[],
                                              save_strategy="no", use_cpu=use_cpu, seed=0, dataloader_num_workers=0)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=Data())
        assert trainer.args.device.type == name
        with torch_tpu.precision(HIGHEST):
            trainer.train()
        assert next(model.parameters()).device.type == name
        losses[name] = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses["tpu"]) == 4
    torch.testing.assert_close(losses["tpu"], losses["cpu"], rtol=1e-4, atol=1e-4)
