"""Train a small MLP on "tpu" and on CPU from the same seed and weights; print both losses.

    tools/in-env python3 examples/mlp.py [--steps 50] [--precision highest]
"""
import argparse
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu  # noqa: F401  (registers the "tpu" device)


class MLP(nn.Module):
    def __init__(self, d_in=32, d_hidden=128, n_classes=10, p_drop=0.1):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.drop = nn.Dropout(p_drop)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, n_classes)

    def forward(self, x):
        x = self.drop(F.gelu(self.norm(self.fc1(x))))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def make_data(n=512, d_in=32, n_classes=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    w = torch.randn(d_in, n_classes, generator=g)
    y = (x @ w + 0.1 * torch.randn(n, n_classes, generator=g)).argmax(dim=1)
    return x, y


def train(model, x, y, device, steps, batch=64):
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    x, y = x.to(device), y.to(device)
    losses = []
    for step in range(steps):
        i = (step * batch) % x.shape[0]
        xb, yb = x[i:i + batch], y[i:i + batch]
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--precision", default="highest", choices=["default", "high", "highest"])
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="dropout p (CPU and tpu RNGs differ, so losses match only with 0)")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = MLP(p_drop=args.dropout)
    x, y = make_data()
    torch_tpu.set_matmul_precision(args.precision)
    t0 = time.perf_counter()
    tpu_losses = train(copy.deepcopy(model), x, y, "tpu", args.steps)
    t_tpu = time.perf_counter() - t0
    t0 = time.perf_counter()
    cpu_losses = train(copy.deepcopy(model), x, y, "cpu", args.steps)
    t_cpu = time.perf_counter() - t0
    print(f"MLP on tpu vs cpu, precision={args.precision}, {args.steps} AdamW steps")
    print(f"{'step':>5} {'tpu loss':>12} {'cpu loss':>12} {'rel diff':>10}")
    for i, (a, b) in enumerate(zip(tpu_losses, cpu_losses)):
        print(f"{i:5d} {a:12.6f} {b:12.6f} {abs(a - b) / max(abs(b), 1e-12):10.2e}")
    print(f"time: tpu {t_tpu:.2f} s, cpu {t_cpu:.2f} s")
    print(torch_tpu.metrics_report())


if __name__ == "__main__":
    main()
