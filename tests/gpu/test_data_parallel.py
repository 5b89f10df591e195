"""``nn.DataParallel`` over the stand-in's two GPUs: the batch is split, each piece runs on
its GPU with copies of the parameters, and outputs and gradients match one GPU's."""

import copy
import warnings

import pytest

import ember
import ember.nn as nn
from ember.nn.parallel import gather, scatter
from ember.testing import assert_close

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(
    not ember.cuda.is_available() or ember.cuda.device_count() < 2, reason="needs two GPUs")]

FIRST, SECOND = ember.device("cuda:0"), ember.device("cuda:1")


def _model():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).to(FIRST)


def test_outputs_and_gradients_match_one_gpu():
    model, twin = _model(), _model()
    devices = []
    twin[0].register_forward_hook(lambda m, args, out: devices.append(args[0].device))
    parallel = nn.DataParallel(twin, device_ids=[0, 1])
    assert parallel.device_ids == [0, 1] and parallel.output_device == 0
    x = ember.randn(10, 6, device=FIRST)
    expected = model(x)
    out = parallel(x)
    assert out.device == FIRST and devices == [FIRST, SECOND]
    assert_close(out.cpu(), expected.cpu(), rtol=1e-5, atol=1e-6)
    (expected ** 2).sum().backward()
    (out ** 2).sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        assert q.grad.device == FIRST
        assert_close(q.grad.cpu(), p.grad.cpu(), rtol=1e-5, atol=1e-5)
    assert list(parallel.state_dict()) == [f"module.{k}" for k in model.state_dict()]


def test_a_training_step_matches_one_gpu():
    model, twin = _model(), _model()
    parallel = nn.DataParallel(twin)
    x, y = ember.randn(8, 6, device=FIRST), ember.randint(0, 3, (8,), device=FIRST)
    for net, module in ((model, model), (parallel, twin)):
        opt = ember.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            opt.step()
    for p, q in zip(model.parameters(), twin.parameters()):
        assert_close(q.detach().cpu(), p.detach().cpu(), rtol=1e-5, atol=1e-6)


def test_keyword_arguments_containers_and_the_output_device():
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 2)

        def forward(self, x, *, scale, extra=None):
            return {"y": self.proj(x) * scale, "pair": (x.sum(1), extra)}

    ember.manual_seed(1)
    module = TwoHeads().to(FIRST)
    parallel = nn.DataParallel(module, device_ids=[FIRST, SECOND], output_device=SECOND)
    x = ember.randn(5, 4, device=FIRST)
    out = parallel(x, scale=2.0)
    assert out["y"].device == SECOND and out["pair"][1] is None
    assert_close(out["y"].cpu(), (module.proj(x) * 2.0).cpu(), rtol=1e-5, atol=1e-6)
    assert_close(out["pair"][0].cpu(), x.sum(1).cpu(), rtol=1e-6, atol=1e-6)


def test_batch_norm_statistics_come_from_the_first_gpus_piece():
    ember.manual_seed(2)
    bn = nn.BatchNorm1d(3).to(FIRST)
    reference = copy.deepcopy(bn)
    x = ember.randn(8, 3, device=FIRST) * 3 + 1
    nn.DataParallel(bn)(x)
    reference(x[:4])
    assert_close(bn.running_mean.cpu(), reference.running_mean.cpu(), rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 1


def test_parameters_elsewhere_are_refused():
    parallel = nn.DataParallel(_model().to(SECOND), device_ids=[0, 1])
    with pytest.raises(RuntimeError, match=r"^module must have its parameters and buffers on "
                                           r"device cuda:0 \(device_ids\[0\]\) but found one "
                                           r"of them on device: cuda:1"):
        parallel(ember.randn(4, 6, device=FIRST))


def test_one_gpu_runs_the_module_itself_and_moves_it_there():
    model = nn.Linear(3, 2)
    parallel = nn.DataParallel(model, device_ids=[1])
    assert model.weight.device == SECOND
    x = ember.randn(4, 3, device=SECOND)
    assert ember.equal(parallel(x), model(x))


def test_scatter_and_gather():
    x = ember.arange(10.0, device=FIRST).reshape(5, 2)
    pieces = scatter((x, "label"), [0, 1])
    assert [p[0].device for p in pieces] == [FIRST, SECOND]
    assert [p[0].shape[0] for p in pieces] == [3, 2] and pieces[1][1] == "label"
    assert ember.equal(gather([p[0] for p in pieces], "cpu"), x.cpu())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = gather([ember.tensor(1.0, device=FIRST), ember.tensor(2.0, device=SECOND)], 0)
    assert losses.tolist() == [1.0, 2.0] and "all input tensors were scalars" in str(
        caught[0].message)
