"""The func examples run in a reduced setting and their losses go down."""

import importlib.util
import pathlib

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_per_sample_grads_example_learns():
    example = _load("per_sample_grads")
    losses = example.main(steps=12, batch=16, verbose=False)
    assert sum(losses[-3:]) / 3 < 0.7 * sum(losses[:3]) / 3
    vmapped, looped = example.measure(example.SmallCNN(), batch=8, repeats=1)
    assert vmapped > 0 and looped > 0


def test_ensembling_example_learns():
    losses = _load("ensembling").main(models=3, steps=30, batch=64, verbose=False)
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
