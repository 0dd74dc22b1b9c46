"""Fine-tune a small Hugging Face causal LM on "tpu" and sample from it.

    tools/in-env python3 examples/hf_finetune.py [--steps 60] [--checkpoint DIR] [--model llama]

The model is transformers' own class (Llama, Qwen2 or GPT-2), built from a tiny config (no
hub access is needed) or loaded from a local checkpoint with
`from_pretrained(DIR, device_map="tpu", dtype=...)`. Training: AdamW, bf16 autocast
(`torch.autocast("tpu")`), next-character prediction on examples/data/tiny_corpus.txt.
Prints the loss as it falls and a greedy sample.
"""
import argparse
import pathlib
import time

import torch

import torch_tpu  # noqa: F401  (registers the "tpu" device)

DATA = pathlib.Path(__file__).resolve().parent / "data" / "tiny_corpus.txt"


def tiny_model(kind: str, vocab: int):
    import transformers as tf

    common = dict(vocab_size=vocab, tie_word_embeddings=True)
    if kind == "llama":
        cfg = tf.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, max_position_embeddings=256, **common)
    elif kind == "qwen2":
        cfg = tf.Qwen2Config(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, max_position_embeddings=256, **common)
    elif kind == "gpt2":
        cfg = tf.GPT2Config(n_embd=128, n_layer=2, n_head=4, n_positions=256, resid_pdrop=0.0, embd_pdrop=0.0,
                            attn_pdrop=0.0, **common)
    else:
        raise SystemExit(f"[hf_finetune] unknown --model; got {kind!r}, expected llama, qwen2 or gpt2")
    return tf.AutoModelForCausalLM.from_config(cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--model", default="llama")
    ap.add_argument("--checkpoint", help="a local directory saved with save_pretrained")
    ap.add_argument("--device", default="tpu")
    ap.add_argument("--sample", type=int, default=48, help="characters to generate")
    args = ap.parse_args()

    text = DATA.read_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    vocab = 128  # >= len(chars): room for the tiny config's embedding
    torch.manual_seed(0)

    if args.checkpoint:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(args.checkpoint, device_map=args.device, dtype=torch.float32)
    else:
        model = tiny_model(args.model, vocab).to(args.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{type(model).__name__}: {n_params / 1e6:.2f}M parameters on {args.device}")

    g = torch.Generator().manual_seed(1)
    losses, t0 = [], time.time()
    for step in range(1, args.steps + 1):
        ix = torch.randint(0, len(data) - args.ctx - 1, (args.batch,), generator=g)
        x = torch.stack([data[i:i + args.ctx] for i in ix]).to(args.device)
        with torch.autocast(args.device, dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step == 1 or step % 10 == 0 or step == args.steps:
            losses.append(loss.item())
            print(f"step {step:4d}  loss {losses[-1]:.3f}  ({time.time() - t0:.1f}s)")

    model.eval()
    prompt = torch.tensor([[stoi[c] for c in "The "]], device=args.device)
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=args.sample, do_sample=False, pad_token_id=0)
    sample = "".join(chars[i] if i < len(chars) else "?" for i in out[0].tolist())
    print("sample:", repr(sample))
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}")


if __name__ == "__main__":
    main()
