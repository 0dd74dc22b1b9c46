"""Train a small character-level GPT on "tpu" and sample from it.

    tools/in-env python3 examples/gpt.py [--steps 200] [--batch 8] [--device tpu]

The model is plain PyTorch: token + position Embedding, pre-norm blocks (LayerNorm or
RMSNorm, causal scaled_dot_product_attention, GELU MLP), a head tied to the token
embedding; AdamW(foreach=True) and clip_grad_norm_. Data: examples/data/tiny_corpus.txt.
"""
import argparse
import dataclasses
import math
import pathlib
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu  # noqa: F401  (registers the "tpu" device)

DATA = pathlib.Path(__file__).resolve().parent / "data" / "tiny_corpus.txt"


@dataclasses.dataclass
class Config:
    vocab: int = 96
    ctx: int = 128
    width: int = 128
    layers: int = 4
    heads: int = 4
    norm: str = "layer"   # "layer" or "rms"
    dropout: float = 0.0
    tied: bool = True


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.heads = c.heads
        self.qkv = nn.Linear(c.width, 3 * c.width)
        self.proj = nn.Linear(c.width, c.width)
        self.dropout = c.dropout

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(x).split(w, dim=2)
        q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, w))


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        norm = nn.LayerNorm if c.norm == "layer" else nn.RMSNorm
        self.n1, self.n2 = norm(c.width), norm(c.width)
        self.attn = Attention(c)
        self.fc = nn.Linear(c.width, 4 * c.width)
        self.out = nn.Linear(4 * c.width, c.width)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.out(F.gelu(self.fc(self.n2(x))))


class GPT(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.tok = nn.Embedding(c.vocab, c.width)
        self.pos = nn.Embedding(c.ctx, c.width)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = nn.LayerNorm(c.width) if c.norm == "layer" else nn.RMSNorm(c.width)
        # Tied: the head reads tok.weight in forward. (Assigning head.weight = tok.weight does
        # not survive .to("tpu"): Module._apply makes a new Parameter per module for devices
        # outside PyTorch's "dense" set, which includes PrivateUse1.)
        self.head = None if c.tied else nn.Linear(c.width, c.vocab, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None, label_smoothing=0.0):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        logits = F.linear(x, self.tok.weight) if self.head is None else self.head(x)
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1),
                               ignore_index=-1, label_smoothing=label_smoothing)
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, n, temperature=1.0, top_k=None, generator=None):
        """Appends n sampled tokens to idx (B, T). The model sees the last ctx tokens, as
        `self(idx[:, -ctx:])[:, -1]` would, but through few shapes: the tokens live in one
        buffer, and while the context is shorter than ctx the model reads a window padded up to
        the next power of two (causal attention: the padding after the real tokens does not
        change their logits). Each new input shape is a new compiled program on an accelerator
        (seconds on a TPU); this way a whole sample needs about log2(ctx) + 1 of them."""
        b, t = idx.shape
        buf = torch.zeros(b, t + n + self.c.ctx, dtype=idx.dtype, device=idx.device)
        buf[:, :t] = idx
        for _ in range(n):
            if t >= self.c.ctx:
                start, width = t - self.c.ctx, self.c.ctx
            else:
                start, width = 0, min(1 << (t - 1).bit_length(), self.c.ctx)
            logits = self(buf[:, start:start + width])[:, t - start - 1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, top_k)
                logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
            probs = F.softmax(logits, dim=-1)
            buf[:, t] = torch.multinomial(probs, 1, generator=generator)[:, 0]
            t += 1
        return buf[:, :t]


class Chars:
    """Character vocabulary of a text (ids in order of first code point)."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {ch: i for i, ch in enumerate(self.chars)}

    def encode(self, s):
        return torch.tensor([self.index[ch] for ch in s], dtype=torch.long)

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


def load_data(path=DATA):
    text = path.read_text(encoding="utf-8")
    chars = Chars(text)
    return chars, chars.encode(text)


def get_batch(data, batch, ctx, gen):
    ix = torch.randint(0, len(data) - ctx - 1, (batch,), generator=gen)
    x = torch.stack([data[i:i + ctx] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + ctx] for i in ix])
    return x, y


def make_optimizer(model, lr=3e-3, weight_decay=0.1):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), foreach=True)


def train_step(model, opt, x, y, clip=1.0, label_smoothing=0.0):
    _, loss = model(x, y, label_smoothing=label_smoothing)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip, foreach=True)
    opt.step()
    return loss


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--device", default="tpu")
    ap.add_argument("--precision", default="default", choices=["default", "high", "highest"])
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=25)
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    chars, data = load_data()
    cfg = Config(vocab=len(chars.chars))
    model = GPT(cfg).to(args.device)
    opt = make_optimizer(model)
    sched = lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / args.steps))  # noqa: E731
    gen = torch.Generator().manual_seed(1)
    torch_tpu.set_matmul_precision(args.precision)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"GPT: {cfg.layers} layers, {cfg.heads} heads, width {cfg.width}, ctx {cfg.ctx}, "
          f"vocab {cfg.vocab}, {n_params / 1e6:.2f} M params; {len(data)} chars of text; "
          f"device {args.device}, precision {args.precision}")
    t_start = time.perf_counter()
    t0, tokens = time.perf_counter(), 0
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = 3e-3 * sched(step)
        x, y = get_batch(data, args.batch, cfg.ctx, gen)
        loss = train_step(model, opt, x.to(args.device), y.to(args.device))
        tokens += x.numel()
        if step % args.log_every == 0 or step == args.steps - 1:
            lv = loss.item()  # sync point
            dt = time.perf_counter() - t0
            print(f"step {step:4d}  loss {lv:.4f}  {tokens / dt:8.0f} tokens/s", flush=True)
            t0, tokens = time.perf_counter(), 0
    print(f"trained {args.steps} steps in {time.perf_counter() - t_start:.1f} s")

    model.eval()
    prompt = chars.encode("\n").view(1, 1).to(args.device)
    sgen = torch.Generator(device=args.device).manual_seed(42)
    t1 = time.perf_counter()
    out = model.generate(prompt, args.sample, top_k=20, generator=sgen)
    text = chars.decode(out[0].tolist())
    print(f"--- sample ({args.sample} chars, {time.perf_counter() - t1:.1f} s) ---")
    print(text)


if __name__ == "__main__":
    main()
