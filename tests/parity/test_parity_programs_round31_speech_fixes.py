"""What the speech, OCR and restoration programs of round 31 (test_parity_programs_round31_speech
and its _restore sibling) and their probes found, each pinned against PyTorch: a create_graph
gradient of ctc_loss had no history, so a gradient penalty through it failed with "element 0 of
tensors does not require grad" where PyTorch's carries the node NotImplemented and refuses with
"derivative for aten::_ctc_loss_backward is not implemented"; ctc_loss took a bare number
for a length where PyTorch's overloads refuse it, and its vmap rule ran silently where PyTorch's
loop warns (naming ``ctc_loss.Tensor``/``.IntList``, or under grad ``_ctc_loss`` and
``_ctc_loss_backward``, once per call of each nested level); a NumPy bool given as a number
(``x * (np.random.rand() < p)``) was read as a bool where PyTorch's parser reads it as a float,
so int and bool tensors kept their dtype (and ``full`` made a bool tensor), and ``torch.add``,
``sub``, ``mul``, ``div`` and ``floor_divide`` refused a NumPy number as their first input when
no tensor was given, where PyTorch wraps it as it wraps a Python number; ``nn.LayerNorm`` and
``nn.RMSNorm`` refused a NumPy integer size (``np.prod(shape)``), and ``F.layer_norm`` took a
bare int that PyTorch's ``int[]`` parser refuses."""

import re
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn, lib):
    try:
        value = fn(lib)
    except Exception as e:                          # noqa: BLE001 (the error is the result)
        return type(e).__name__, str(e).split("\n")[0]
    if isinstance(value, (lib.Tensor,)):
        return str(value.dtype).split(".")[1], value.detach().double().numpy().tolist()
    return value


def _ctc(lib, reduction):
    lp = (lib.arange(40.).reshape(5, 2, 4).sin()).log_softmax(2).requires_grad_()
    loss = lib.nn.functional.ctc_loss(lp, lib.tensor([1, 2, 1]), lib.tensor([5, 4]),
                                      lib.tensor([2, 1]), reduction=reduction)
    return lp, loss


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_double_backward_refuses_as_torch(reduction):
    def run(lib):
        lp, loss = _ctc(lib, reduction)
        g, = lib.autograd.grad(loss.sum(), lp, create_graph=True)
        first = (g.requires_grad, type(g.grad_fn).__name__, g.detach().numpy().copy())
        with pytest.raises(RuntimeError) as err:
            (g * g).sum().backward()
        return first, str(err.value)
    (ours, our_err), (theirs, their_err) = run(ember), run(torch)
    assert ours[:2] == theirs[:2] == (True, "NotImplemented")
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5, atol=1e-6)
    assert our_err == their_err == "derivative for aten::_ctc_loss_backward is not implemented"


def test_ctc_first_order_gradient_unchanged():
    for lib in (ember, torch):
        lp, loss = _ctc(lib, "mean")
        g, = lib.autograd.grad(loss, lp)
        assert g.grad_fn is None and not g.requires_grad
    ours, theirs = _ctc(ember, "sum"), _ctc(torch, "sum")
    ours[1].backward()
    theirs[1].backward()
    np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy(), rtol=1e-5,
                               atol=1e-6)


CTC_LENGTHS = {"ints": lambda t: (6, 3), "lists": lambda t: ([6], [3]),
               "0-dim": lambda t: (t.tensor(6), t.tensor(3)), "tuple_int": lambda t: ((6,), 3),
               "float": lambda t: (6.0, 3), "float_lists": lambda t: ([6.0], [3.0]),
               "bool_lists": lambda t: ([True], [True]), "float_item": lambda t: ([6], (3.5,)),
               "list_and_tensor": lambda t: ([6], t.tensor([3])),
               "tensor_and_list": lambda t: (t.tensor([6]), [3]),
               "index_items": lambda t: ([t.tensor(6)], [np.int64(3)]),
               "float_tensor_item": lambda t: ([t.tensor(6.)], [3])}


@pytest.mark.parametrize("form", sorted(CTC_LENGTHS))
@pytest.mark.parametrize("entry", ["F.ctc_loss", "torch.ctc_loss"])
def test_ctc_lengths_parse_as_torch(form, entry):
    # PyTorch's overloads take a tuple of ints or a tensor for each length, never a number,
    # and both lengths of one kind (its whole "invalid combination" message is compared)
    def run(lib):
        lp = (lib.arange(30.).reshape(6, 5).sin()).log_softmax(-1)
        a, b = CTC_LENGTHS[form](lib)        # (named: ember words its error from the call)
        if entry == "F.ctc_loss":
            return lib.nn.functional.ctc_loss(lp, lib.tensor([1, 2, 3]), a, b)
        return lib.ctc_loss(lp, lib.tensor([1, 2, 3]), a, b, 0, 1, False)

    def outcome(lib):
        try:
            out = run(lib)
        except TypeError as e:
            return "TypeError", str(e)
        return str(out.dtype).split(".")[1], out.item()
    ours, theirs = outcome(ember), outcome(torch)
    if theirs[0] == "float32":
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
        assert ours[0] == theirs[0]
    else:
        assert ours == theirs


def _vmap_ctc_warnings(lib, case):
    lp = (lib.arange(2 * 5 * 1 * 4.).reshape(2, 5, 1, 4).sin()).log_softmax(-1)
    def by_tensor(x):
        return lib.nn.functional.ctc_loss(x, lib.tensor([[1, 2]]), lib.tensor([5]),
                                          lib.tensor([2]))

    def by_list(x):
        return lib.nn.functional.ctc_loss(x, lib.tensor([[1, 2]]), [5], [2])

    def per_example(x, n):
        return lib.nn.functional.ctc_loss(x, lib.tensor([[1, 2]]), n, lib.tensor([2]))

    def vmap_inside_grad(x):            # the inner vmap's loop runs before grad decomposes
        return lib.func.vmap(by_tensor)(x[None].expand(3, *x.shape)).sum()

    def none_sum(x):
        return lib.nn.functional.ctc_loss(x.expand(5, 2, 4), lib.tensor([[1, 2], [2, 1]]),
                                          lib.tensor([5, 4]), lib.tensor([2, 2]), reduction="none")

    vmap, grad, jacrev = lib.func.vmap, lib.func.grad, lib.func.jacrev
    lengths = lib.tensor([[5], [4]])
    run = {"tensor": lambda: vmap(by_tensor)(lp),
           "list": lambda: vmap(by_list)(lp),
           "nested": lambda: vmap(vmap(by_tensor))(lib.stack([lp, lp, lp])),
           "grad": lambda: vmap(grad(by_tensor))(lp),
           "nested_grad": lambda: vmap(vmap(grad(by_tensor)))(lib.stack([lp, lp, lp])),
           "grad_between": lambda: vmap(grad(vmap_inside_grad))(lp),
           "jacrev": lambda: vmap(jacrev(none_sum))(lp),
           "jacrev_list": lambda: vmap(jacrev(lambda x: lib.nn.functional.ctc_loss(
               x, lib.tensor([[1, 2]]), [5], [2], reduction="sum")))(lp),
           "per_example": lambda: vmap(per_example)(lp, lengths)}[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run()
    return out.numpy(), [re.search(r"rule for (\S+)\. Please", str(w.message)).group(1)
                         for w in caught]


@pytest.mark.parametrize("case", ["tensor", "list", "nested", "grad", "nested_grad",
                                  "grad_between", "jacrev", "jacrev_list", "per_example"])
def test_vmap_ctc_loss_warns_as_torchs_loop(case):
    (ours, our_warnings), (theirs, their_warnings) = (_vmap_ctc_warnings(ember, case),
                                                      _vmap_ctc_warnings(torch, case))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert our_warnings == their_warnings


@pytest.mark.parametrize("form", ["float_lists", "list_and_tensor", "ints"])
def test_vmap_ctc_loss_refuses_lengths_as_torch(form):
    # the rule folds the batch only for lengths PyTorch's parser takes (its message is left)
    def run(lib):
        lp = (lib.arange(2 * 6 * 5.).reshape(2, 6, 1, 5).sin()).log_softmax(-1)
        a, b = CTC_LENGTHS[form](lib)
        with pytest.raises(TypeError):
            lib.func.vmap(lambda x: lib.nn.functional.ctc_loss(x, lib.tensor([[1, 2, 3]]), a,
                                                               b))(lp)
    run(ember)
    run(torch)


_B = np.bool_(True)
NUMPY_BOOL_CASES = {
    "int_mul": lambda t: t.tensor([1, 2]) * _B,
    "int_add": lambda t: t.tensor([1, 2]) + np.bool_(False),
    "rsub": lambda t: _B - t.tensor([1, 2]),
    "bool_mul": lambda t: t.tensor([True, False]) * _B,
    "uint8_pow": lambda t: t.tensor([1, 2], dtype=t.uint8) ** _B,
    "where": lambda t: t.where(t.tensor([True, False]), t.tensor([3, 4]), np.bool_(False)),
    "clamp_int": lambda t: t.tensor([1, 2]).clamp(max=_B),
    "clamp_bool": lambda t: t.tensor([True, False]).clamp(min=np.bool_(False)),
    "full": lambda t: t.full((2,), _B),
    "full_like_int": lambda t: t.full_like(t.ones(2, dtype=t.int32), _B),
    "alpha_int": lambda t: t.tensor([1, 2]).add(1, alpha=_B),
    "bitwise_and": lambda t: t.tensor([True, False]) & _B,
    "masked_fill": lambda t: t.tensor([1, 2]).masked_fill(t.tensor([True, False]), _B),
    "fill_": lambda t: t.tensor([True, False]).fill_(np.bool_(False)),
    "eq": lambda t: t.tensor([1, 0]) == _B,
    "tensor": lambda t: t.tensor(_B),
    "float_mul": lambda t: t.tensor([1.5, 2.0]) * _B,
}


@pytest.mark.parametrize("case", sorted(NUMPY_BOOL_CASES))
def test_numpy_bool_is_read_as_a_float_number(case):
    fn = NUMPY_BOOL_CASES[case]
    assert _outcome(fn, ember) == _outcome(fn, torch)


def test_numpy_bool_augmentation_idiom():
    # flip = np.random.rand() < p; img = img * flip + img.flip(-1) * (not flip)
    def run(lib):
        img = lib.arange(6).reshape(2, 3)
        flip = np.float64(0.3) < 0.5
        out = img * flip + img.flip(-1) * (not flip)
        return str(out.dtype).split(".")[1], out.tolist()
    assert run(ember) == run(torch) == ("float32", [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "floor_divide"])
@pytest.mark.parametrize("first", [np.bool_(True), np.int64(3), np.float64(1.5), np.float32(2.5),
                                   3, True, 1.5], ids=repr)
def test_numpy_number_as_first_input_is_wrapped_as_torch(op, first):
    # torch.mul(np.float64(a), b) with no tensor at all: the number becomes a 0-dim tensor
    for second in (2, np.float64(2.0)):
        assert _outcome(lambda t: getattr(t, op)(first, second), ember) == \
            _outcome(lambda t: getattr(t, op)(first, second), torch)


NORM_SIZE_CASES = {
    "LayerNorm_np_int": lambda t: t.nn.LayerNorm(np.int64(3))(t.arange(6.).reshape(2, 3)),
    "RMSNorm_np_int": lambda t: t.nn.RMSNorm(np.int32(3), eps=1e-6)(t.arange(6.).reshape(2, 3)),
    "LayerNorm_shape": lambda t: [str(type(s).__name__) for s in t.nn.LayerNorm(
        np.int64(3)).normalized_shape],
    "layer_norm_int": lambda t: t.nn.functional.layer_norm(t.ones(2, 3), 3),
    "layer_norm_np_int": lambda t: t.nn.functional.layer_norm(t.ones(2, 3), np.int64(3)),
    "torch_layer_norm_int": lambda t: t.layer_norm(t.ones(2, 3), 3),
    "layer_norm_list_np": lambda t: t.nn.functional.layer_norm(t.arange(6.).reshape(2, 3),
                                                               [np.int64(3)]),
    "layer_norm_float": lambda t: t.nn.functional.layer_norm(t.ones(2, 3), 3.0),
    "layer_norm_float_list": lambda t: t.nn.functional.layer_norm(t.ones(2, 3), [3.0]),
    "layer_norm_late_float": lambda t: t.layer_norm(t.ones(2, 3), (3, 2.0)),
    "layer_norm_bool_tuple": lambda t: t.nn.functional.layer_norm(t.ones(2, 1), (True,)),
    "layer_norm_Size": lambda t: t.nn.functional.layer_norm(t.arange(6.).reshape(2, 3),
                                                            t.Size([3])),
    "rms_norm_int": lambda t: t.nn.functional.rms_norm(t.ones(2, 3), 3),
}


@pytest.mark.parametrize("case", sorted(NORM_SIZE_CASES))
def test_norm_sizes_parse_as_torch(case):
    fn = NORM_SIZE_CASES[case]
    ours, theirs = _outcome(fn, ember), _outcome(fn, torch)
    if isinstance(theirs, tuple) and isinstance(theirs[1], list):
        assert ours[0] == theirs[0]
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5, atol=1e-6)
    else:
        assert ours == theirs
