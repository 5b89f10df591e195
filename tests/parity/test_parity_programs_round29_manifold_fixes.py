"""What the manifold programs of round 29 (test_parity_programs_round29_manifold.py and its
_recsys sibling) found, each pinned against PyTorch: geoopt's ManifoldParameter, a subclass of
a user Tensor subclass and of nn.Parameter, is built with its own keyword arguments (Parameter
has no __init__ to refuse them), and Parameter's methods (``__deepcopy__``, ``__repr__``) are
not hidden by the Tensor-method entries its user base class was given; and a tensor with
attributes reduces to PyTorch's pair (geoopt's ``__reduce_ex__`` unpacks
``super().__reduce_ex__(proto)`` into two and appends its manifold)."""

import copy
import functools
import io
import pickle

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _classes(lib, own_repr):
    class ManifoldTensor(lib.Tensor):
        def __new__(cls, data, manifold=None, requires_grad=False):
            instance = lib.Tensor._make_subclass(cls, data, requires_grad)
            instance.manifold = manifold
            return instance

        __torch_function__ = lib._C._disabled_torch_function_impl

    if own_repr:
        ManifoldTensor.__repr__ = lambda self: "on " + str(self.manifold)

    class ManifoldParameter(ManifoldTensor, lib.nn.Parameter):
        def __new__(cls, data=None, manifold=None, requires_grad=True):
            if not isinstance(data, ManifoldTensor):
                data = ManifoldTensor(data, manifold=manifold or "sphere")
            instance = ManifoldTensor._make_subclass(cls, data, requires_grad)
            instance.manifold = data.manifold
            return instance
    return ManifoldTensor, ManifoldParameter


def _probe(lib, own_repr):
    _, ManifoldParameter = _classes(lib, own_repr)
    p = ManifoldParameter(lib.ones(2), manifold="ball")
    twin = copy.deepcopy(p)
    return [type(p).__name__, p.manifold, p.requires_grad, repr(p),
            isinstance(p, lib.nn.Parameter), type(twin).__name__, str(twin.manifold),
            twin.requires_grad, type(p).__deepcopy__.__qualname__]


@pytest.mark.parametrize("own_repr", [False, True])
def test_manifold_parameter_like_torch(own_repr):
    assert _probe(ember, own_repr) == _probe(torch, own_repr)


def test_parameter_keywords_reach_subclass_new():
    for lib in (ember, torch):
        class Tagged(lib.nn.Parameter):
            def __new__(cls, data, tag=None, requires_grad=True):
                out = lib.Tensor._make_subclass(cls, data, requires_grad)
                out.tag = tag
                return out
        assert Tagged(lib.zeros(1), tag="x").tag == "x"
        assert Tagged(lib.zeros(1), "y", False).requires_grad is False


def test_plain_mixin_keeps_parameter_repr_and_deepcopy():
    got = []
    for lib in (ember, torch):
        class Base(lib.Tensor):
            pass

        class Param(Base, lib.nn.Parameter):
            pass
        p = Param(lib.ones(2))
        got.append([repr(p), type(copy.deepcopy(p)).__name__, p.requires_grad])
    assert got[0] == got[1]


def _rebuild_manifold_tensor(*args, build_fn):
    tensor = build_fn(*args[:-4])
    return args[-3](tensor, manifold=args[-2], requires_grad=args[-1])


def _pickling_classes(lib):
    """geoopt's ManifoldTensor/ManifoldParameter with its __reduce_ex__, made module globals
    (one pair per library) so that pickle finds them."""

    class ManifoldTensor(lib.Tensor):
        __torch_function__ = lib._C._disabled_torch_function_impl

        def __new__(cls, data, manifold="euclid", requires_grad=False):
            instance = lib.Tensor._make_subclass(cls, data.data, requires_grad)
            instance.manifold = manifold
            return instance

        def __reduce_ex__(self, proto):
            build, proto = super().__reduce_ex__(proto)
            new_build = functools.partial(_rebuild_manifold_tensor, build_fn=build)
            return new_build, proto + (dict(), self.__class__, self.manifold, self.requires_grad)

    class ManifoldParameter(ManifoldTensor, lib.nn.Parameter):
        def __new__(cls, data=None, manifold="euclid", requires_grad=True):
            if not isinstance(data, ManifoldTensor):
                data = ManifoldTensor(data, manifold=manifold)
            instance = ManifoldTensor._make_subclass(cls, data, requires_grad)
            instance.manifold = data.manifold
            return instance

    for cls in (ManifoldTensor, ManifoldParameter):
        cls.__name__ = cls.__qualname__ = f"_{cls.__name__}_{lib.__name__}"
        globals()[cls.__name__] = cls
    return ManifoldTensor, ManifoldParameter


def _pickled(lib):
    ManifoldTensor, ManifoldParameter = _pickling_classes(lib)
    t = ManifoldTensor(lib.tensor([1.0, 2.0]), manifold="ball")
    p = ManifoldParameter(lib.tensor([3.0]), manifold="sphere")
    t.extra = 7
    buf = io.BytesIO()
    lib.save({"t": t, "p": p}, buf)
    buf.seek(0)
    saved = lib.load(buf, weights_only=False)
    plain = lib.tensor([1.0])
    plain.label = "x"
    out = []
    for x in (pickle.loads(pickle.dumps(t)), pickle.loads(pickle.dumps(p)), saved["t"],
              saved["p"], pickle.loads(pickle.dumps(plain))):
        out.append([type(x).__name__.rsplit("_", 1)[0], x.tolist(), x.requires_grad,
                    getattr(x, "manifold", None), getattr(x, "label", None)])
    return [len(t.__reduce_ex__(2)), len(plain.__reduce_ex__(2))] + out


def test_subclass_reduce_ex_pair_like_torch():
    assert _pickled(ember) == _pickled(torch)
