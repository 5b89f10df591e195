"""A character-level GPT trained on Python's own source code, then sampled.

    python examples/char_gpt.py [--steps 300] [--module argparse] [--device cuda] [--amp bfloat16]

The text is the source of a standard-library module, so nothing is downloaded. The model is a
small decoder-only transformer: token and position embeddings, pre-LayerNorm blocks of causal
self-attention (``F.scaled_dot_product_attention``) and an MLP. Training uses AdamW with weight
decay on the 2-D weights only, gradient clipping and a warmup-then-cosine learning rate, on
the CPU or a GPU, optionally in mixed precision (autocast, with a GradScaler for float16).
Written exactly as for PyTorch: ``import ember as torch`` would be the only change.
"""

import argparse
import functools
import importlib
import inspect
import math
import time

import ember
from ember import nn
from ember.nn import functional as F


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which each position sees only itself and the past."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A decoder-only transformer over a character vocabulary."""

    def __init__(self, vocab, context, dim=64, heads=4, layers=2):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        positions = ember.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(positions)
        return self.head(self.ln(self.blocks(x)))

    @ember.no_grad()
    def generate(self, idx, length, temperature=0.8, generator=None):
        """Append ``length`` sampled tokens to ``idx`` (batch, time)."""
        self.eval()
        for _ in range(length):
            logits = self(idx[:, -self.context:])[:, -1] / temperature
            probs = F.softmax(logits, dim=-1)
            idx = ember.cat([idx, ember.multinomial(probs, 1, generator=generator)], dim=1)
        return idx


def make_optimizer(model, lr, weight_decay):
    """AdamW that decays the 2-D weights (matmuls, embeddings) but not biases or norms."""
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return ember.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def warmup_cosine(steps, warmup):
    """LambdaLR factor: linear warmup, then cosine decay to 10% of the peak."""
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return factor


def parse_args(argv=None):
    """The command line: a flag for every hyperparameter."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--module", default="argparse", help="standard-library module to learn")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--context", type=int, default=64, help="characters the model sees")
    p.add_argument("--dim", type=int, default=64, help="embedding width")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping threshold")
    p.add_argument("--sample", type=int, default=300, help="characters to sample at the end")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--device", default="cpu", help="cpu, or cuda (a GPU)")
    p.add_argument("--amp", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="autocast's low-precision dtype (float32: autocast off)")
    return p.parse_args(argv)


def main(argv=None):
    """Train and sample; returns the training losses and the sampled text."""
    args = parse_args(argv)
    ember.manual_seed(args.seed)
    text = inspect.getsource(importlib.import_module(args.module))
    chars = sorted(set(text))
    index = {ch: i for i, ch in enumerate(chars)}
    data = ember.tensor([index[ch] for ch in text], device=args.device)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    print(f"{len(text)} characters of {args.module}.py, vocabulary of {len(chars)}")

    def batch(source):
        starts = ember.randint(len(source) - args.context, (args.batch_size, 1),
                               device=source.device)
        chunks = source[starts + ember.arange(args.context + 1, device=source.device)]
        return chunks[:, :-1], chunks[:, 1:]          # the target is the next character

    model = GPT(len(chars), args.context, args.dim, args.heads, args.layers).to(args.device)
    print(f"{sum(p.numel() for p in model.parameters())} parameters on {args.device}, "
          f"{args.amp}")
    optimizer = make_optimizer(model, args.lr, args.weight_decay)
    schedule = ember.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(args.steps, warmup=max(1, args.steps // 10)))
    device_type = ember.device(args.device).type
    autocast = functools.partial(ember.autocast, device_type, dtype=getattr(ember, args.amp),
                                 enabled=args.amp != "float32")
    scaler = ember.amp.GradScaler(device_type, enabled=args.amp == "float16")

    losses, start = [], time.perf_counter()
    for step in range(1, args.steps + 1):
        model.train()
        x, y = batch(train)
        with autocast():
            logits = model(x)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)                    # clip the true gradients
        nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        scaler.step(optimizer)
        scaler.update()
        schedule.step()
        losses.append(loss.item())
        if step % args.log_every == 0 or step == args.steps:
            model.eval()
            with ember.no_grad(), autocast():
                vx, vy = batch(val)
                vloss = F.cross_entropy(model(vx).flatten(0, 1), vy.flatten()).item()
            print(f"step {step:4d}  train loss {loss.item():.3f}  val loss {vloss:.3f}  "
                  f"lr {schedule.get_last_lr()[0]:.2e}  {time.perf_counter() - start:.1f} s")

    prompt = ember.tensor([[index[ch] for ch in "def "]], device=args.device)
    sampler = ember.Generator(args.device).manual_seed(args.seed)
    out = model.generate(prompt, args.sample, generator=sampler)
    sample = "".join(chars[i] for i in out[0].tolist())
    print("-" * 60)
    print(sample)
    return losses, sample


if __name__ == "__main__":
    main()
