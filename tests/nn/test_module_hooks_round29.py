"""Full backward hooks on modules none of whose inputs requires grad, and under functorch
transforms (PyTorch's behaviour, asserted without it)."""

import warnings

import pytest

import ember
from ember import nn


class _Scaled(nn.Module):
    """Output from the parameter only, whatever the arguments."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(ember.ones(2))

    def forward(self, *args):
        return self.w * 2


def _run(args, returned):
    m = _Scaled()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi) or returned)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m(*args).sum().backward()
    return seen[0], m.w.grad.tolist()


def test_grad_input_has_one_none_per_argument():
    assert _run((), None) == ((), [2.0, 2.0])
    assert _run((ember.ones(2),), None) == ((None,), [2.0, 2.0])
    assert _run((ember.ones(2), 3), None) == ((None, None), [2.0, 2.0])


@pytest.mark.parametrize("returned", [(), (None,), (None, None, None)])
def test_a_tuple_of_nones_is_accepted(returned):
    assert _run((ember.ones(2),), returned)[1] == [2.0, 2.0]


@pytest.mark.parametrize("returned", [[None], (ember.ones(2),), (None, ember.ones(2))])
def test_other_returns_are_refused(returned):
    with pytest.raises(RuntimeError, match=r"^Backward hook for Modules where no input requires "
                       r"gradient should always return None or None for all gradients\.$"):
        _run((ember.ones(2),), returned)


def _hooked(log):
    m = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    with ember.no_grad():
        m[0].weight.copy_(ember.eye(2))
        m[0].bias.zero_()
    m[1].register_full_backward_hook(lambda *a: log.append("backward"))
    return m


def test_refused_under_reverse_mode_transforms():
    log = []
    m = _hooked(log)
    x = ember.tensor([[0.5, -1.0], [1.0, 2.0]])
    with pytest.raises(RuntimeError, match="it must override the setup_context staticmethod"):
        ember.func.vjp(m, x)
    with pytest.raises(RuntimeError, match="it must override the setup_context staticmethod"):
        ember.func.vmap(ember.func.grad(lambda r: m(r).sum()))(x)
    assert log == []


def test_skipped_under_an_innermost_vmap():
    log = []
    m = _hooked(log)
    x = ember.tensor([[0.5, -1.0], [1.0, 2.0]], requires_grad=True)
    out = ember.func.vmap(m)(x)
    out.sum().backward()
    g = ember.func.grad(lambda r: ember.func.vmap(m)(r).sum())(x.detach())
    assert log == []
    expected = (1 - ember.tanh(x.detach()) ** 2).flatten().tolist()
    assert x.grad.flatten().tolist() == pytest.approx(expected, rel=1e-6)
    assert g.flatten().tolist() == pytest.approx(expected, rel=1e-6)


def test_not_refused_where_the_transform_does_not_reach_the_module():
    # the module's tensors depend on no input of the innermost transform: PyTorch records no
    # hook node there, so nothing refuses and the hook does not fire
    log = []
    m = _hooked(log)
    x = ember.tensor([[0.5, -1.0], [1.0, 2.0]])
    g = ember.func.grad(lambda s: (m(x) * s).sum())(ember.tensor(2.0))
    assert g.item() == pytest.approx(float(ember.tanh(x).sum()), rel=1e-6)
    g = ember.func.grad(lambda r: m(r.detach()).sum() + (r * 3).sum())(x)
    assert g.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    g = ember.func.vmap(lambda s: ember.func.grad(lambda t: (m(x) * t).sum())(s))(
        ember.tensor([1.0, 2.0]))
    assert g.tolist() == pytest.approx([float(ember.tanh(x).sum())] * 2, rel=1e-6)
    assert log == []


def test_double_backward_through_the_inputs_runs_no_hook_again():
    # PyTorch clears the captured grad_output once the hooks ran: a second pass reaching the
    # module's inputs without passing through its outputs (double backward) calls no hook
    seen = []
    m = nn.Tanh()
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(round(float(gi[0].sum()), 4)))
    x = ember.tensor([0.5, -1.0, 2.0], requires_grad=True)
    g, = ember.autograd.grad(m(x * 1).sum(), x, create_graph=True)
    (g * g).sum().backward()
    t = ember.tanh(x.detach())
    assert seen == [round(float((1 - t * t).sum()), 4)]
    expected = (2 * (1 - t * t) * (-2 * t * (1 - t * t))).tolist()
    assert x.grad.tolist() == pytest.approx(expected, rel=1e-5)
    y = m(x * 1).sum()                  # each backward through the outputs still runs them
    y.backward(retain_graph=True)
    y.backward()
    assert len(seen) == 3
