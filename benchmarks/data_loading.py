"""DataLoader throughput (samples/s): ember vs PyTorch on the same datasets.

A 60000x784 float32 TensorDataset (MNIST-sized) shuffled in batches of 128, and a
map-style dataset doing per-sample NumPy work, each with 0 and 2 worker processes.
"""

import time

import numpy as np


def tensor_dataset(lib):
    x = lib.tensor(np.random.default_rng(0).standard_normal((60000, 784)).astype(np.float32))
    y = lib.tensor(np.arange(60000) % 10)
    return lib.utils.data.TensorDataset(x, y)


class NumpyWork:
    """Each sample: a 28x28 image, normalized and flipped with NumPy, plus a label."""

    def __init__(self, lib, n=8192):
        self.lib = lib
        self.images = np.random.default_rng(0).random((n, 28, 28), dtype=np.float32)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = self.images[i]
        img = (img - img.mean()) / (img.std() + 1e-6)
        return self.lib.from_numpy(np.ascontiguousarray(img[:, ::-1])), i % 10


def samples_per_second(lib, dataset, workers, epochs=1, batch_size=128):
    loader = lib.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                       num_workers=workers)
    next(iter(loader))                          # start-up is not throughput
    start = time.perf_counter()
    n = 0
    for _ in range(epochs):
        for batch in loader:
            n += len(batch[1])
    return n / (time.perf_counter() - start)


def rows(ember, torch):
    """(label, ember samples/s, torch samples/s or None)."""
    table = []
    for name, make in (("TensorDataset 60000x784", tensor_dataset),
                       ("NumPy per-sample work", NumpyWork)):
        datasets = {lib: make(lib) for lib in (ember, torch) if lib is not None}
        for workers in (0, 2):
            ours = samples_per_second(ember, datasets[ember], workers)
            theirs = samples_per_second(torch, datasets[torch], workers) if torch else None
            table.append((f"{name}, workers={workers}", ours, theirs))
    return table
