"""Inference tensors: what ``inference_mode`` makes, and what PyTorch refuses them outside it."""

import pytest

import ember
from ember import nn

SAVED = "Inference tensors cannot be saved for backward"
INPLACE = "Inplace update to inference tensor outside InferenceMode is not allowed"
REQUIRES = ("Setting requires_grad=True on inference tensor outside InferenceMode is not "
            "allowed.")


@pytest.fixture
def made():
    """(a tensor made in inference mode, a normal tensor, a view of it made there)."""
    normal = ember.ones(3)
    with ember.inference_mode():
        made = ember.ones(3)
        view = normal[:2]
    return made, normal, view


def test_what_inference_mode_makes(made):
    inference, normal, view = made
    assert inference.is_inference() and ember.is_inference(inference)
    assert not normal.is_inference() and not view.is_inference()
    with ember.inference_mode():
        assert (normal * 2).is_inference() and normal.clone().is_inference()
        assert not normal.detach().is_inference()
        with ember.inference_mode(False):
            assert not ember.ones(1).is_inference()
    assert not ember.ones(1).is_inference()


def test_views_and_aliases_of_an_inference_tensor_are_inference_tensors(made):
    inference = made[0]
    assert inference[:1].is_inference() and inference.view(3, 1).is_inference()
    assert inference.detach().is_inference() and inference.data.is_inference()
    assert inference.to(ember.float32).is_inference()          # itself
    assert not inference.to(ember.float64).is_inference()       # a copy made outside
    assert not (inference * 2).is_inference() and not inference.clone().is_inference()


def test_in_place_updates_are_refused_outside_inference_mode(made):
    inference, normal, view = made
    for update in (lambda: inference.add_(1), lambda: inference[:1].mul_(2),
                   lambda: inference.__setitem__(0, 5.0), lambda: inference.zero_(),
                   lambda: ember.add(normal, normal, out=inference)):
        with pytest.raises(RuntimeError, match=INPLACE):
            update()
    assert inference.tolist() == [1.0, 1.0, 1.0]                # nothing was written
    view.add_(1)                                                # a normal tensor's view
    normal.copy_(inference)                                     # reading one is fine
    assert normal.tolist() == [1.0, 1.0, 1.0]
    with ember.inference_mode():
        inference.add_(1)
    assert inference.tolist() == [2.0, 2.0, 2.0]


def test_saving_an_inference_tensor_for_backward_is_refused(made):
    inference = made[0]
    w = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=SAVED):
        inference * w                                           # mul saves its operands
    with pytest.raises(RuntimeError, match=SAVED):
        inference @ w
    (inference + w).sum().backward()                            # add saves nothing
    assert w.grad.tolist() == [1.0, 1.0, 1.0]
    (inference.clone() * w).sum().backward()                    # PyTorch's workaround
    with ember.no_grad():
        assert not (inference * w).requires_grad


def test_a_model_built_in_inference_mode_still_trains_on_normal_inputs():
    with ember.inference_mode():
        model = nn.Linear(3, 2)
        features = nn.Linear(3, 3)(ember.ones(1, 3))
    assert model.weight.is_inference() and model.weight.requires_grad
    model(ember.ones(1, 3)).sum().backward()
    assert model.weight.grad.shape == (2, 3)
    with pytest.raises(RuntimeError, match=SAVED):
        model(features)


def test_requires_grad_is_refused_outside_inference_mode(made):
    inference = made[0]
    for make in (lambda: inference.requires_grad_(), lambda: nn.Parameter(inference),
                 lambda: setattr(inference, "requires_grad", True)):
        with pytest.raises(RuntimeError, match=REQUIRES):
            make()
    with ember.inference_mode():
        assert nn.Parameter(ember.ones(2)).is_inference()
        assert ember.ones(2).requires_grad_().requires_grad
    assert not nn.Parameter(inference, requires_grad=False).requires_grad


def test_custom_functions_refuse_to_save_inference_tensors(made):
    inference = made[0]

    class Mul(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * y, grad * x

    w = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=SAVED):
        Mul.apply(inference, w)
    Mul.apply(inference.clone(), w).sum().backward()
    assert w.grad.tolist() == [1.0, 1.0, 1.0]


def test_inference_mode_is_thread_local():
    import threading
    seen = []
    with ember.inference_mode():
        thread = threading.Thread(target=lambda: seen.append(ember.ones(1).is_inference()))
        thread.start()
        thread.join()
        assert ember.ones(1).is_inference()
    assert seen == [False]


def test_parameter_of_an_integer_tensor_names_the_dtypes_allowed():
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype"):
        nn.Parameter(ember.ones(2, dtype=ember.int64))
    assert nn.Parameter(ember.ones(2, dtype=ember.int64), requires_grad=False).dtype is \
        ember.int64


def test_inference_tensors_have_no_version_counter():
    with ember.inference_mode():
        t = ember.ones(3)
        view = t[1:]
        with pytest.raises(RuntimeError, match="Inference tensors do not track version counter."):
            t._version
        with pytest.raises(RuntimeError, match="Inference tensors do not track version counter."):
            view._version
    with pytest.raises(RuntimeError, match="Inference tensors do not track version counter."):
        t._version
    normal = ember.ones(3)
    with ember.inference_mode():
        normal.add_(1)              # a normal tensor keeps counting, even in inference mode
        assert normal._version == 1
    with ember.inference_mode(False):
        assert ember.ones(2)._version == 0
