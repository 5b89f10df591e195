"""The smaller top-level functions of PyTorch's namespace: in-place function forms
(``torch.exp_(x)``), type and state queries, and ``ember.random``."""

import math
import warnings

import pytest

import ember
from ember.ops import TOP_LEVEL_IN_PLACE


def test_in_place_functions_change_their_argument():
    x = ember.tensor([0.25, 1.0])
    assert ember.exp_(x) is x
    assert ember.allclose(x, ember.tensor([0.25, 1.0]).exp())
    ember.clamp_(x, max=2.0)
    assert x.tolist() == [pytest.approx(1.2840254), 2.0]
    ember.sqrt_(x)
    ember.zero_(x)
    assert x.tolist() == [0.0, 0.0]
    ember.fill_(x, 3.0)
    assert x.tolist() == [3.0, 3.0]
    assert all(callable(getattr(ember, name)) for name in TOP_LEVEL_IN_PLACE)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        ember.sigmoid_(ember.ones(2, requires_grad=True))


def test_type_and_device_queries():
    x = ember.ones(2)
    assert ember.typename(x) == "ember.FloatTensor" and ember.typename(x.long()) == \
        "ember.LongTensor"
    assert ember.typename(ember.nn.Linear(1, 1)) == "ember.nn.modules.linear.Linear"
    assert ember.typename(3.0) == "float"
    assert ember.is_signed(x) and not ember.is_signed(x.to(ember.uint8))
    assert ember.get_device(x) == -1
    y = ember.detach(x.requires_grad_())
    assert not y.requires_grad and y.data_ptr() == x.data_ptr()


def test_typename_of_classes_and_functions_names_them():
    class Local:
        pass

    assert ember.typename(ember.nn.Parameter) == "ember.nn.parameter.Parameter"
    assert ember.typename(Local) == f"{__name__}.{Local.__qualname__}" == ember.typename(Local())
    assert ember.typename(int) == "int" and ember.typename(None) == "NoneType"
    assert ember.typename(ember.add) == "ember.add"


def test_is_storage_recognises_storages():
    x = ember.ones(2)
    assert ember.is_storage(x.untyped_storage())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # (TypedStorage is deprecated)
        typed = ember.TypedStorage(5, dtype=ember.float32)
    assert ember.is_storage(typed)
    assert not ember.is_storage(x) and not ember.is_storage([1, 2])


def test_core_classes_show_the_namespace_name():
    # as PyTorch's <class 'torch.Tensor'>: no private module in reprs, and pickles by that name
    assert repr(type(ember.ones(1))) == "<class 'ember.Tensor'>"
    assert [c.__module__ for c in (ember.Size, ember.dtype, ember.device, ember.finfo,
                                   ember.iinfo)] == ["ember"] * 5
    assert ember.typename(ember.Size([2])) == "ember.Size"
    import pickle
    size = pickle.loads(pickle.dumps(ember.Size([2, 3])))
    assert type(size) is ember.Size and size == (2, 3)


def test_conjugation_is_a_lazy_view():
    c = ember.tensor([1 + 2j])
    conj = c.conj()
    assert conj.is_conj() and ember.is_conj(conj) and not ember.is_neg(-c)
    resolved = ember.resolve_conj(conj)
    assert not resolved.is_conj() and resolved.tolist() == [1 - 2j]
    assert conj.resolve_neg() is conj and ember.ones(1).conj().is_conj() is False
    assert ember.conj_physical(c).tolist() == [1 - 2j] and c.conj_physical().tolist() == [1 - 2j]


def test_conj_physical_in_place():
    c = ember.tensor([1 + 2j, 3 - 1j])
    assert ember.conj_physical_(c) is c and c.tolist() == [1 - 2j, 3 + 1j]
    assert c.conj_physical_() is c and c.tolist() == [1 + 2j, 3 - 1j]
    real = ember.tensor([1.0, -2.0])
    assert real.conj_physical_() is real and real.tolist() == [1.0, -2.0]
    w = ember.tensor([1 + 1j], requires_grad=True)
    (w * (2 + 1j)).conj_physical_().real.sum().backward()
    assert w.grad.tolist() == [2 - 1j]


def test_anomaly_and_warning_switches():
    try:
        ember.set_anomaly_enabled(True, check_nan=False)
        assert ember.is_anomaly_enabled() and not ember.is_anomaly_check_nan_enabled()
        assert ember.autograd.anomaly.is_anomaly_enabled()
    finally:
        ember.set_anomaly_enabled(False)
    assert not ember.is_anomaly_enabled() and ember.is_anomaly_check_nan_enabled()
    with pytest.raises(TypeError, match=r"argument 'enabled' \(position 1\) must be bool"):
        ember.set_anomaly_enabled(1)
    assert ember.is_warn_always_enabled() is False
    ember.set_warn_always(True)
    assert ember.is_warn_always_enabled() is True
    ember.set_warn_always(False)


def test_sampling_methods():
    ember.manual_seed(0)
    probs = ember.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert probs.multinomial(1).tolist() == [[1], [2]]
    assert ember.full((4,), 1.0).bernoulli().tolist() == [1.0] * 4
    assert ember.ones(3).bernoulli(0.0).tolist() == [0.0] * 3


def test_fork_rng_restores_the_generators():
    ember.manual_seed(5)
    with ember.random.fork_rng():
        inside = ember.rand(3)
    assert ember.equal(ember.rand(3), inside)
    with ember.random.fork_rng(enabled=False):       # draws inside advance the generator
        inside = ember.rand(3)
    assert not ember.equal(ember.rand(3), inside)
    assert ember.random.initial_seed() == 5
    with ember.random.fork_rng(device_type="mps"):      # no MPS device: only the CPU's forks
        inside = ember.rand(3)
    assert ember.equal(ember.rand(3), inside)


def test_adjoint_and_arctan2():
    x = ember.tensor([[1 + 1j, 2], [3, 4 - 2j], [5, 6]])
    assert ember.equal(ember.adjoint(x), x.mH) and ember.equal(x.adjoint(), x.mH)
    with pytest.raises(RuntimeError, match="only supported on matrices or batches of matrices. "
                                           "Got 1-D tensor."):
        ember.ones(3).adjoint()
    a, b = ember.tensor([1.0, -1.0]), ember.tensor([2.0, 2.0])
    assert ember.equal(ember.arctan2(a, b), ember.atan2(a, b)) and ember.equal(a.arctan2(b),
                                                                               a.atan2(b))


def test_device_modules_layouts_and_thread_counts():
    assert ember.get_device_module("cuda") is ember.cuda
    assert ember.get_device_module(ember.device("cpu")) is ember.cpu
    expected = ember.cuda if ember.cuda.is_available() else ember.cpu
    assert ember.get_device_module() is expected
    assert ember.get_device_module("mps") is ember.mps and ember.mps.is_available() is False
    assert ember.get_device_module("xpu:0") is ember.xpu and ember.xpu.device_count() == 0
    with pytest.raises(RuntimeError, match="Device 'tpu' does not have a corresponding module"):
        ember.get_device_module("tpu")
    assert isinstance(ember.ones(1).layout, ember.layout) and ember.ones(1).layout is ember.strided
    assert not ember.is_storage(ember.ones(1))
    before = ember.get_num_interop_threads()
    ember.set_num_interop_threads(3)
    assert ember.get_num_interop_threads() == 3
    ember.set_num_interop_threads(before)
    with pytest.raises(RuntimeError, match="set_num_interop_threads expects a positive integer"):
        ember.set_num_interop_threads(0)
    with pytest.raises(RuntimeError, match="set_num_interop_threads expects an int, but got float"):
        ember.set_num_interop_threads(2.0)


def test_scatters_into_copies_with_gradients():
    src = ember.ones(3, requires_grad=True)
    base = ember.zeros(2, 3, requires_grad=True)
    out = ember.select_scatter(base, src * 2, 0, 1)
    assert out.tolist() == [[0.0] * 3, [2.0] * 3] and base.tolist() == [[0.0] * 3] * 2
    out.sum().backward()
    assert src.grad.tolist() == [2.0] * 3 and base.grad.tolist() == [[1.0] * 3, [0.0] * 3]
    sliced = ember.slice_scatter(ember.zeros(4, 2), ember.ones(2, 2), 0, 1, 4, 2)
    assert sliced.tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    assert ember.zeros(2, 3).slice_scatter(ember.ones(2, 1), dim=-1, start=2).tolist() == [
        [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    with pytest.raises(RuntimeError, match=r"src size = \[2\], slice size = \[3\]"):
        ember.select_scatter(ember.zeros(2, 3), ember.ones(2), 0, 1)
    x = ember.arange(6.0).reshape(2, 3)
    copy = x.narrow_copy(1, 1, 2)
    assert copy.tolist() == [[1.0, 2.0], [4.0, 5.0]] and copy.is_contiguous()


def test_nonzero_static_cuts_or_pads():
    assert ember.nonzero_static(ember.tensor([0, 1, 0, 2]), size=3).tolist() == [[1], [3], [-1]]
    assert ember.tensor([[1, 0], [1, 1]]).nonzero_static(size=2, fill_value=-5).tolist() == [
        [0, 0], [1, 0]]
    with pytest.raises(RuntimeError, match="'size' must be an non-negative integer"):
        ember.nonzero_static(ember.tensor([0, 1]), size=-1)


def test_split_aliases_reversed_and_dense():
    assert [t.tolist() for t in ember.ones(3).split_with_sizes([1, 2])] == [[1.0], [1.0, 1.0]]
    assert [t.tolist() for t in ember.unsafe_chunk(ember.arange(5), 2)] == [[0, 1, 2], [3, 4]]
    x = ember.arange(6.0).reshape(2, 3)
    assert [r.tolist() for r in reversed(x)] == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]
    assert x.to_dense() is x and ember.tensor([1]).is_nonzero()


def test_deprecated_triangular_solve(monkeypatch):
    import warnings
    from ember import _warn
    monkeypatch.setattr(_warn, "_WARNED_ONCE", set())
    a = ember.tensor([[2.0, 0.0], [1.0, 1.0]])
    b = ember.tensor([[2.0], [3.0]])
    with pytest.warns(UserWarning, match="triangular_solve is deprecated") as caught:
        solution, coefficient = ember.triangular_solve(b, a, upper=False)
    assert caught[0].filename == __file__
    assert solution.tolist() == [[1.0], [2.0]] and ember.equal(coefficient, a)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")     # PyTorch warns once per process
        transposed = b.triangular_solve(a.mT, upper=True, transpose=True).solution
    assert transposed.tolist() == [[1.0], [2.0]] and caught == []


@pytest.mark.filterwarnings("ignore:torch.triangular_solve is deprecated")
@pytest.mark.parametrize("call, message", [
    (lambda a, b: ember.triangular_solve(b.double(), a),
     "Expected b and A to have the same dtype, but found b of type Double and A of type Float "
     "instead."),
    (lambda a, b: ember.triangular_solve(b[0], a),
     "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has 1 "
     "dimensions instead"),
    (lambda a, b: ember.triangular_solve(b, a[0]),
     "torch.triangular_solve: Expected A to have at least 2 dimensions, but it has 1 "
     "dimensions instead"),
    (lambda a, b: ember.triangular_solve(ember.ones(3, 1), a),
     "Incompatible matrix sizes for triangular_solve: each A matrix is 2 by 2 but each b "
     "matrix is 3 by 1"),
    (lambda a, b: ember.triangular_solve(b, a, out=(ember.empty(0).double(), ember.empty(0))),
     "Expected out tensor to have dtype float, but got double instead"),
])
def test_triangular_solve_errors(call, message):
    a = ember.tensor([[2.0, 0.0], [1.0, 1.0]])
    with pytest.raises(RuntimeError) as info:
        call(a, ember.tensor([[2.0], [3.0]]))
    assert str(info.value) == message


def test_namespace_constants_and_flush_denormal():
    assert (ember.pi, ember.e) == (math.pi, math.e) and ember.newaxis is None
    assert ember.inf == math.inf and math.isnan(ember.nan)
    scores = ember.where(ember.tensor([True, False]), ember.tensor([1.0, 2.0]), -ember.inf)
    assert scores.softmax(0).tolist() == [1.0, 0.0]
    assert ember.ones(3)[ember.newaxis].shape == (1, 3)
    tiny = ember.tensor([1e-323], dtype=ember.float64)
    assert ember.set_flush_denormal(True) is False and tiny.item() > 0   # denormals kept
    with pytest.raises(RuntimeError, match="flush_denormal expects a bool, but got int"):
        ember.set_flush_denormal(1)


def test_assert_is_a_function_form_of_assert():
    assert ember._assert(ember.tensor(True), "unused") is None
    ember._assert(1, 5)
    with pytest.raises(AssertionError, match="^Input height 3 doesn't match 4$"):
        ember._assert(ember.tensor(3) == 4, "Input height 3 doesn't match 4")
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        ember._assert(ember.tensor([1, 0]), "x")
