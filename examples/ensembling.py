"""Model ensembling with ember.func: stack the states of several models and train and run
them all at once with vmap over functional_call (one batched call instead of a loop).

    python examples/ensembling.py [--models 5] [--steps 100]
"""

import argparse

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.func import functional_call, grad_and_value, stack_module_state, vmap


def make_model():
    return nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))


def make_data(n):
    """A noisy sine surface to regress."""
    x = ember.rand(n, 2) * 4 - 2
    y = (x[:, :1] * 2).sin() * x[:, 1:].cos() + 0.05 * ember.randn(n, 1)
    return x, y


def main(models=5, steps=100, batch=128, lr=0.2, seed=0, verbose=True):
    """Train an ensemble, each member full-batch on its own sample of the data; returns the
    mean loss per step and checks the ensemble's predictions against each model's own."""
    ember.manual_seed(seed)
    members = [make_model() for _ in range(models)]
    params, buffers = stack_module_state(members)
    params = {k: v.detach() for k, v in params.items()}
    base = members[0]

    def loss(p, b, x, y):
        return F.mse_loss(functional_call(base, (p, b), (x,)), y)
    step_fn = vmap(grad_and_value(loss))                 # one gradient per member
    x, y = make_data(models * batch)
    xs, ys = x.reshape(models, batch, 2), y.reshape(models, batch, 1)
    losses = []
    for step in range(steps):
        grads, values = step_fn(params, buffers, xs, ys)
        params = {k: p - lr * grads[k] for k, p in params.items()}
        losses.append(values.mean().item())
        if verbose and step % 25 == 0:
            print(f"step {step:3d}  mean loss {losses[-1]:.4f}  per member "
                  f"{[round(v, 3) for v in values.tolist()]}")

    x, _ = make_data(16)
    together = vmap(lambda p, b: functional_call(base, (p, b), (x,)))(params, buffers)
    for i in range(models):
        own = {k: v[i] for k, v in params.items()}
        assert ember.allclose(together[i], functional_call(base, own, (x,)), atol=1e-5)
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    losses = main(args.models, args.steps)
    print(f"mean loss {losses[0]:.4f} -> {losses[-1]:.4f}")
