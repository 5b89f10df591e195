"""Per-sample gradients with ember.func: vmap(grad(loss)) over a batch, used for DP-SGD-style
training (clip each example's gradient, then average) of a small CNN on synthetic images.

    python examples/per_sample_grads.py [--steps 30] [--batch 64]
"""

import argparse
import time

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.func import functional_call, grad, vmap


class SmallCNN(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3)
        self.conv2 = nn.Conv2d(8, 16, 3)
        self.fc = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x)).flatten(1)
        return self.fc(x)


def make_data(n, classes=4, size=14):
    """Images whose class decides which quadrant is bright, plus noise."""
    labels = ember.randint(0, classes, (n,))
    images = 0.3 * ember.randn(n, 1, size, size)
    half = size // 2
    for c in range(classes):
        rows = slice(0, half) if c < 2 else slice(half, size)
        cols = slice(0, half) if c % 2 == 0 else slice(half, size)
        mask = (labels == c).float().reshape(n, 1, 1, 1)
        images[:, :, rows, cols] += mask
    return images, labels


def per_sample_grad_fn(model):
    def loss(params, buffers, x, t):
        out = functional_call(model, (params, buffers), (x.unsqueeze(0),))
        return F.cross_entropy(out, t.unsqueeze(0))
    return loss, vmap(grad(loss), in_dims=(None, None, 0, 0))


def clipped_mean(grads, max_norm):
    """Clip each example's whole gradient to ``max_norm``, then average over the batch."""
    norms = ember.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    return {k: (g * scale.reshape((-1,) + (1,) * (g.ndim - 1))).mean(0)
            for k, g in grads.items()}


def measure(model, batch=64, repeats=3):
    """Seconds per batch of per-sample gradients: vmap vs a Python loop over examples."""
    loss, per_sample = per_sample_grad_fn(model)
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())
    x, t = make_data(batch)
    per_sample(params, buffers, x, t)                   # warm up
    start = time.perf_counter()
    for _ in range(repeats):
        per_sample(params, buffers, x, t)
    vmapped = (time.perf_counter() - start) / repeats
    start = time.perf_counter()
    for _ in range(repeats):
        [grad(loss)(params, buffers, x[i], t[i]) for i in range(batch)]
    looped = (time.perf_counter() - start) / repeats
    return vmapped, looped


def main(steps=30, batch=64, lr=0.5, max_norm=1.0, seed=0, verbose=True):
    """Train with clipped per-sample gradients; returns the loss of each step."""
    ember.manual_seed(seed)
    model = SmallCNN()
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = dict(model.named_buffers())
    _, per_sample = per_sample_grad_fn(model)
    losses = []
    for step in range(steps):
        x, t = make_data(batch)
        with ember.no_grad():
            losses.append(F.cross_entropy(functional_call(model, (params, buffers), (x,)),
                                          t).item())
        update = clipped_mean(per_sample(params, buffers, x, t), max_norm)
        params = {k: p - lr * update[k] for k, p in params.items()}
        if verbose and step % 10 == 0:
            print(f"step {step:3d}  loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    losses = main(args.steps, args.batch)
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    vmapped, looped = measure(SmallCNN(), args.batch)
    print(f"per-sample gradients of {args.batch} examples: vmap {vmapped * 1e3:.1f} ms, "
          f"loop {looped * 1e3:.1f} ms ({looped / vmapped:.1f}x)")
