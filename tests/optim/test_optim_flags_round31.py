"""Flag combinations PyTorch's optimizers refuse, with its errors: foreach=True with
differentiable=True asserts at step (the multi-tensor ops build no graph), fused=True with
capturable=True runs on the CPU, and a later complex parameter under SGD's or Adagrad's
fused step gets the kernel's or Adagrad's own error. Checked against PyTorch in
tests/parity/test_parity_optim_flags_round31.py."""

import pytest

import ember

NO_GRAPH = "_foreach ops don't support autograd"
FLOAT_ONLY = ("`fused=True` requires all the params to be floating point Tensors of supported "
              "devices: ['mps', 'cuda', 'xpu', 'hpu', 'cpu', 'mtia', 'privateuseone'] but "
              "ember.complex64 and cpu")


def _param(dtype=ember.float32, graph=False, grad=True):
    p = ember.tensor([1.0, -2.0, 0.5], dtype=dtype, requires_grad=True)
    if graph:
        p = p.clone()
    if grad:
        p.grad = ember.full_like(p, 0.5)
    return p


@pytest.mark.parametrize("name", ["Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "ASGD",
                                  "NAdam", "RAdam", "RMSprop", "Rprop"])
def test_foreach_differentiable_asserts_at_step(name):
    p = _param(graph=True)
    before = p.tolist()
    opt = getattr(ember.optim, name)([p], foreach=True, differentiable=True)  # no error yet
    with pytest.raises(AssertionError, match=f"^{NO_GRAPH}$"):
        opt.step()
    assert p.tolist() == before


def test_sgd_foreach_differentiable_steps():
    p = _param(graph=True)
    opt = ember.optim.SGD([p], lr=0.1, foreach=True, differentiable=True)
    opt.step()
    assert p.tolist() != [1.0, -2.0, 0.5]
    assert p.grad_fn is not None


def test_foreach_differentiable_order_of_errors():
    # no gradient: Adam steps nothing, Adagrad and Adamax still assert
    ember.optim.Adam([_param(graph=True, grad=False)], foreach=True, differentiable=True).step()
    for name in ("Adagrad", "Adamax"):
        opt = getattr(ember.optim, name)([_param(graph=True, grad=False)], foreach=True,
                                         differentiable=True)
        with pytest.raises(AssertionError, match=NO_GRAPH):
            opt.step()
    # Adam's capturable device check comes first; ASGD's comes after the assert
    opt = ember.optim.Adam([_param(graph=True)], foreach=True, differentiable=True,
                           capturable=True)
    with pytest.raises(AssertionError, match="If capturable=True, params and state_steps"):
        opt.step()
    opt = ember.optim.ASGD([_param(graph=True)], foreach=True, differentiable=True,
                           capturable=True)
    with pytest.raises(AssertionError, match=NO_GRAPH):
        opt.step()
    # a sparse gradient's error comes first, but for Adagrad (which takes sparse ones)
    e = ember.ones(3, 2, requires_grad=True).clone()
    e.grad = ember.sparse_coo_tensor([[0]], ember.ones(1, 2), (3, 2))
    with pytest.raises(RuntimeError, match="^RMSprop does not support sparse gradients$"):
        ember.optim.RMSprop([e], foreach=True, differentiable=True).step()
    with pytest.raises(AssertionError, match=NO_GRAPH):
        ember.optim.Adagrad([e], foreach=True, differentiable=True).step()


@pytest.mark.parametrize("cls", [ember.optim.Adam, ember.optim.AdamW])
def test_fused_capturable_runs_on_cpu(cls):
    p, q = _param(), _param()
    cls([p], lr=0.1, fused=True, capturable=True).step()
    cls([q], lr=0.1).step()
    assert p.tolist() == q.tolist() != [1.0, -2.0, 0.5]


def test_fused_later_complex_param():
    def step(name, first, second):
        a, b = _param(first), _param(second)
        getattr(ember.optim, name)([a, b], lr=0.1, fused=True).step()

    with pytest.raises(NotImplementedError,
                       match="^\"fused_sgd_kernel\" not implemented for 'ComplexDouble'$"):
        step("SGD", ember.float32, ember.complex128)
    with pytest.raises(RuntimeError,
                       match="^`fused` does not support sparse grad or complex param$"):
        step("Adagrad", ember.float32, ember.complex64)
    for name in ("SGD", "Adagrad", "Adam"):
        with pytest.raises(RuntimeError) as info:
            step(name, ember.complex64, ember.float32)
        assert str(info.value) == FLOAT_ONLY
    with pytest.raises(RuntimeError) as info:
        step("Adam", ember.float32, ember.complex64)
    assert str(info.value) == FLOAT_ONLY
