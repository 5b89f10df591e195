"""Forward + backward of single layers on the train steps' shapes: ember vs PyTorch.

Where a train step's ratio comes from: each row times one layer (or function) and its
backward on the shapes the steps in ``train_steps.py`` use, the two frameworks measured in
alternation in the same process.
"""

import time

import numpy as np


def _tensor(lib, shape, seed):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return lib.tensor(values, requires_grad=True)


def _module(make, shape):
    """A row for ``make(lib)`` applied to one input of ``shape``."""
    def build(lib):
        return make(lib), [_tensor(lib, shape, 0)]
    return build


def _sdpa(lib):
    qkv = [_tensor(lib, (16, 4, 64, 32), seed) for seed in range(3)]
    return (lambda q, k, v: lib.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True)), qkv


LAYERS = {
    "GELU 16x64x512": _module(lambda lib: lib.nn.GELU(), (16, 64, 512)),
    "LayerNorm(128) 16x64x128": _module(lambda lib: lib.nn.LayerNorm(128), (16, 64, 128)),
    "causal SDPA 16x4x64x32": _sdpa,
    "BatchNorm2d(32) 32x32x32x32": _module(lambda lib: lib.nn.BatchNorm2d(32),
                                           (32, 32, 32, 32)),
    "Conv2d 32->32 3x3, 32x32x32x32": _module(
        lambda lib: lib.nn.Conv2d(32, 32, 3, padding=1, bias=False), (32, 32, 32, 32)),
    "Conv2d 6->16 5x5, 64x6x12x12": _module(lambda lib: lib.nn.Conv2d(6, 16, 5),
                                            (64, 6, 12, 12)),
    "MaxPool2d(2) 64x6x24x24": _module(lambda lib: lib.nn.MaxPool2d(2), (64, 6, 24, 24)),
    "LSTM 2x256, 35x20x256": _module(
        lambda lib: (lambda x, rnn=lib.nn.LSTM(256, 256, num_layers=2): rnn(x)[0]),
        (35, 20, 256)),
}


def _step(lib, build):
    fn, inputs = build(lib)

    def step():
        out = fn(*inputs)
        out.backward(lib.ones_like(out))
        for t in inputs:
            t.grad = None
    return step


def _best_ms(fn, repeat=10):
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def rows(ember, torch, rounds=3):
    """[(label, ember ms, torch ms or None)] for every layer."""
    table = []
    for label, build in LAYERS.items():
        ours = _step(ember, build)
        theirs = _step(torch, build) if torch else None
        best_ours = best_theirs = float("inf")
        for _ in range(rounds):
            best_ours = min(best_ours, _best_ms(ours))
            if theirs is not None:
                best_theirs = min(best_theirs, _best_ms(theirs))
        table.append((label, best_ours, best_theirs if theirs is not None else None))
    return table
