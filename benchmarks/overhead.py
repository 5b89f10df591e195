"""Per-op overhead on tiny tensors and training steps of small models: ember vs PyTorch.

Prints microseconds per call for each workload, for ember and (when it is importable)
PyTorch in the same process, and their ratio. Run with ``make bench``. Both frameworks get
the same thread count (2 by default; EMBER_BENCH_THREADS to change it).
"""

import argparse
import os
import timeit

THREADS = int(os.environ.get("EMBER_BENCH_THREADS", "2"))
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402  (after the thread settings)

import ember  # noqa: E402
ember.set_num_threads(THREADS)
import checkpoints  # noqa: E402
import data_loading  # noqa: E402
import layers  # noqa: E402
import memory  # noqa: E402
from train_steps import WORKLOADS as TRAIN_STEPS  # noqa: E402

try:
    import torch  # noqa: E402
    torch.set_num_threads(THREADS)
except ImportError:
    torch = None


def tiny_workloads(lib, requires_grad):
    """{name: zero-argument callable} of tiny-tensor ops for ``lib`` (ember or torch)."""
    rg = dict(requires_grad=requires_grad)
    a = lib.ones(8, 8, **rg)
    b = lib.ones(8, 8)
    v = lib.ones(16, **rg)
    idx = lib.tensor([0, 2, 4])
    return {
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "sum": lambda: a.sum(),
        "matmul 8x8": lambda: a @ b,
        "reshape": lambda: a.reshape(64),
        "index [1:3]": lambda: v[1:3],
        "index [tensor]": lambda: v[idx],
        "tanh": lambda: a.tanh(),
    }


def backward_workload(lib):
    """One backward pass through a chain of 10 small ops (per-node engine cost)."""
    x = lib.ones(8, 8, requires_grad=True)

    def step():
        y = x
        for _ in range(10):
            y = y * 1.0001
        y.sum().backward()
    return step


def mlp_workload(lib):
    """Forward and backward of a 3-layer MLP (tanh) on a 64x256 batch."""
    gen = np.random.default_rng(0)

    def param(*shape):
        return lib.tensor(gen.standard_normal(shape).astype(np.float32) * 0.05,
                          requires_grad=True)
    w1, w2, w3 = param(256, 256), param(256, 256), param(256, 10)
    x = lib.tensor(gen.standard_normal((64, 256)).astype(np.float32))

    def step():
        h = (x @ w1).tanh()
        h = (h @ w2).tanh()
        loss = (h @ w3).pow(2).mean()
        loss.backward()
        for w in (w1, w2, w3):
            w.grad = None
    return step


def time_us(fn, min_time=0.2):
    """Best of 5 runs of the mean time per call, in microseconds."""
    fn()
    number = 1
    while timeit.timeit(fn, number=number) < min_time / 5:
        number *= 2
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def paired(ours, theirs, min_time, rounds=3):
    """Best times of two callables measured in alternation, so that load on a shared machine
    hits both alike."""
    best_ours = best_theirs = float("inf")
    for _ in range(rounds):
        best_ours = min(best_ours, time_us(ours, min_time))
        if theirs is not None:
            best_theirs = min(best_theirs, time_us(theirs, min_time))
    return best_ours, (None if theirs is None else best_theirs)


def synced(fn, lib, device):
    """``fn``, waiting for the GPU after each call when timing on cuda (its work is
    asynchronous)."""
    if fn is None or device == "cpu":
        return fn

    def run():
        fn()
        lib.cuda.synchronize()
    return run


def rows(quick, device="cpu"):
    min_time = 0.05 if quick else 0.2
    table = []

    def pair(ours, theirs):
        return paired(synced(ours, ember, device), synced(theirs, torch, device), min_time)
    for grad in (False, True):
        ours = tiny_workloads(ember, grad)
        theirs = tiny_workloads(torch, grad) if torch else {}
        for name, fn in ours.items():
            label = f"{name}{' (grad)' if grad else ''}"
            table.append((label, *pair(fn, theirs.get(name))))
    for label, make in (("backward, 10-node chain", backward_workload),
                        ("MLP 64x256 fwd+bwd", mlp_workload)):
        table.append((label, *pair(make(ember), make(torch) if torch else None)))
    for label, make in TRAIN_STEPS.items():
        if torch:
            torch.manual_seed(0)
        ember.manual_seed(0)
        table.append((label, *pair(make(ember), make(torch) if torch else None)))
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timings")
    parser.add_argument("--device", default=os.environ.get("DEVICE") or "cpu",
                        help="cpu, or cuda: the op and training-step tables only, with every "
                             "tensor made on the GPU (the default device)")
    args = parser.parse_args()
    print(f"threads: {THREADS}   PyTorch: {torch.__version__ if torch else 'not installed'}"
          f"   device: {args.device}")
    if args.device != "cpu":
        ember.set_default_device(args.device)
        if torch:
            torch.set_default_device(args.device)
    print(f"{'workload':28s} {'ember us':>10s} {'torch us':>10s} {'ratio':>7s}")
    for label, ours, theirs in rows(args.quick, args.device):
        if theirs is None:
            print(f"{label:28s} {ours:10.2f} {'-':>10s} {'-':>7s}")
        else:
            print(f"{label:28s} {ours:10.2f} {theirs:10.2f} {ours / theirs:7.2f}")
    if args.device != "cpu":
        return
    tables = [("layer forward + backward (ms)", layers, "10.2f"),
              ("step memory (peak RSS growth, MiB)", memory, "10.1f"),
              ("data loading (samples/s)", data_loading, "10.0f"),
              ("checkpoints (MB/s)", checkpoints, "10.0f")]
    for title, module, fmt in tables:
        print()
        print_table(title, module.rows(ember, torch), fmt)


def print_table(title, table, fmt):
    """Rows of (label, ember value, torch value or None) with their ratio."""
    print(f"{title:40s} {'ember':>10s} {'torch':>10s} {'ember/torch':>12s}")
    for label, ours, theirs in table:
        ratio = f"{ours / theirs:12.2f}" if theirs else f"{'-':>12s}"
        print(f"{label:40s} {ours:{fmt}} {theirs or 0:{fmt}} {ratio}")


if __name__ == "__main__":
    main()
