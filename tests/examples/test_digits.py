"""The digits demo (``make demo``) in a reduced setting: one or two epochs."""

import subprocess
import sys

import numpy as np
import pytest

import ember
from ember.examples import digits
from ember.utils.data import DataLoader
from tests.examples.test_mnist import write_mnist

OPTIONS = ["--epochs", "--batch-size", "--lr", "--device", "--seed", "--out", "--mnist"]


def test_two_epochs_learn_the_digits():
    ember.manual_seed(0)
    train_set, test_set = digits.load_data()
    assert len(train_set) + len(test_set) == 1797
    x, y = train_set[0]
    assert x.shape == (1, 8, 8) and x.dtype == ember.float32 and y.dtype == ember.int64
    model = digits.DigitsCNN()
    loader = DataLoader(train_set, batch_size=32, shuffle=True,
                        generator=ember.Generator().manual_seed(0))
    opt = ember.optim.Adam(model.parameters(), lr=3e-3)
    sched = ember.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=2 * len(loader))
    test_loader = DataLoader(test_set, batch_size=100)
    before = digits.evaluate(model, test_loader, "cpu")
    losses = [digits.train_epoch(model, loader, opt, sched, "cpu") for _ in range(2)]
    after = digits.evaluate(model, test_loader, "cpu")
    assert losses[1] < losses[0]
    assert before < 0.3 and after > 0.8                       # chance is 0.1


def test_demo_trains_saves_and_reloads(tmp_path, capsys):
    out = tmp_path / "ckpt" / "cnn.pt"
    result = digits.run(["--epochs", "2", "--out", str(out)])
    assert out.is_file()
    assert len(result["accuracies"]) == 2 and result["accuracies"][-1] > 0.8
    assert result["losses"][1] < result["losses"][0]
    assert result["reloaded_accuracy"] == result["accuracies"][-1]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ember ") and "1438 train / 359 test" in lines[0]
    assert lines[1].startswith("epoch 1/2  train loss") and "test accuracy" in lines[1]
    assert "(equal)" in lines[-1]


def test_demo_is_deterministic_under_seed(tmp_path):
    def once(seed):
        result = digits.run(["--epochs", "1", "--seed", str(seed), "--batch-size", "128",
                             "--out", str(tmp_path / f"{seed}.pt")])
        weights = ember.load(result["checkpoint"])
        return result["losses"], result["accuracies"], weights

    first, again, other = once(1), once(1), once(2)
    assert first[:2] == again[:2]
    assert all(ember.equal(first[2][k], again[2][k]) for k in first[2])
    assert first[0] != other[0]


def test_demo_reads_mnist_idx_files(tmp_path, capsys):
    root = write_mnist(tmp_path / "mnist", 200, 40, gz=True)
    result = digits.run(["--mnist", str(root), "--epochs", "2", "--batch-size", "16",
                         "--out", str(tmp_path / "m.pt")])
    assert "MNIST (200 train / 40 test images of 28x28)" in capsys.readouterr().out
    assert result["accuracies"][-1] > 0.5                     # the fake digits are easy
    assert result["reloaded_accuracy"] == result["accuracies"][-1]


def test_help_explains_every_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        digits.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    for option in OPTIONS:
        assert option in text


@pytest.mark.skipif(ember.cuda.is_available(), reason="tests the no-GPU message")
def test_cuda_without_a_gpu_is_a_clear_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        digits.main(["--device", "cuda"])
    assert exit_.value.code == 2
    assert "ember.cuda.is_available() is False" in capsys.readouterr().err


def test_runs_as_a_module():
    proc = subprocess.run([sys.executable, "-m", "ember.examples.digits", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--mnist DIR" in proc.stdout


def test_cnn_accepts_any_image_size():
    model = digits.DigitsCNN()
    for size in (8, 28):
        assert model(ember.zeros(3, 1, size, size)).shape == (3, 10)
    assert np.isclose(sum(p.numel() for p in model.parameters()),
                      16 * 9 + 16 + 32 * 16 * 9 + 32 + 512 * 64 + 64 + 64 * 10 + 10)
