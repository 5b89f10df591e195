"""What the computational biology and chemistry programs of round 33
(test_parity_programs_round33_bio*.py) found, pinned against PyTorch.

- ``flip`` (and ``fliplr``/``flipud``) always returned a row-major copy; PyTorch flips into
  ``empty_like(input)``, a preserve_format layout of the input. So the reverse complement of a
  channels-first one-hot (``one_hot(seq).permute(0, 2, 1).flip(-1)``) came back contiguous, and
  ``.transpose(1, 2).view(b, -1)`` of it, which PyTorch allows, raised (and a ``view`` PyTorch
  refuses passed); a channels_last image flipped lost its channels_last layout.
- ``segment_reduce`` with ``offsets`` read them as lengths from 0 to ``data.size(axis)``: offsets
  that start past 0 or stop short of the end (segment i is ``data[offsets[i]:offsets[i+1]]``,
  which PyTorch allows) raised "Expected all rows of lengths ... sum to data.size", or with
  ``unsafe=True`` reduced the wrong elements. Its checks now follow PyTorch's order and
  messages: a bad ``axis`` (IndexError first), "... must be defined." (with its full stop),
  data of fewer dims than lengths, "lengths contains negative value!", a negative segment
  under ``unsafe``, empty lengths/offsets, and lengths/offsets that are not int32/int64
  (NotImplementedError "_segment_reduce_lengths_cpu_kernel1" ...) before the data's dtype.

Found and left alone: ``func.jacrev(torch.cdist)`` is wrong in PyTorch 2.13 (every row of the
Jacobian is the first row's; its batched cdist backward), right in ember;
``polygamma(1, -1.)`` (and ``digamma``'s gradient at a negative integer)
is inf in ember, 1.29e15 in PyTorch 2.13 (a finite artefact of its series at the pole);
``pack_padded_sequence`` with a length above the padded length reads past the input in
PyTorch (no check) and raises in ember; ``sparse_coo_tensor`` with out-of-range indices
checks them unless ``check_invariants=False`` is given, where PyTorch (unchecked by default)
builds a tensor that later aborts the process; ``segment_reduce`` with offsets past the data's
end, or ``unsafe`` lengths summing past it, reads past the data in PyTorch (ember raises).
``vmap(torch.bincount)`` with per-sample lengths differing: PyTorch's fallback fails in
``stack``, ember raises its dynamic-shape error."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _inputs(lib):
    base = lib.from_numpy(np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5))
    seq = lib.from_numpy(np.array([[0, 3, 1, 2, 2], [1, 1, 0, 3, 2]]))
    return {
        "transposed": base[0].transpose(1, 2),
        "permuted": base.permute(3, 1, 0, 2),
        "channels_last": base.contiguous(memory_format=lib.channels_last),
        "strided": base[:, :, ::2, 1:],
        "size_one": base[:1, :, :1].transpose(0, 3),
        "one_hot_cf": lib.nn.functional.one_hot(seq, 4).permute(0, 2, 1).float(),
        "empty": lib.zeros(0, 3).t(),
    }


@pytest.mark.parametrize("name", list(_inputs(ember)))
@pytest.mark.parametrize("dims", [(), (0,), (-1,), (0, -1), (1, 2)])
def test_flip_keeps_the_layout_of_its_input(name, dims):
    def call(lib):
        x = _inputs(lib)[name]
        d = tuple(d for d in dims if -x.ndim <= d < x.ndim)
        out = x.flip(d)
        return out.stride(), out.is_contiguous(), out.tolist()
    assert call(ember) == call(torch)


def test_fliplr_flipud_keep_the_layout_of_their_input():
    def call(lib):
        x = _inputs(lib)["transposed"]
        return x.fliplr().stride(), x.flipud().stride(), lib.rot90(x, 2, (0, 1)).stride()
    assert call(ember) == call(torch)


def test_reverse_complement_of_channels_first_one_hot_views_back():
    # Basenji/DNABERT augmentation: flip both axes of a (b, 4, L) one-hot, transpose back, view
    def call(lib):
        seq = lib.from_numpy(np.array([[0, 3, 1, 2, 2, 1], [1, 1, 0, 3, 2, 0]]))
        x = lib.nn.functional.one_hot(seq, 4).permute(0, 2, 1).float()
        rc = x.flip(-1).flip(1)
        flat = rc.transpose(1, 2).view(2, -1)
        try:
            rc.view(2, -1)
            refused = False
        except RuntimeError:
            refused = True
        return flat.tolist(), rc.stride(), refused
    got = call(ember)
    assert got == call(torch)
    assert got[2]   # a view of the channels-first flip itself is refused, as in PyTorch


def test_flip_gradient_and_channels_last_conv():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    w_np = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)

    def call(lib):
        x = lib.from_numpy(x_np).contiguous(memory_format=lib.channels_last).requires_grad_()
        w = lib.from_numpy(w_np)
        y = lib.nn.functional.conv2d(x.flip(3), w, padding=1)
        y.square().sum().backward()
        return (x.flip(3).is_contiguous(memory_format=lib.channels_last), x.grad.stride(),
                np.round(np.asarray(y.tolist()), 4).tolist())
    got, expected = call(ember), call(torch)
    assert got[:2] == expected[:2]
    np.testing.assert_allclose(got[2], expected[2], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["self", "source", "inplace", "jvp", "jacfwd"])
def test_index_reduce_has_no_forward_derivative(case):
    def call(lib):
        fwad = lib.autograd.forward_ad
        idx = lib.tensor([0, 2, 0])
        x, s = lib.ones(3, 2), lib.arange(6.).view(3, 2)
        try:
            if case == "jvp":
                lib.func.jvp(lambda a: x.index_reduce(0, idx, a, "mean"), (s,), (lib.ones(3, 2),))
            elif case == "jacfwd":
                lib.func.jacfwd(lambda a: a.index_reduce(0, idx, s, "amax"))(x)
            else:
                with fwad.dual_level():
                    if case == "source":
                        s = fwad.make_dual(s, lib.ones(3, 2))
                    else:
                        x = fwad.make_dual(x, lib.ones(3, 2))
                    if case == "inplace":
                        x.clone().index_reduce_(0, idx, s, "prod")
                    else:
                        x.index_reduce(0, idx, s, "amin", include_self=False)
        except NotImplementedError as e:
            return str(e).split("\n")[0]
        return None
    got = call(ember)
    assert got is not None and got == call(torch)


def test_index_reduce_reverse_mode_still_works():
    def call(lib):
        s = lib.arange(6.).view(3, 2).requires_grad_()
        x = lib.ones(3, 2).requires_grad_()
        out = x.index_reduce(0, lib.tensor([0, 2, 0]), s * s, "mean")
        out.sum().backward()
        return out.tolist(), x.grad.tolist(), s.grad.tolist()
    assert call(ember) == call(torch)


_SEGMENT_CASES = [
    # (data shape, reduce, keyword arguments)
    ((6,), "sum", {"offsets": [1, 3, 6]}),
    ((6,), "max", {"offsets": [1, 3, 3, 5]}),
    ((6,), "max", {"offsets": [1, 3, 3, 5], "unsafe": True}),
    ((6,), "mean", {"offsets": [2, 2]}),
    ((6,), "sum", {"offsets": [0]}),
    ((2, 6), "sum", {"offsets": [[0, 2, 6], [1, 3, 4]], "axis": 1}),
    ((2, 6), "sum", {"offsets": [[0, 2, 6], [1, 3, 4]], "axis": -1}),
    ((2, 6), "mean", {"lengths": [[2, 4], [1, 5]], "axis": 1}),
    ((2, 6), "mean", {"lengths": [[2, 4], [1, 4]], "axis": 1}),
    ((4,), "sum", {}),
    ((4,), "foo", {}),
    ((4,), "foo", {"lengths": [3]}),
    ((4,), "sum", {"lengths": [3], "axis": 3}),
    ((4,), "sum", {"axis": 3}),
    ((4,), "sum", {"lengths": [[4]]}),
    ((4,), "sum", {"lengths": [[4]], "axis": 1}),
    ((4,), "sum", {"offsets": [[0, 4]]}),
    ((4,), "sum", {"lengths": [5, -1]}),
    ((4,), "sum", {"lengths": [5, -1], "unsafe": True}),
    ((4,), "sum", {"offsets": [0, 3, 2, 4]}),
    ((4,), "sum", {"lengths": [3.5, 0.5]}),
    ((4,), "sum", {"lengths": [-1.0, 5.0]}),
    ((4,), "sum", {"lengths": [4], "int16": True}),
    ((4,), "sum", {"offsets": [0.0, 4.0]}),
    ((4,), "sum", {"lengths": [4.0], "long_data": True}),
    ((4,), "sum", {"lengths": [4], "long_data": True}),
    ((4,), "sum", {"lengths": [], "unsafe": True}),
    ((0,), "sum", {"lengths": []}),
    ((4,), "sum", {"offsets": []}),
    ((4, 3), "sum", {"offsets": []}),
    ((), "max", {"lengths": [1]}),
    ((6,), "sum", {"lengths": [4], "offsets": [1, 3, 6]}),
]


@pytest.mark.parametrize("shape, reduce, kwargs", _SEGMENT_CASES)
def test_segment_reduce_offsets_and_checks(shape, reduce, kwargs):
    def call(lib):
        kw = dict(kwargs)
        dtype = lib.int64 if kw.pop("long_data", False) else lib.float32
        index_dtype = lib.int16 if kw.pop("int16", False) else None
        for name in ("lengths", "offsets"):
            if name in kw:
                v = kw[name]
                floats = any(isinstance(e, float) for e in np.ravel(v))
                kw[name] = lib.tensor(v, dtype=index_dtype or (lib.float32 if floats
                                                               else lib.int64))
        data = lib.arange(float(np.prod(shape))).reshape(shape).to(dtype)
        try:
            return lib.segment_reduce(data, reduce, **kw).tolist()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e)
    assert repr(call(ember)) == repr(call(torch))     # (repr: nan equals nan)


def test_segment_reduce_offsets_gradient():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((2, 7)).astype(np.float32)

    def call(lib):
        x = lib.from_numpy(data).requires_grad_()
        offsets = lib.tensor([[1, 3, 3, 6], [0, 2, 5, 5]])
        out = lib.segment_reduce(x * x, "max", offsets=offsets, axis=1, initial=0.25)
        out.exp().sum().backward()
        return out.tolist(), x.grad.tolist(), type(out.grad_fn).__name__
    got, expected = call(ember), call(torch)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-5, atol=1e-7)
    assert got[2] == expected[2]
