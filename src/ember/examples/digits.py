"""Train a small CNN on handwritten digits, save it, reload it: ``make demo``.

    python -m ember.examples.digits [--epochs 10] [--mnist DIR] ...    (or: ember-demo)

By default it uses the 8x8 digits that scikit-learn ships (1797 images, no download); with
``--mnist DIR`` it reads the four standard MNIST IDX files from DIR instead. The program is
written as a PyTorch user would write it, with ``ember`` in place of ``torch``.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import ember
from ember import nn
from ember.nn import functional as F
from ember.utils.data import DataLoader, TensorDataset

__all__ = ["DigitsCNN", "load_data", "train_epoch", "evaluate", "run", "main"]


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions, max-pooling, and a two-layer classifier; any image size works
    (the features are pooled to 4x4 before the classifier)."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(4))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(64, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def load_data(mnist=None, test_fraction=0.2):
    """``(train, test)`` TensorDatasets of float32 images (N, 1, H, W) in [0, 1] and int64
    labels: scikit-learn's digits (a fixed split) or the MNIST IDX files in ``mnist``."""
    if mnist is not None:
        from ember.examples.mnist import load_mnist
        (x_train, y_train), (x_test, y_test) = load_mnist(mnist)
        scale = 255.0
    else:
        try:
            from sklearn.datasets import load_digits
        except ImportError:
            sys.exit("the digits demo needs scikit-learn: pip install 'ember[examples]'")
        digits = load_digits()
        order = np.random.default_rng(0).permutation(len(digits.target))
        n_test = int(len(order) * test_fraction)
        images, labels = digits.images[order], digits.target[order].astype(np.int64)
        x_train, y_train = images[n_test:], labels[n_test:]
        x_test, y_test = images[:n_test], labels[:n_test]
        scale = 16.0

    def dataset(x, y):
        x = np.ascontiguousarray(x[:, None], dtype=np.float32) / np.float32(scale)
        return TensorDataset(ember.from_numpy(x), ember.from_numpy(np.asarray(y, np.int64)))
    return dataset(x_train, y_train), dataset(x_test, y_test)


def train_epoch(model, loader, optimizer, scheduler, device, desc="train"):
    """One pass over ``loader`` with a progress bar showing the running loss; returns the
    epoch's mean loss."""
    model.train()
    running = 0.0
    with tqdm(loader, desc=desc, unit="batch", leave=False, dynamic_ncols=True) as bar:
        for i, (x, y) in enumerate(bar, 1):
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += (loss.item() - running) / i
            bar.set_postfix(loss=f"{running:.4f}")
    return running


@ember.no_grad()
def evaluate(model, loader, device):
    """The fraction of ``loader``'s samples that ``model`` classifies correctly."""
    model.eval()
    correct = total = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        correct += int((model(x).argmax(dim=1) == y).sum())
        total += len(y)
    return correct / total


def save_and_reload(model, path, device):
    """Save ``model``'s weights to ``path`` and load them into a fresh model."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ember.save(model.state_dict(), path)
    fresh = DigitsCNN().to(device)
    fresh.load_state_dict(ember.load(path))
    return fresh


def _parser():
    """The command line: --help describes each option."""
    p = argparse.ArgumentParser(
        prog="ember-demo",
        description="Train a small CNN on handwritten digits with ember, save a checkpoint, "
                    "reload it into a fresh model and check that it scores the same.",
        epilog="example: ember-demo --epochs 5 --seed 1 --out runs/cnn.pt")
    p.add_argument("--epochs", type=int, default=10,
                   help="passes over the training set (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="images per training step (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.01,
                   help="peak learning rate of Adam's one-cycle schedule (default: %(default)s)")
    p.add_argument("--device", default="cpu",
                   help="where to train: cpu, or cuda (needs the 'cuda' extra and a GPU) "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed; the same seed gives the same run, bit for bit "
                        "(default: %(default)s)")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="checkpoint file to write (default: digits_cnn.pt, or mnist_cnn.pt "
                        "with --mnist)")
    p.add_argument("--mnist", type=Path, default=None, metavar="DIR",
                   help="train on MNIST from the standard IDX files in DIR (train-images-"
                        "idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
                        "t10k-labels-idx1-ubyte, each optionally .gz) instead of "
                        "scikit-learn's 8x8 digits")
    return p


def run(argv=None):
    """Parse ``argv``, train, evaluate each epoch, save and reload; returns a dict with the
    per-epoch ``losses`` and ``accuracies``, the ``reloaded_accuracy`` and the ``checkpoint``."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.lr <= 0:
        parser.error("--epochs and --batch-size must be positive, and --lr > 0")
    device = ember.device(args.device)
    if device.type == "cuda" and not ember.cuda.is_available():
        parser.error("--device cuda: no usable GPU (ember.cuda.is_available() is False); "
                     "install ember's 'cuda' extra on a machine with an NVIDIA GPU")
    out = args.out or Path("mnist_cnn.pt" if args.mnist else "digits_cnn.pt")

    start = time.perf_counter()
    ember.manual_seed(args.seed)
    train_set, test_set = load_data(args.mnist)
    name = "MNIST" if args.mnist else "scikit-learn digits"
    print(f"ember {ember.__version__}: training a CNN on {name} "
          f"({len(train_set)} train / {len(test_set)} test images of "
          f"{'x'.join(map(str, train_set[0][0].shape[1:]))}) on {device}")

    shuffle = ember.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              generator=shuffle)
    test_loader = DataLoader(test_set, batch_size=512)
    model = DigitsCNN().to(device)
    optimizer = ember.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = ember.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, epochs=args.epochs, steps_per_epoch=len(train_loader))

    losses, accuracies = [], []
    for epoch in range(1, args.epochs + 1):
        desc = f"epoch {epoch}/{args.epochs}"
        losses.append(train_epoch(model, train_loader, optimizer, scheduler, device, desc))
        accuracies.append(evaluate(model, test_loader, device))
        print(f"{desc}  train loss {losses[-1]:.4f}  test accuracy {accuracies[-1]:.2%}",
              flush=True)

    reloaded = evaluate(save_and_reload(model, out, device), test_loader, device)
    print(f"saved {out}; a fresh model loaded from it scores {reloaded:.2%} "
          f"({'equal' if reloaded == accuracies[-1] else 'NOT equal'}); "
          f"done in {time.perf_counter() - start:.1f} s")
    return {"losses": losses, "accuracies": accuracies, "reloaded_accuracy": reloaded,
            "checkpoint": out}


def main(argv=None):
    """Console entry point: 0 when the reloaded model scores as the trained one did."""
    result = run(argv)
    return 0 if result["reloaded_accuracy"] == result["accuracies"][-1] else 1


if __name__ == "__main__":
    sys.exit(main())
