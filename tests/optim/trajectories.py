"""Run an optimizer on fixed gradient sequences, and NumPy transcriptions of PyTorch's
documented update rules to compare it with."""

import numpy as np

import ember

SHAPES = ((3, 4), (4,), ())
STEPS = 6


def gradient_sequence(seed=0, shapes=SHAPES, steps=STEPS, dtype=np.float64):
    """``steps`` lists of gradients (one per parameter), reproducible from ``seed``."""
    gen = np.random.default_rng(seed)
    return [[gen.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]


def initial_params(seed=1, shapes=SHAPES, dtype=np.float64):
    gen = np.random.default_rng(seed)
    return [gen.standard_normal(s).astype(dtype) for s in shapes]


def run_ember(make_optimizer, params0, grads):
    """Parameter values after each step of ``make_optimizer(params)`` fed ``grads``."""
    params = [ember.nn.Parameter(ember.tensor(p.copy())) for p in params0]
    opt = make_optimizer(params)
    history = []
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = ember.tensor(g.copy())
        opt.step()
        history.append([p.detach().numpy().copy() for p in params])
    return history, opt


def run_reference(update, params0, grads, **options):
    """The same trajectory from ``update(x, g, state, t, **options) -> new x``."""
    xs = [p.copy() for p in params0]
    states = [{} for _ in xs]
    history = []
    for t, step_grads in enumerate(grads, start=1):
        xs = [update(x, g, s, t, **options) for x, g, s in zip(xs, step_grads, states)]
        history.append([x.copy() for x in xs])
    return history


# ----- transcriptions of the documented algorithms -------------------------------------------

def sgd(x, g, s, t, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
        maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * x
    if momentum:
        s["b"] = g.copy() if t == 1 else momentum * s["b"] + (1 - dampening) * g
        g = g + momentum * s["b"] if nesterov else s["b"]
    return x - lr * g


def adam(x, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
         maximize=False, decoupled_weight_decay=False):
    b1, b2 = betas
    g = -g if maximize else g
    if weight_decay:
        if decoupled_weight_decay:
            x = x * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * x
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
    m_hat = s["m"] / (1 - b1 ** t)
    v = s["v"]
    if amsgrad:
        v = s["vmax"] = np.maximum(s.get("vmax", 0), v)
    v_hat = v / (1 - b2 ** t)
    return x - lr * m_hat / (np.sqrt(v_hat) + eps)
