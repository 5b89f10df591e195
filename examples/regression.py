"""Fit a polynomial to noisy samples of sin(x) with nothing but tensors and autograd.

    python examples/regression.py [--degree 3] [--steps 500]

No nn, no optim: the coefficients are a leaf tensor with requires_grad=True, the loss's
``backward()`` fills ``.grad``, and the update is written by hand under ``no_grad``. The
closed-form least-squares fit (``ember.linalg.lstsq``) is printed for comparison.
"""

import argparse
import math

import ember


def parse_args(argv=None):
    """The command line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--degree", type=int, default=3, help="degree of the polynomial")
    p.add_argument("--points", type=int, default=200, help="noisy samples to fit")
    p.add_argument("--steps", type=int, default=500, help="gradient-descent steps")
    p.add_argument("--lr", type=float, default=0.5, help="step size")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=100)
    return p.parse_args(argv)


def polynomial(coefs):
    """``c0 + c1 u + c2 u^2 + ...`` as text."""
    powers = ["", " u", *(f" u^{k}" for k in range(2, len(coefs)))]
    return " ".join(f"{c:+.4f}{p}" for c, p in zip(coefs, powers))


def main(argv=None):
    """Fit by gradient descent; returns the losses, the fitted and the least-squares
    coefficients."""
    args = parse_args(argv)
    ember.manual_seed(args.seed)
    x = ember.linspace(-math.pi, math.pi, args.points)
    y = ember.sin(x) + 0.1 * ember.randn(args.points)
    # features in [-1, 1], so that one step size suits every power
    features = ember.stack([(x / math.pi) ** k for k in range(args.degree + 1)], dim=1)

    coefs = ember.zeros(args.degree + 1, requires_grad=True)
    velocity = ember.zeros_like(coefs)
    losses = []
    for step in range(1, args.steps + 1):
        loss = ((features @ coefs - y) ** 2).mean()
        loss.backward()
        with ember.no_grad():                 # the update itself must not be recorded
            velocity.mul_(args.momentum).add_(coefs.grad)
            coefs.sub_(args.lr * velocity)
        coefs.grad = None
        losses.append(loss.item())
        if step % args.log_every == 0 or step == 1:
            print(f"step {step:5d}  loss {losses[-1]:.5f}")

    exact = ember.linalg.lstsq(features, y[:, None]).solution[:, 0]
    exact_loss = ((features @ exact - y) ** 2).mean().item()
    print(f"gradient descent: {polynomial(coefs.tolist())}   (u = x / pi)")
    print(f"least squares:    {polynomial(exact.tolist())}   (loss {exact_loss:.5f})")
    return losses, coefs.detach(), exact


if __name__ == "__main__":
    main()
