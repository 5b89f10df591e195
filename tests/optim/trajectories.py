"""Run an optimizer on fixed gradient sequences, and NumPy transcriptions of PyTorch's
documented update rules to compare it with."""

import ml_dtypes
import numpy as np

import ember

SHAPES = ((3, 4), (4,), ())
STEPS = 6


def gradient_sequence(seed=0, shapes=SHAPES, steps=STEPS, dtype=np.float64, sparse=False):
    """``steps`` lists of gradients (one per parameter), reproducible from ``seed``; with
    ``sparse`` about a third of the entries are zero."""
    gen = np.random.default_rng(seed)
    out = [[gen.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]
    if sparse:
        out = [[g * (gen.random(g.shape) > 0.35) for g in gs] for gs in out]
    return out


def initial_params(seed=1, shapes=SHAPES, dtype=np.float64):
    gen = np.random.default_rng(seed)
    return [gen.standard_normal(s).astype(dtype) for s in shapes]


def run_ember(make_optimizer, params0, grads, sparse=False):
    """Parameter values after each step of ``make_optimizer(params)`` fed ``grads`` (as
    sparse tensors holding their nonzero entries if ``sparse``)."""
    params = [ember.nn.Parameter(ember.tensor(p.copy())) for p in params0]
    opt = make_optimizer(params)
    history = []
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = ember.tensor(g.copy()).to_sparse() if sparse else ember.tensor(g.copy())
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


def adamax(x, g, s, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * x
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["u"] = np.maximum(b2 * s.get("u", 0), np.abs(g) + eps)
    return x - lr / (1 - b1 ** t) * s["m"] / s["u"]


def nadam(x, g, s, t, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
          momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    if weight_decay:
        if decoupled_weight_decay:
            x = x * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * x
    mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    s["prod"] = s.get("prod", 1.0) * mu
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g * g
    m_hat = mu_next * s["m"] / (1 - s["prod"] * mu_next) + (1 - mu) * g / (1 - s["prod"])
    v_hat = s["v"] / (1 - b2 ** t)
    return x - lr * m_hat / (np.sqrt(v_hat) + eps)


def radam(x, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
          decoupled_weight_decay=False, maximize=False):
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
    rho_inf = 2 / (1 - b2) - 1
    rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho <= 5:
        return x - lr * m_hat
    r = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
    adaptive = np.sqrt(1 - b2 ** t) / (np.sqrt(s["v"]) + eps)
    return x - lr * m_hat * r * adaptive


def adagrad(x, g, s, t, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
            eps=1e-10, maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * x
    s["sum"] = s.get("sum", initial_accumulator_value) + g * g
    return x - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s["sum"]) + eps)


def adadelta(x, g, s, t, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * x
    s["v"] = rho * s.get("v", 0) + (1 - rho) * g * g
    delta = np.sqrt(s.get("u", 0) + eps) / np.sqrt(s["v"] + eps) * g
    s["u"] = rho * s.get("u", 0) + (1 - rho) * delta * delta
    return x - lr * delta


def rmsprop(x, g, s, t, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
            centered=False, maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * x
    s["v"] = alpha * s.get("v", 0) + (1 - alpha) * g * g
    v = s["v"]
    if centered:
        s["gbar"] = alpha * s.get("gbar", 0) + (1 - alpha) * g
        v = v - s["gbar"] ** 2
    step = g / (np.sqrt(v) + eps)
    if momentum:
        s["b"] = momentum * s.get("b", 0) + step
        step = s["b"]
    return x - lr * step


def rprop(x, g, s, t, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    g = -g if maximize else g
    prev = s.get("prev", np.zeros_like(g))
    size = s.get("size", np.full_like(g, lr))
    sign = np.sign(g * prev)
    size = np.clip(size * np.where(sign > 0, etas[1], np.where(sign < 0, etas[0], 1.0)),
                   *step_sizes)
    g = np.where(sign < 0, 0, g)
    s["prev"], s["size"] = g, size
    return x - np.sign(g) * size


def asgd(x, g, s, t, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * x
    eta, mu = s.get("eta", lr), s.get("mu", 1.0)
    x = x * (1 - lambd * eta) - eta * g
    s["ax"] = s["ax"] + (x - s["ax"]) * mu if mu != 1 else x.copy()
    s["eta"] = lr / (1 + lambd * lr * t) ** alpha
    s["mu"] = 1 / max(1, t - t0)
    return x


def sparse_adam(x, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
    b1, b2 = betas
    g = -g if maximize else g
    touched = g != 0
    m, v = s.get("m", np.zeros_like(x)), s.get("v", np.zeros_like(x))
    s["m"] = np.where(touched, b1 * m + (1 - b1) * g, m)
    s["v"] = np.where(touched, b2 * v + (1 - b2) * g * g, v)
    step = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * s["m"] / (np.sqrt(s["v"]) + eps)
    return np.where(touched, x - step, x)


def _lerp(start, end, weight):
    """PyTorch's two-sided lerp (exact at both ends), which its Muon and Adafactor use."""
    return start + weight * (end - start) if weight < 0.5 else end - (end - start) * (1 - weight)


def _bf16(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def newton_schulz(u, coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, steps=5):
    """PyTorch's orthogonalization, in bfloat16: every matrix rounds to bfloat16 once per
    line, products summing in float32; tall matrices are transposed."""
    a, b, c = coefficients
    x = _bf16(u.T if u.shape[0] > u.shape[1] else u)
    x = _bf16(x / _bf16(max(_bf16(np.sqrt(np.sum(x * x))), np.float32(eps))))
    for _ in range(steps):
        gram = _bf16(x @ x.T)
        x = _bf16(a * x + _bf16(b * gram + c * (gram @ gram)) @ x)
    return x.T if u.shape[0] > u.shape[1] else x


def muon(x, g, s, t, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
         ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None):
    # the buffer is PyTorch's moving average (1 - mu) * (the documented sum mu B + g): the
    # same direction, which is all the orthogonalization keeps
    s["b"] = _lerp(s.get("b", np.zeros_like(x)), g, 1 - momentum)
    u = _lerp(g, s["b"], momentum) if nesterov else s["b"]
    o = newton_schulz(u, ns_coefficients, eps, ns_steps).astype(x.dtype)
    rows, cols = x.shape
    if adjust_lr_fn == "match_rms_adamw":
        adjusted = 0.2 * np.sqrt(max(rows, cols)) * lr
    else:
        adjusted = lr * np.sqrt(max(1, rows / cols))
    return x * (1 - lr * weight_decay) - adjusted * o


def adafactor(x, g, s, t, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
              weight_decay=0.0, maximize=False):
    eps1 = np.finfo(x.dtype).eps if eps[0] is None else eps[0]
    g = -g if maximize else g
    beta2 = 1 - t ** beta2_decay
    alpha = max(eps[1], np.sqrt(np.mean(x * x))) * min(lr, 1 / np.sqrt(t))
    x = x * (1 - lr * weight_decay)
    if x.ndim > 1:
        s["r"] = _lerp(s.get("r", 0), np.mean(g * g, axis=-1, keepdims=True), 1 - beta2)
        s["c"] = _lerp(s.get("c", 0), np.mean(g * g, axis=-2, keepdims=True), 1 - beta2)
        v = s["r"] * s["c"] / np.maximum(np.mean(s["r"], axis=-2, keepdims=True), eps1)
    else:
        v = s["v"] = _lerp(s.get("v", 0), g * g, 1 - beta2)
    u = g / np.maximum(np.sqrt(v), eps1)
    u = u / max(1, np.sqrt(np.mean(u * u)) / d)
    return x - alpha * u
