"""vmap and boolean masks (round 26's post-training programs): a write through a mask batched
per example is refused with PyTorch's message; an unbatched mask is batched in one call, with
no fallback warning; the fallback names the ATen op on every call, blaming the user's line;
nonzero_static runs there."""

import warnings

import numpy as np
import pytest

import ember
from ember.func import grad, vmap

_BOOL_MASK = ("vmap: We do not support batching operators that can support dynamic shape. "
              "Attempting to batch over indexing with a boolean mask.")


def _set_above_one(x):
    y = x.clone()
    y[y > 1] = 0.0
    return y


@pytest.mark.parametrize("f", [
    _set_above_one,
    lambda x: x.index_put((x > 1,), ember.tensor(0.0)),
    lambda x: x.clone().index_put_((x > 1,), ember.tensor(1.0), accumulate=True),
    lambda x: ember.zeros(3).index_put((x > 1,), ember.tensor(0.0)),
], ids=["setitem", "index_put", "index_put_", "into_unbatched"])
def test_a_batched_mask_write_is_refused(f):
    with pytest.raises(RuntimeError, match=_BOOL_MASK.replace(".", r"\.")):
        vmap(f)(ember.arange(6.0).view(2, 3))


def test_dpo_label_masking_inside_vmap_grad_is_refused():
    def loss(w, labels):
        labels = labels.clone()
        labels[labels == -100] = 0
        return w[labels].sum()
    with pytest.raises(RuntimeError, match="boolean mask"):
        vmap(grad(loss), in_dims=(None, 0))(ember.arange(5.0), ember.tensor([[1, -100]] * 2))


def _no_fallback(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    assert not [w for w in caught if "performance drop" in str(w.message)]
    return out


def test_an_unbatched_mask_is_batched_in_one_call():
    x = np.arange(12.0).reshape(2, 2, 3)
    mask = np.array([True, False, True])
    values = np.array([[7.0, 8.0], [9.0, 10.0]])
    got = _no_fallback(vmap(lambda a, v: a.index_put((ember.from_numpy(mask),), v)),
                       ember.from_numpy(x[:, 0]), ember.from_numpy(values))
    want = x[:, 0].copy()
    want[:, mask] = values
    assert got.tolist() == want.tolist()

    def after_slice(a):
        b = a.clone()
        b[:, ember.from_numpy(mask)] = 5.0
        return b
    want = x.copy()
    want[:, :, mask] = 5.0
    assert _no_fallback(vmap(after_slice), ember.from_numpy(x)).tolist() == want.tolist()
    g = _no_fallback(vmap(grad(lambda a, v: (a.index_put((ember.from_numpy(mask),), v * 2) ** 2)
                               .sum(), argnums=1)),
                     ember.from_numpy(x[:, 0]), ember.from_numpy(values))
    assert g.tolist() == (8 * values).tolist()


def test_the_fallback_names_the_aten_op_on_every_call_at_the_users_line():
    for _ in range(2):
        with pytest.warns(UserWarning, match="batching rule for aten::argwhere\\.") as caught:
            vmap(lambda a: ember.argwhere(a > -1))(ember.arange(6.0).view(2, 3))
        assert caught[0].filename == __file__


def test_nonzero_static_under_vmap():
    x = np.array([[0.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    with pytest.warns(UserWarning, match="aten::nonzero_static"):
        got = vmap(lambda a: ember.nonzero_static(a, size=3, fill_value=-7))(ember.from_numpy(x))
    assert got.tolist() == [[[1], [2], [-7]], [[0], [-7], [-7]]]
    assert got.dtype == ember.int64


_M3, _M4 = np.array([True, False, True]), np.array([True, False, True, True])
_KEYS = {       # a key on one (3, 4) example: masks beside slices, None, Ellipsis, int indices
    "ellipsis": (Ellipsis, _M4),
    "none_before": (None, _M3),
    "none_after": (_M3, None),
    "mask_2d": np.array([[True, False, True, False]] * 3),
    "int_then_mask": (np.array([[0], [2]]), _M4),
    "mask_then_int": (_M3, np.array([1, 3])),
    "slice_then_mask": (slice(1, 3), _M4),
    "mask_int_scalar": (_M3, 1),
}


def _ember_key(key):
    parts = key if isinstance(key, tuple) else (key,)
    return tuple(ember.from_numpy(k) if isinstance(k, np.ndarray) else k for k in parts)


@pytest.mark.parametrize("name", _KEYS)
def test_unbatched_mask_keys_write_and_differentiate_as_the_loop(name):
    key = _KEYS[name]
    x, v = np.arange(24.0).reshape(2, 3, 4), np.array([-1.0, -2.0])
    want, grads = x.copy(), 2 * x
    for i in range(2):
        want[i][key] = v[i]
        grads[i][key] *= 9

    def write(a, s):
        b = a.clone()
        b[_ember_key(key)] = s
        return b

    def loss(a):
        b = a.clone()
        b[_ember_key(key)] = b[_ember_key(key)] * 3
        return (b ** 2).sum()
    xs = ember.from_numpy(x)
    assert _no_fallback(vmap(write), xs, ember.from_numpy(v)).tolist() == want.tolist()
    assert _no_fallback(vmap(grad(loss)), xs).tolist() == grads.tolist()
