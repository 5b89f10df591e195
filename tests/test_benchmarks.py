"""The benchmark models run one training step in ember and learn (a whole-stack check of
nn, functional ops, autograd and the update)."""

import sys
from pathlib import Path

import pytest

import ember

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import train_steps  # noqa: E402


@pytest.mark.parametrize("name", list(train_steps.WORKLOADS))
def test_benchmark_step_runs_and_changes_parameters(name):
    ember.manual_seed(0)
    step = train_steps.WORKLOADS[name](ember)
    before = [p.detach().clone() for p in step.parameters()]
    step()
    step()
    after = list(step.parameters())
    assert all(bool(ember.isfinite(p).all()) for p in after)
    changed = sum(not ember.equal(a.detach(), b) for a, b in zip(after, before))
    assert changed >= len(before) - 1      # every parameter moves (a frozen pos-emb row aside)


def test_step_memory_probe_measures_a_fresh_process():
    import memory
    growth = memory._peak_growth_mib("ember", memory.WORKLOADS[0])
    assert 1 < growth < 500            # MiB: a GPT step's activations and gradients


def test_layer_rows_run_forward_and_backward():
    import layers
    for label, build in layers.LAYERS.items():
        fn, inputs = build(ember)
        out = fn(*inputs)
        out.backward(ember.ones_like(out))
        for t in inputs:
            assert t.grad is not None and t.grad.shape == t.shape, label
            assert bool(ember.isfinite(t.grad).all()) and bool(t.grad.abs().sum() > 0), label
