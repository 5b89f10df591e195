"""Tensors on a GPU other than the current one: ops, gradients and optimizer steps run on
their operands' GPU, as in PyTorch (CuPy would launch them on the current one), and
operands on two GPUs are refused with PyTorch's message. Skips on a machine with one GPU;
the stand-in (tests/gpu/fake_cupy.py) has two, whose kernels refuse another GPU's arrays
as CuPy's do without peer access."""

import pytest

import ember
import ember.nn.functional as F
from ember.testing import assert_close

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(
    not ember.cuda.is_available() or ember.cuda.device_count() < 2, reason="needs two GPUs")]

SECOND = ember.device("cuda:1")


@pytest.fixture(autouse=True)
def first_gpu_current():
    ember.cuda.set_device(0)
    yield
    assert ember.cuda.current_device() == 0         # nothing left the second one current


def test_ops_run_on_their_operands_gpu():
    host = ember.randn(3, 4)
    x = host.to(SECOND)
    assert x.device == SECOND and ember.cuda.current_device() == 0
    y = (x * 2 + 1).exp().sum(0) @ ember.ones(4, 2, device=SECOND)
    assert y.device == SECOND
    assert_close(y.cpu(), (host * 2 + 1).exp().sum(0) @ ember.ones(4, 2), rtol=1e-6,
                 atol=1e-5)
    assert (x * ember.tensor(3.0)).device == SECOND            # a CPU scalar joins
    assert x.to("cuda:0").device == ember.device("cuda:0")
    assert_close(x.to("cuda:0").cpu(), host)


def test_operands_on_two_gpus_are_refused():
    a, b = ember.ones(2, device=SECOND), ember.ones(2, device="cuda:0")
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device, "
                                           r"but found at least two devices, cuda:1 and "
                                           r"cuda:0!"):
        a + b
    with pytest.raises(RuntimeError, match="cuda:0 and cuda:1!"):
        ember.cat([b, a])


def test_device_context_makes_creation_default_to_its_gpu():
    with ember.cuda.device(1):
        assert ember.zeros(2, device="cuda").device == SECOND
        assert ember.cuda.current_device() == 1
    assert ember.zeros(2, device="cuda").device == ember.device("cuda:0")


@pytest.mark.parametrize("optimizer", [
    lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: ember.optim.AdamW(ps, lr=0.01),
    lambda ps: ember.optim.Rprop(ps, lr=0.01)])
def test_a_model_trains_on_the_second_gpu_like_on_the_cpu(optimizer):
    ember.manual_seed(0)
    host = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
    gpu = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.ReLU(),
                              ember.nn.Linear(8, 3)).to(SECOND)
    gpu.load_state_dict(host.state_dict())
    x, y = ember.randn(16, 6), ember.randint(0, 3, (16,))
    for model, device in ((host, "cpu"), (gpu, SECOND)):
        opt = optimizer(list(model.parameters()))
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            ember.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
    for (name, want), got in zip(host.state_dict().items(), gpu.state_dict().values()):
        assert got.device == SECOND, name
        assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
    assert all(p.grad.device == SECOND for p in gpu.parameters())


def test_gradients_flow_back_across_gpus():
    # model parallel: the first layer on GPU 1, the second on GPU 0
    host = ember.randn(4, 5, requires_grad=True)
    x = host.detach().to(SECOND).requires_grad_()
    h = (x * 3).tanh().to("cuda:0")
    h.square().sum().backward()
    host_h = (host * 3).tanh()
    host_h.square().sum().backward()
    assert x.grad.device == SECOND
    assert_close(x.grad.cpu(), host.grad, atol=1e-5, rtol=1e-5)


def test_mixed_precision_layers_and_sampling_on_the_second_gpu():
    ember.manual_seed(0)
    conv = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3, padding=1), ember.nn.BatchNorm2d(4),
                               ember.nn.ReLU(), ember.nn.Dropout(0.2)).to(SECOND)
    rnn = ember.nn.LSTM(4, 5, batch_first=True).to(SECOND)
    params = list(conv.parameters()) + list(rnn.parameters())
    opt = ember.optim.Adam(params, lr=1e-3)
    scaler = ember.amp.GradScaler("cuda")
    x = ember.randn(2, 3, 6, 6, device=SECOND)
    with ember.autocast("cuda", dtype=ember.bfloat16):
        h = conv(x).mean((2, 3))
        out, _ = rnn(h[:, None].expand(2, 7, 4).float())
        loss = out.float().square().mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert all(p.device == SECOND and p.grad.device == SECOND for p in params)
    assert all(ember.isfinite(p).all().item() for p in params)
    noise = ember.randn(1000, device=SECOND)
    assert noise.device == SECOND and abs(noise.mean().item()) < 0.2


SPLIT_OPTIMIZERS = {
    "SGD momentum": lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9),
    "SGD maximize": lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.5, maximize=True),
    "AdamW amsgrad": lambda ps: ember.optim.AdamW(ps, lr=0.01, amsgrad=True),
    "Adam, no foreach": lambda ps: ember.optim.Adam(ps, lr=0.01, foreach=False),
    "NAdam": lambda ps: ember.optim.NAdam(ps, lr=0.01),
    "RAdam": lambda ps: ember.optim.RAdam(ps, lr=0.01),
    "Adamax": lambda ps: ember.optim.Adamax(ps, lr=0.01),
    "Adagrad": lambda ps: ember.optim.Adagrad(ps, lr=0.01),
    "Adadelta": lambda ps: ember.optim.Adadelta(ps),
    "RMSprop centered": lambda ps: ember.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    "Rprop": lambda ps: ember.optim.Rprop(ps, lr=0.01),
    "ASGD": lambda ps: ember.optim.ASGD(ps, lr=0.01),
    "Adafactor": lambda ps: ember.optim.Adafactor(ps, lr=0.1, weight_decay=0.1),
    "Muon": lambda ps: ember.optim.Muon([p for p in ps if p.dim() == 2], lr=0.02),
}


def _split_model():
    ember.manual_seed(0)
    return ember.nn.Linear(6, 8), ember.nn.Linear(8, 3)


@pytest.mark.parametrize("name", SPLIT_OPTIMIZERS)
def test_an_optimizer_steps_a_model_split_over_two_gpus_like_on_the_cpu(name):
    # model parallel, one optimizer: each parameter's state is made and updated on its GPU
    host, split = _split_model(), _split_model()
    split[0].to("cuda:0")
    split[1].to(SECOND)
    x, y = ember.randn(16, 6), ember.randint(0, 3, (16,))
    for (first, second), devices in ((host, ("cpu", "cpu")), (split, ("cuda:0", SECOND))):
        params = list(first.parameters()) + list(second.parameters())
        opt = SPLIT_OPTIMIZERS[name](params)
        params = [p for group in opt.param_groups for p in group["params"]]  # Muon: matrices
        scaler = ember.amp.GradScaler(enabled=devices[0] != "cpu")
        for _ in range(3):
            opt.zero_grad()
            h = F.relu(first(x.to(devices[0]))).to(devices[1])
            scaler.scale(F.cross_entropy(second(h), y.to(devices[1]))).backward()
            scaler.unscale_(opt)
            ember.nn.utils.clip_grad_norm_(params, 0.5)
            scaler.step(opt)
            scaler.update()
    held = {id(p) for p in params}
    for p, want in zip(list(split[0].parameters()) + list(split[1].parameters()),
                       list(host[0].parameters()) + list(host[1].parameters())):
        assert_close(p.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
        if id(p) not in held:
            continue
        kept = [v for v in opt.state[p].values() if isinstance(v, ember.Tensor) and v.dim()]
        assert kept and all(v.device == p.device for v in kept), name


def test_lbfgs_refuses_parameters_on_two_gpus():
    first, second = _split_model()
    first.to("cuda:0")
    second.to(SECOND)
    params = list(first.parameters()) + list(second.parameters())
    opt = ember.optim.LBFGS(params)

    def closure():
        opt.zero_grad()
        loss = second(first(ember.randn(4, 6, device="cuda:0")).to(SECOND)).sum()
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="found at least two devices, cuda:0 and cuda:1!"):
        opt.step(closure)
