"""Greedy decoding speed of a small transformers causal LM: `python -m torch_tpu.bench generate
[--model llama] [--tokens 32] [--width 128] [--layers 2]`.

Tokens/s in one run for: PyTorch CPU eager (the default dynamic cache), tpu strict eager
(dynamic cache), and tpu with a static KV cache, which transformers' generate compiles with
torch.compile on tpu (the decode step is captured once and replayed per token). Prints the
captures each run adds: a recompile per token would show as one capture per token."""
import argparse
import time

import torch

import torch_tpu  # noqa: F401
from torch_tpu._internal import compile as tpu_compile
from torch_tpu.bench._report import Row


def _model(kind, width, layers):
    import transformers as tf

    common = dict(vocab_size=256, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    cfg = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config, "mistral": tf.MistralConfig}[kind](**common)
    torch.manual_seed(0)
    return tf.AutoModelForCausalLM.from_config(cfg).eval()


def _rate(model, ids, tokens, **kw):
    def run():
        return model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0,
                              **kw)

    run()  # warm up (compiles, records)
    if ids.device.type == "tpu":
        torch.tpu.synchronize()
    before = tpu_compile.stats()["captures"]
    best, out = float("inf"), None
    for _ in range(3):
        t0 = time.perf_counter()
        out = run()
        out.cpu()
        best = min(best, time.perf_counter() - t0)
    return tokens / best, tpu_compile.stats()["captures"] - before, out.cpu()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench generate")
    ap.add_argument("--model", default="llama", choices=["llama", "qwen2", "mistral"])
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=8)
    args = ap.parse_args(argv)
    m = _model(args.model, args.width, args.layers)
    ids = torch.randint(0, 256, (1, args.prompt), generator=torch.Generator().manual_seed(1))
    cpu_rate, _, cpu_out = _rate(m, ids, args.tokens)
    m.to("tpu")
    with torch_tpu.precision(torch_tpu.Precision.HIGHEST):
        eager_rate, _, eager_out = _rate(m, ids.to("tpu"), args.tokens)
        static_rate, captures, static_out = _rate(m, ids.to("tpu"), args.tokens, cache_implementation="static")
    print(f"greedy decode, {args.model} width {args.width} x {args.layers} layers, {args.tokens} new tokens "
          f"(best of 3, torch {torch.__version__})")
    print(f"{'path':<34} {'tokens/s':>9} {'vs CPU':>7}")
    print(f"{'PyTorch CPU eager':<34} {cpu_rate:9.1f} {1.0:7.2f}")
    print(f"{'tpu strict eager (dynamic cache)':<34} {eager_rate:9.1f} {eager_rate / cpu_rate:7.2f}")
    print(f"{'tpu compiled (static cache)':<34} {static_rate:9.1f} {static_rate / cpu_rate:7.2f}")
    print(f"captures per timed generate: {captures / 3:.1f} (0 = no recompile per token); "
          f"tokens equal CPU: eager {torch.equal(eager_out, cpu_out)}, static {torch.equal(static_out, cpu_out)}")
    what = f"{args.model} greedy decode, {args.tokens} tokens"
    return [Row("generate", f"{what}, strict eager (dynamic cache)", eager_rate, cpu_rate, unit="tokens/s", higher_is_better=True),
            Row("generate", f"{what}, compiled (static cache)", static_rate, cpu_rate, unit="tokens/s", higher_is_better=True)]
