"""Round 28 fidelity against PyTorch: ``conj()`` of a complex tensor is a lazy view with the
conjugate bit (shares memory both ways, keeps the bit through view ops, materialises for
every other op), and the errors numpy()/view_as_real raise on it."""

import io

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_X = np.array([[1 + 2j, 3 - 4j, -5 + 0.5j], [0.25 - 1j, 2j, -3 + 0j]], dtype=np.complex64)


def _both():
    return ember.tensor(_X.copy()), torch.tensor(_X.copy())


def _same(e, t):
    assert e.is_conj() == t.is_conj()
    np.testing.assert_array_equal(e.resolve_conj().detach().numpy(),
                                  t.resolve_conj().detach().numpy())


@pytest.mark.parametrize("view", ["conj", "mH", "adjoint", "T", "conj_t", "conj_row", "conj_col",
                                  "conj_flat", "conj_conj", "conj_unsq", "conj_expand",
                                  "conj_detach", "conj_clone", "resolve", "conj_physical",
                                  "conj_to", "conj_contig", "conj_t_contig"])
def test_bit_and_values_of_views(view):
    make = {"conj": lambda x: x.conj(), "mH": lambda x: x.mH, "adjoint": lambda x: x.adjoint(),
            "T": lambda x: x.T, "conj_t": lambda x: x.conj().t(),
            "conj_row": lambda x: x.conj()[1], "conj_col": lambda x: x.conj()[:, 1:],
            "conj_flat": lambda x: x.conj().flatten(), "conj_conj": lambda x: x.conj().conj(),
            "conj_unsq": lambda x: x.conj().unsqueeze(0),
            "conj_expand": lambda x: x.conj()[:1].expand(3, 3),
            "conj_detach": lambda x: x.conj().detach(), "conj_clone": lambda x: x.conj().clone(),
            "resolve": lambda x: x.conj().resolve_conj(),
            "conj_physical": lambda x: x.conj_physical(),
            "conj_to": lambda x: x.conj().to(torch.complex128 if isinstance(x, torch.Tensor)
                                              else ember.complex128),
            "conj_contig": lambda x: x.conj().contiguous(),
            "conj_t_contig": lambda x: x.conj().t().contiguous()}[view]
    e, t = _both()
    ev, tv = make(e), make(t)
    _same(ev, tv)
    assert ev._is_view() == tv._is_view()
    if tv._is_view():
        assert (ev.data_ptr() == e.data_ptr()) == (tv.data_ptr() == t.data_ptr())


@pytest.mark.parametrize("write", ["setitem", "add_", "mul_", "zero_", "copy_", "slice_mul_",
                                   "out", "fill_"])
def test_writes_through_a_conj_view_reach_the_base(write):
    def run(lib, x):
        y = x.conj()
        other = lib.tensor(np.array([[1 + 1j, 2 - 2j, 3j]] * 2, dtype=np.complex64))
        if write == "setitem":
            y[0, 1] = 1 + 1j
        elif write == "add_":
            y.add_(other)
        elif write == "mul_":
            y.mul_(1j)
        elif write == "zero_":
            y[1].zero_()
        elif write == "copy_":
            y.copy_(other)
        elif write == "slice_mul_":
            y[:, 1:].mul_(2 - 1j)
        elif write == "out":
            lib.add(other, 1, out=y)
        else:
            y.fill_(2 + 3j)
        return x, y
    (ex, ey), (tx, ty) = run(ember, *_both()[:1]), run(torch, _both()[1])
    np.testing.assert_array_equal(ex.numpy(), tx.numpy())
    _same(ey, ty)


def test_writes_to_the_base_show_through_the_view():
    e, t = _both()
    ey, ty = e.conj(), t.conj()
    e[0, 0] = 7 + 7j
    t[0, 0] = 7 + 7j
    e[1].mul_(2)
    t[1].mul_(2)
    _same(ey, ty)
    _same(ey.mT, ty.mT)


def test_ops_on_conj_views_give_plain_results():
    e, t = _both()
    pairs = [(e.conj() + 1, t.conj() + 1), (e.conj() * e, t.conj() * t),
             (e.conj().sum(1), t.conj().sum(1)), (e.conj().abs(), t.conj().abs()),
             (e @ e.mH, t @ t.mH), (e.mH @ e, t.mH @ t), (e.conj().exp(), t.conj().exp())]
    for ev, tv in pairs:
        assert not ev.is_conj() and not tv.is_conj()
        np.testing.assert_allclose(ev.numpy(), tv.numpy(), rtol=1e-6, atol=1e-6)
    assert e.conj().tolist() == t.conj().tolist()
    assert repr(e.conj()) == repr(t.conj()).replace("torch.", "ember.")


def test_real_tensors_are_their_own_conjugate():
    e, t = ember.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    assert (e.conj() is e) == (t.conj() is t) is True
    assert e.conj().is_conj() == t.conj().is_conj() is False
    assert ember.is_conj(e.conj()) == torch.is_conj(t.conj()) is False


def test_real_and_imag_of_a_conj_view():
    e, t = _both()
    for ev, tv in [(e.conj().real, t.conj().real), (e.conj().imag, t.conj().imag)]:
        assert ev.is_neg() == tv.is_neg()
        np.testing.assert_array_equal(ev.resolve_neg().numpy(), tv.resolve_neg().numpy())
    er, tr = e.conj().real, t.conj().real       # the same memory: writes reach the base
    er.add_(10)
    tr.add_(10)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_errors(lib_name):
    lib = ember if lib_name == "ember" else torch
    y = lib.tensor(_X.copy()).conj()
    with pytest.raises(RuntimeError) as e:
        y.numpy()
    assert str(e.value) == ("Can't call numpy() on Tensor that has conjugate bit set. Use "
                            "tensor.resolve_conj().numpy() instead.")
    with pytest.raises(RuntimeError) as e:
        lib.view_as_real(y)
    assert str(e.value).startswith(
        "view_as_real doesn't work on unresolved conjugated tensors.  To resolve the conjugate "
        "tensor so you can view it as real, use self.resolve_conj()")
    np.testing.assert_array_equal(lib.view_as_real(y.resolve_conj()).numpy(),
                                  np.stack([_X.real, -_X.imag], -1))


def test_autograd_through_conj_views():
    w = np.array([[1j, 2, 3 - 1j], [0.5, -1j, 2 + 2j]], dtype=np.complex128)

    def run(lib):
        a = lib.tensor(_X.astype(np.complex128), requires_grad=True)
        b = a.conj()
        loss = (b * lib.tensor(w)).sum().abs() + (a.mH @ a).real.sum()
        loss.backward()
        return b, a.grad
    (eb, eg), (tb, tg) = run(ember), run(torch)
    assert type(eb.grad_fn).__name__ == type(tb.grad_fn).__name__ == "ConjBackward0"
    assert eb.is_conj() and tb.is_conj()
    np.testing.assert_allclose(eg.resolve_conj().numpy(), tg.resolve_conj().numpy(), rtol=1e-12)


def test_inplace_on_conj_view_under_autograd():
    def run(lib):
        a = lib.tensor(_X.astype(np.complex128), requires_grad=True)
        c = a * 1
        y = c.conj()
        y[:, 0].mul_(2j)
        (c * lib.tensor(_X.astype(np.complex128))).sum().abs().backward()
        return c.detach(), a.grad
    (ec, eg), (tc, tg) = run(ember), run(torch)
    np.testing.assert_allclose(ec.numpy(), tc.numpy(), rtol=1e-12)
    np.testing.assert_allclose(eg.resolve_conj().numpy(), tg.resolve_conj().numpy(), rtol=1e-12)


def test_save_load_keeps_values():
    e, t = _both()
    buf = io.BytesIO()
    ember.save(e.conj(), buf)
    buf.seek(0)
    loaded = ember.load(buf)
    np.testing.assert_array_equal(loaded.resolve_conj().numpy(), t.conj().resolve_conj().numpy())


def test_deepcopy_is_a_plain_copy():
    import copy
    for lib, x in zip((ember, torch), _both()):
        y = x.conj()
        z = copy.deepcopy(y)
        assert not z.is_conj()
        np.testing.assert_array_equal(z.numpy(), _X.conj())
        z.mul_(2)
        np.testing.assert_array_equal(x.numpy(), _X)


@pytest.mark.parametrize("lib_name", ["ember", "torch"])
def test_subclass_conj_keeps_the_subclass(lib_name):
    lib = ember if lib_name == "ember" else torch
    seen = []

    class M(lib.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    a = lib.tensor(_X.copy(), requires_grad=True)
    c = a.as_subclass(M).conj()
    assert type(c) is M and type(lib.conj(a.as_subclass(M))) is M
    np.testing.assert_array_equal(c.resolve_conj().detach().numpy(), _X.conj())
    seen.clear()
    d = c * lib.tensor(np.array([2 + 1j, 1j, 1], np.complex64))
    assert type(d) is M and seen
    d.real.sum().backward()
    np.testing.assert_array_equal(a.grad.resolve_conj().numpy(), np.broadcast_to(
        np.array([2 + 1j, 1j, 1], np.complex64), _X.shape))


def test_rows_of_a_conj_view_read_after_writes_match():
    e, t = _both()
    ey, ty = e.conj(), t.conj()
    for lib_y, lib_x in ((ey, e), (ty, t)):
        for i in range(2):
            lib_y[i].mul_(2)
            lib_x[i, 0].add_(1j)
        lib_y.add_(1)
    _same(ey, ty)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def _round_trip(saver, loader, obj, legacy):
    buf = io.BytesIO()
    if saver is torch:
        torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    else:
        saver.save(obj, buf)
    buf.seek(0)
    return loader.load(buf)


@pytest.mark.parametrize("legacy", [False, True])
@pytest.mark.parametrize("way", ["ember-ember", "ember-torch", "torch-ember", "torch-torch"])
def test_save_load_keeps_the_bit_and_the_aliasing(way, legacy):
    saver, loader = ((ember if name == "ember" else torch) for name in way.split("-"))
    if legacy and saver is ember:
        pytest.skip("ember.save writes the zip format only")
    x = saver.tensor(_X.copy())
    base, view, row = _round_trip(saver, loader, [x, x.conj(), x[1].conj()], legacy)
    assert (base.is_conj(), view.is_conj(), row.is_conj()) == (False, True, True)
    np.testing.assert_array_equal(view.resolve_conj().numpy(), _X.conj())
    np.testing.assert_array_equal(row.resolve_conj().numpy(), _X[1].conj())
    base[1, 0] = 7 + 8j                 # the loaded tensors share one storage: writes show
    assert view[1, 0].item() == 7 - 8j and row[0].item() == 7 - 8j
    view[0, 1] = 1 + 1j                 # and a write through the view reaches the base
    assert base[0, 1].item() == 1 - 1j


def test_pickle_keeps_the_bit_and_the_aliasing():
    import pickle
    for lib in (ember, torch):
        x = lib.tensor(_X.copy())
        base, view = pickle.loads(pickle.dumps([x, x.conj()]))
        assert view.is_conj() and not base.is_conj()
        np.testing.assert_array_equal(view.resolve_conj().numpy(), _X.conj())
        shared = base.data_ptr() == view.data_ptr()     # (ember's pickle keeps views; torch's
        base[0, 0] = 5                                  # copies them)
        assert shared == (lib is ember)
        assert view[0, 0].item() == (5 if shared else np.conj(_X[0, 0]))
        leaf = pickle.loads(pickle.dumps(x.conj().requires_grad_()))
        assert leaf.is_conj() and leaf.requires_grad and leaf.is_leaf


@pytest.mark.parametrize("case", ["steal", "accumulate", "plain_first", "expanded", "real"])
def test_leaf_grad_through_conj_keeps_the_bit_as_torch(case):
    def run(lib):
        a = lib.tensor(_X.astype(np.complex128), requires_grad=True)
        w = lib.tensor(_X[::-1].copy().astype(np.complex128))
        if case == "plain_first":
            (a * w).abs().sum().backward()
        if case == "expanded":
            a.conj().sum().abs().backward()
        elif case == "real":
            a.conj().real.sum().backward()
        else:
            (a.conj() * w).abs().sum().backward()
        if case in ("accumulate", "plain_first"):
            (a.conj() * w).abs().sum().backward()
        return a.grad
    e, t = run(ember), run(torch)
    assert e.is_conj() == t.is_conj()
    assert t.is_conj() == (case in ("steal", "accumulate"))      # (what torch does)
    np.testing.assert_allclose(e.resolve_conj().numpy(), t.resolve_conj().numpy(), rtol=1e-12)



@pytest.mark.parametrize("grad", [False, True])
def test_imag_of_a_conj_view_is_a_negative_view_as_torch(grad):
    def run(lib):
        x = lib.tensor(_X.astype(np.complex128), requires_grad=grad)
        base = x.detach()
        im = x.conj().imag
        bits = [im.is_neg(), im[1].is_neg(), im.mT.is_neg(), im.real.is_neg(),
                (im + 1).is_neg(), im.resolve_neg().is_neg(), im.detach().is_neg()]
        with pytest.raises(RuntimeError) as err:
            im.numpy()
        with pytest.raises(RuntimeError) as err_view:
            im.view(lib.int64)
        got = [bits, str(err.value), str(err_view.value), type(im.grad_fn).__name__]
        if grad:
            (im * lib.tensor(_X.real.astype(np.float64))).sum().backward()
            got.append(x.grad.is_conj())
            got.append(x.grad.resolve_conj().tolist())
            return got
        im[0, 1] = 10                   # writes through the view reach x, negated
        im[1].add_(1)
        base[0, 0] = 7 + 8j             # and x's writes show through it
        got.append(base.tolist())
        got.append(im.resolve_neg().tolist())
        return got
    assert run(ember) == run(torch)


@pytest.mark.parametrize("legacy", [False, True])
def test_torch_negative_view_loads_with_the_bit(legacy):
    x = torch.tensor(_X.astype(np.complex128))
    buf = io.BytesIO()
    torch.save(x.conj().imag, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    got = ember.load(buf)
    assert got.is_neg() and got.dtype == ember.float64
    np.testing.assert_array_equal(got.resolve_neg().numpy(), -_X.imag)
    got[0, 0] = 5                       # a view: reads its own memory back negated
    assert got[0, 0].item() == 5.0
