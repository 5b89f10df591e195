"""What the medical imaging and weather programs of round 31 (test_parity_programs_round31_medical
and its _infer sibling) found, each pinned against PyTorch: a Tensor subclass's op results were
re-classed in place where PyTorch's default ``__torch_function__`` returns an alias of them (a
view, with an ``AliasBackward0`` node over the op's), so MONAI-style MetaTensor graphs named
other nodes; ``copy.deepcopy`` of a user subclass without its own ``new_empty`` copied it where
PyTorch refuses; and ``torch.overrides.get_default_nowrap_functions`` was missing."""

import copy

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn, lib):
    try:
        return fn(lib)
    except Exception as e:                          # noqa: BLE001 (the error is the result)
        return type(e).__name__, str(e).split("\n")[0]


def _subclasses(lib):
    class Plain(lib.Tensor):
        pass

    class Handler(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs)

    class Disabled(lib.Tensor):
        __torch_function__ = lib._C._disabled_torch_function_impl

    class OwnNewEmpty(lib.Tensor):
        def new_empty(self, *args, **kwargs):
            return lib.Tensor.new_empty(self, *args, **kwargs).as_subclass(OwnNewEmpty)
    return Plain, Handler, Disabled, OwnNewEmpty


def _alias_results(lib):
    Plain, Handler = _subclasses(lib)[:2]
    out = []
    for cls in (Plain, Handler):
        leaf = lib.ones(3, requires_grad=True)
        w = leaf.as_subclass(cls)
        z = w * 2
        v = w.view(3)
        fresh = lib.ones(3).as_subclass(cls) + 1
        mixed = lib.ones(3, requires_grad=True) * w
        out.append([z.grad_fn.name(), z.grad_fn.next_functions[0][0].name(), z._is_view(),
                    z.is_leaf, v.grad_fn.name(), v._is_view(), fresh._is_view(),
                    fresh._base is None, type(fresh._base).__name__, mixed.grad_fn.name(),
                    type(mixed).__name__])
        (z * v).sum().backward()
        out.append(leaf.grad.tolist())
    return out


def test_subclass_results_are_aliases_as_torch():
    assert _alias_results(ember) == _alias_results(torch)


def _inplace_with_subclass(lib):
    Handler = _subclasses(lib)[1]
    x = lib.zeros(2)
    r = x.add_(lib.ones(2).as_subclass(Handler))
    return type(x).__name__, type(r).__name__, r is x, r._is_view(), x._version


def test_inplace_into_plain_tensor_with_subclass_operand():
    assert _inplace_with_subclass(ember) == _inplace_with_subclass(torch)


def _deepcopies(lib):
    out = []
    for cls in _subclasses(lib):
        x = lib.arange(3.).as_subclass(cls)
        x.meta = {"affine": 1}

        def copied(lib, x=x):
            y = copy.deepcopy(x)
            return type(y).__name__, y.meta, y.tolist(), y is not x
        out.append(_outcome(copied, lib))
    m = lib.nn.Linear(2, 2)
    m.register_buffer("b", lib.ones(2).as_subclass(_subclasses(lib)[3]))
    out.append(type(copy.deepcopy(m).b).__name__)
    out.append(type(copy.deepcopy(lib.nn.Parameter(lib.ones(2)))).__name__)
    return out


def test_deepcopy_of_subclass_needs_new_empty_as_torch():
    assert _deepcopies(ember) == _deepcopies(torch)


def _nowrap(lib):
    funcs = lib.overrides.get_default_nowrap_functions()
    T = lib.Tensor
    return (len(funcs), T._base.__get__ in funcs, T.grad.__get__ in funcs,
            T._grad.__get__ in funcs, T.data.__get__ in funcs, T.add in funcs)


def test_get_default_nowrap_functions():
    assert _nowrap(ember) == _nowrap(torch)


def _grad_through_handler(lib):
    seen = []

    class Meta(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func in lib.overrides.get_default_nowrap_functions():
                seen.append("nowrap")
            return super().__torch_function__(func, types, args, kwargs)
    w = lib.ones(3, requires_grad=True)
    x = w.as_subclass(Meta)
    (x * x).sum().backward()
    g = x.grad
    return seen, g, type(w.grad).__name__, w.grad.tolist()


def test_nowrap_grad_getter_seen_by_handler():
    assert _grad_through_handler(ember) == _grad_through_handler(torch)
