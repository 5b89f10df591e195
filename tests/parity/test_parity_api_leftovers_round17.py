"""Round-17 public names checked against PyTorch: ``embedding_bag`` (the native form and
its four outputs), the synchronized batch-norm blocks (``batch_norm_update_stats`` on the
CPU, the CUDA-only others refused there), ``is_distributed``, ``get_file_path``,
``slice_inverse``, ``nested.narrow`` and the flash-attention impl registry of
``nn.attention``."""

import logging
import os
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(fn):
    """``fn()``'s values (each tensor as (dtype name, list)), or its error's type and
    message up to its first period."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn()
    except Exception as e:      # noqa: BLE001 (compared as they are)
        return type(e).__name__, str(e).split(". ")[0]
    if not isinstance(out, (tuple, list)):
        out = (out,)
    return [(str(t.dtype).split(".")[-1], t.tolist()) if hasattr(t, "tolist") else t
            for t in out]


def _same(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        return a == b
    return len(a) == len(b) and all(
        x[0] == y[0] and np.shape(x[1]) == np.shape(y[1])
        and np.allclose(np.asarray(x[1], float), np.asarray(y[1], float),
                        rtol=1e-5, atol=1e-6, equal_nan=True)
        for x, y in zip(a, b))


# --- 1. torch.embedding_bag --------------------------------------------------------------------

_WEIGHT = np.random.RandomState(0).randn(10, 3).astype(np.float32)
_WEIGHT[3, 1] = _WEIGHT[5, 1]                       # a tie for max mode


def _bag(T, indices, offsets, *args, dtype="int64"):
    weight = T.tensor(_WEIGHT, requires_grad=True)
    out = T.embedding_bag(weight, T.tensor(indices, dtype=getattr(T, dtype)),
                          T.tensor(offsets, dtype=getattr(T, dtype)), *args)
    out[0].sum().backward()
    return tuple(out) + (weight.grad,)


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("case", [
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 4], ()),
    ([1, 2, 4, 5], [0, 2, 2], ()),                               # an empty bag
    ([3, 5, 5, 3], [0, 4], (False, None, True)),                 # include_last_offset
    ([1, 2, 2, 5], [0, 2, 2, 3], (False, None, False, 2)),       # padding_idx
    ([1, 2, 2, 5], [0, 2], (False, None, False, -8)),            # negative padding_idx
    ([], [0, 0], ()),
], ids=["two_bags", "empty_bag", "include_last", "padding", "negative_padding", "no_indices"])
def test_embedding_bag_outputs_and_gradient(mode, case):
    indices, offsets, rest = case
    if rest and rest[2]:
        offsets = offsets + [len(indices)]
    args = (False, mode) + rest
    assert _same(_outcome(lambda: _bag(ember, indices, offsets, *args)),
                 _outcome(lambda: _bag(torch, indices, offsets, *args)))


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("weight_grad", [False, True])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_embedding_bag_bookkeeping_shapes_and_dtypes(mode, weight_grad, index_dtype):
    def bag(T):
        weight = T.tensor(_WEIGHT, requires_grad=weight_grad)
        return T.embedding_bag(weight, T.tensor([3, 5, 5, 3], dtype=getattr(T, index_dtype)),
                               T.tensor([0, 2, 4]), False, mode, False, None, True)
    assert _same(_outcome(lambda: bag(ember)), _outcome(lambda: bag(torch)))


def test_embedding_bag_int32_indices_keep_their_dtype_in_the_bookkeeping():
    for mode in (0, 1, 2):
        args = ([1, 2, 3], [0, 1], False, mode, False, None, False, 1)
        assert _same(_outcome(lambda: _bag(ember, *args, dtype="int32")),
                     _outcome(lambda: _bag(torch, *args, dtype="int32")))


def test_embedding_bag_per_sample_weights():
    def run(T):
        psw = T.tensor([0.5, 2.0, 1.0, -1.0])
        return _bag(T, [1, 2, 4, 5], [0, 2], False, 0, False, psw)
    assert _same(_outcome(lambda: run(ember)), _outcome(lambda: run(torch)))


@pytest.mark.parametrize("call", [
    lambda T: T.embedding_bag(T.ones(5, 2), T.tensor([1, 2]), T.tensor([0]), mode="sum"),
    lambda T: T.embedding_bag(T.ones(5, 2), T.tensor([1, 2]), T.tensor([0]), False, 3),
    lambda T: T.embedding_bag(T.ones(5, 2), T.tensor([1, 2]), None),
    lambda T: T.embedding_bag(T.ones(5, 2), T.tensor([1, 2]), T.tensor([[0, 1]])),
    lambda T: T.embedding_bag(T.ones(5, 2), T.tensor([1, 2]), T.tensor([0]), False, 1, False,
                              T.ones(2)),
], ids=["mode_str", "mode_3", "no_offsets", "2d_offsets", "weights_in_mean_mode"])
def test_embedding_bag_errors(call):
    assert _outcome(lambda: call(ember)) == _outcome(lambda: call(torch))


# --- 2. the synchronized batch-norm blocks -----------------------------------------------------

def test_batch_norm_update_stats_updates_running_statistics():
    x = np.random.RandomState(1).randn(4, 3, 5)

    def run(T):
        rm, rv = T.zeros(3, dtype=T.float64), T.ones(3, dtype=T.float64)
        mean, var = T.batch_norm_update_stats(T.tensor(x), rm, rv, 0.3)
        return mean, var, rm, rv
    assert _same(_outcome(lambda: run(ember)), _outcome(lambda: run(torch)))


def test_batch_norm_update_stats_half_input_with_float_statistics():
    x = np.random.RandomState(2).randn(6, 3)

    def run(T):
        rm, rv = T.zeros(3), T.ones(3)
        return T.batch_norm_update_stats(T.tensor(x, dtype=T.float16), rm, rv, 0.5) + (rm, rv)
    ours, theirs = _outcome(lambda: run(ember)), _outcome(lambda: run(torch))
    assert [o[0] for o in ours] == [t[0] for t in theirs] == ["float32"] * 4
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o[1], t[1], rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", ["batch_norm_stats", "batch_norm_elemt",
                                  "batch_norm_gather_stats_with_counts",
                                  "batch_norm_backward_reduce", "batch_norm_backward_elemt"])
def test_cuda_only_blocks_are_refused_on_the_cpu(name):
    def call(T):
        x, c = T.ones(4, 3, 2), T.ones(3)
        args = {"batch_norm_stats": (x, 1e-5), "batch_norm_elemt": (x, c, c, c, c, 1e-5),
                "batch_norm_gather_stats_with_counts": (x, T.ones(2, 3), T.ones(2, 3), c, c,
                                                        0.1, 1e-5, T.ones(2)),
                "batch_norm_backward_reduce": (x, x, c, c, c, True, True, True),
                "batch_norm_backward_elemt": (x, x, c, c, c, c, c,
                                              T.tensor([4, 4], dtype=T.int32))}[name]
        return getattr(T, name)(*args)
    assert _outcome(lambda: call(ember)) == _outcome(lambda: call(torch))


# --- 3. small top-level functions ---------------------------------------------------------------

def test_is_distributed():
    assert ember.is_distributed(ember.ones(2)) is torch.is_distributed(torch.ones(2)) is False
    assert _outcome(lambda: ember.is_distributed(3)) == _outcome(lambda: torch.is_distributed(3))


def test_get_file_path_joins_onto_the_packages_folder():
    ours, theirs = ember.get_file_path("a", "b"), torch.get_file_path("a", "b")
    assert ours == os.path.join(os.path.dirname(os.path.dirname(ember.__file__)), "a", "b")
    assert theirs == os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "a", "b")


@pytest.mark.parametrize("make_src", [
    lambda T: T.arange(12.).reshape(3, 4)[:, 1:3],
    lambda T: T.arange(12.).reshape(3, 4)[1:, ::2],
    lambda T: T.arange(12.)[2:8:2],
], ids=["columns", "strided_rows", "step"])
def test_slice_inverse_views_input_with_the_geometry_of_src(make_src):
    def run(T):
        base = T.arange(100.0, 112.0)
        view = T.slice_inverse(base, make_src(T), 0, 1)
        view.mul_(-1)                 # a view: writes reach ``base``
        return view, base, T.tensor(view.stride()), T.tensor(view.storage_offset())
    assert _same(_outcome(lambda: run(ember)), _outcome(lambda: run(torch)))


def test_slice_inverse_out_of_bounds():
    def run(T):
        return T.slice_inverse(T.zeros(3), T.arange(10.), 0, 0, 10)
    assert _outcome(lambda: run(ember)) == _outcome(lambda: run(torch))


# --- 4. nested.narrow --------------------------------------------------------------------------

@pytest.mark.parametrize("args", [(0, 1, 2), (0, -2, 2), (0, 2, 0), (1, 0, 2), (0, 1, 5),
                                  (0, -4, 1), (0, 1, -1)])
def test_nested_narrow(args):
    def run(T):
        nt = T.nested.narrow(T.arange(12.).reshape(3, 4), *args)
        assert nt.is_nested and nt.layout is T.strided
        return list(nt.unbind())
    assert _same(_outcome(lambda: run(ember)), _outcome(lambda: run(torch)))


def test_nested_narrow_refuses_tensor_bounds_in_the_strided_layout():
    def run(T):
        return T.nested.narrow(T.ones(3, 2), 0, T.tensor(1), 1)
    assert _outcome(lambda: run(ember)) == _outcome(lambda: run(torch))


# --- 5. nn.attention -----------------------------------------------------------------------------

def test_attention_module_exports_sdpa_checks():
    q = ember.ones(1, 2, 4, 8)
    params = ember.nn.attention.SDPAParams(q, q, q, None, 0.0, False, False)
    tq = torch.ones(1, 2, 4, 8)
    tparams = torch.nn.attention.SDPAParams(tq, tq, tq, None, 0.0, False, False)
    for name in ("can_use_flash_attention", "can_use_efficient_attention"):
        assert getattr(ember.nn.attention, name)(params) is \
            getattr(torch.nn.attention, name)(tparams) is False
    assert sorted(ember.nn.attention.__all__) == sorted(torch.nn.attention.__all__)


@pytest.fixture
def registries():
    """ember's and torch's flash-attention impl registries, restored afterwards."""
    from ember.nn.attention import _registry
    saved = dict(_registry._IMPLS)
    yield ember.nn.attention, torch.nn.attention
    for space in (ember.nn.attention, torch.nn.attention):
        space.restore_flash_attention_impl(_raise_warn=False)
    _registry._IMPLS.clear()
    _registry._IMPLS.update(saved)
    from torch.nn.attention import _registry as theirs
    for name in ("MINE", "NONE"):
        theirs._FLASH_ATTENTION_IMPLS.pop(name, None)


def test_flash_attention_impl_registry(registries):
    for space in registries:
        calls = []

        class Handle:
            def remove(self, calls=calls):
                calls.append("remove")

        def activate(calls=calls):
            calls.append("register")
            return Handle()
        assert space.list_flash_attention_impls() == ["FA3", "FA4"]
        assert space.current_flash_attention_impl() is None
        space.register_flash_attention_impl("MINE", register_fn=activate)
        space.register_flash_attention_impl("NONE", register_fn=lambda: None)
        assert space.list_flash_attention_impls() == ["FA3", "FA4", "MINE", "NONE"]
        space.activate_flash_attention_impl("MINE")
        space.activate_flash_attention_impl("MINE")     # the first activation is undone
        assert space.current_flash_attention_impl() == "MINE"
        space.activate_flash_attention_impl("NONE")     # no handle: none counts as active
        assert space.current_flash_attention_impl() is None
        space.activate_flash_attention_impl("MINE")
        with pytest.raises(ValueError, match="Unknown flash attention impl 'OTHER'"):
            space.activate_flash_attention_impl("OTHER")    # undoes MINE before it looks
        assert space.current_flash_attention_impl() is None
        space.activate_flash_attention_impl("MINE")
        space.restore_flash_attention_impl()
        assert calls == ["register", "remove", "register", "remove", "register", "remove",
                         "register", "remove"]
        assert space.current_flash_attention_impl() is None


def test_flash_attention_impl_errors(registries, caplog):
    ours, theirs = registries
    for impl in ("nope", "FA3", "FA4"):
        assert _outcome(lambda: ours.activate_flash_attention_impl(impl)) == \
            _outcome(lambda: theirs.activate_flash_attention_impl(impl))
    assert _outcome(lambda: ours.register_flash_attention_impl("X", lambda: None)) == \
        _outcome(lambda: theirs.register_flash_attention_impl("X", lambda: None))
    with caplog.at_level(logging.WARNING):
        ours.restore_flash_attention_impl()
    assert "Trying to restore default FA2 impl when no custom impl was activated" in caplog.text
