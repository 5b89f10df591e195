"""Checkpoint save/load throughput (MB/s) on a 100 MB state_dict: ember vs PyTorch.

25 float32 tensors of 1M elements each, written to a temporary folder and read back (plain,
and memory-mapped). ember's save also fsyncs (it is atomic); PyTorch's does not.
"""

import os
import tempfile
import time

import numpy as np

MB = 1 << 20


def state_dict(lib):
    rng = np.random.default_rng(0)
    return {f"layer{i}.weight": lib.from_numpy(rng.standard_normal(1 << 20, np.float32))
            for i in range(25)}


def _best(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def throughput(lib, folder):
    """{operation: MB/s} for one framework."""
    sd = state_dict(lib)
    size = sum(t.numel() * t.element_size() for t in sd.values()) / MB
    path = os.path.join(folder, f"{lib.__name__}.pt")

    def load_all(**kw):
        out = lib.load(path, weights_only=True, **kw)
        for t in out.values():                  # read the data (mmap reads lazily)
            np.add.reduce(np.asarray(t))
    return {"save": size / _best(lambda: lib.save(sd, path)),
            "load": size / _best(load_all),
            "load mmap=True": size / _best(lambda: load_all(mmap=True))}


def rows(ember, torch):
    """(label, ember MB/s, torch MB/s or None)."""
    with tempfile.TemporaryDirectory() as folder:
        ours = throughput(ember, folder)
        theirs = throughput(torch, folder) if torch is not None else {}
    return [(f"100 MB state_dict {op}", ours[op], theirs.get(op)) for op in ours]


def main():
    import ember
    try:
        import torch
    except ImportError:
        torch = None
    print(f"{'checkpoints (MB/s)':40s} {'ember':>10s} {'torch':>10s} {'ember/torch':>12s}")
    for label, ours, theirs in rows(ember, torch):
        ratio = f"{ours / theirs:12.2f}" if theirs else f"{'-':>12s}"
        print(f"{label:40s} {ours:10.0f} {theirs or 0:10.0f} {ratio}")


if __name__ == "__main__":
    main()
