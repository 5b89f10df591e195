"""The scripts in the repository's examples/ folder, each in a reduced setting."""

import runpy
from pathlib import Path

import pytest

import ember

EXAMPLES = Path(__file__).parents[2] / "examples"


def load(name):
    """The example's globals, without running its ``__main__`` block."""
    return runpy.run_path(str(EXAMPLES / name), run_name="example")


def test_regression_descends_to_the_least_squares_fit(capsys):
    losses, coefs, exact = load("regression.py")["main"](["--steps", "300"])
    assert losses[-1] < losses[0] / 10
    assert ember.allclose(coefs, exact, atol=1e-3)
    assert coefs.shape == (4,) and coefs[1] > 0 > coefs[3]   # sin's odd-power shape
    assert "least squares:" in capsys.readouterr().out


def test_char_gpt_learns_and_samples(capsys):
    losses, sample = load("char_gpt.py")["main"](
        ["--steps", "25", "--batch-size", "8", "--context", "32", "--dim", "32",
         "--layers", "1", "--sample", "30", "--log-every", "25", "--module", "string"])
    assert sum(losses[-5:]) / 5 < losses[0] - 0.5
    assert len(sample) == len("def ") + 30 and sample.startswith("def ")
    assert "val loss" in capsys.readouterr().out


@pytest.mark.parametrize("amp", ["bfloat16", "float16"])
def test_char_gpt_trains_in_mixed_precision_like_float32(amp):
    flags = ["--steps", "15", "--batch-size", "8", "--context", "32", "--dim", "32",
             "--layers", "1", "--sample", "5", "--log-every", "15", "--module", "string"]
    main = load("char_gpt.py")["main"]
    full, _ = main(flags)
    mixed, _ = main(flags + ["--amp", amp])                 # float16 with a GradScaler
    assert mixed != full                                    # autocast took effect
    assert abs(sum(mixed[-5:]) - sum(full[-5:])) / 5 < 0.05
    assert sum(mixed[-5:]) / 5 < mixed[0] - 0.3


def test_char_gpt_decays_only_matrices():
    mod = load("char_gpt.py")
    model = mod["GPT"](vocab=10, context=8, dim=16, heads=2, layers=1)
    decay, no_decay = mod["make_optimizer"](model, 1e-3, 0.1).param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() == 2 for p in decay["params"])
    assert all(p.dim() == 1 for p in no_decay["params"]) and no_decay["params"]
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_char_gpt_attention_is_causal():
    mod = load("char_gpt.py")
    ember.manual_seed(0)
    model = mod["GPT"](vocab=10, context=8, dim=16, heads=2, layers=2).eval()
    idx = ember.randint(10, (1, 8))
    changed = idx.clone()
    changed[0, 5] = (idx[0, 5] + 1) % 10
    a, b = model(idx), model(changed)
    assert ember.equal(a[:, :5], b[:, :5])                   # the past ignores the future
    assert not ember.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("step, factor", [(0, 0.1), (9, 1.0), (10, 1.0), (100, 0.1)])
def test_char_gpt_schedule_warms_up_then_decays(step, factor):
    schedule = load("char_gpt.py")["warmup_cosine"](steps=100, warmup=10)
    assert schedule(step) == pytest.approx(factor)
