"""Sparse leftovers against PyTorch: smm/hspmm/sspaddmm argument errors and values (sspaddmm's
result refuses backward), compressed new_zeros/empty_like/unbind, compressed-to-COO coalesced
flags, sparse.sum of compressed tensors, sum()'s dense gradient, refused backwards of COO
sum(dim)/index_select/select, legacy constructors' index dtypes, the index dtype of a CSR
leaf's gradient through values(), and spmm offered to __torch_function__ as mm."""

import pytest

import ember
from tests.parity._compare import ember_names, error

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore::UserWarning")]


def _coo(lib, requires_grad=False):
    return lib.sparse_coo_tensor(lib.tensor([[0, 1, 1], [2, 0, 2]]), lib.tensor([3., 4., 5.]),
                                 (2, 3), requires_grad=requires_grad)


def _input(lib):
    return lib.sparse_coo_tensor(lib.tensor([[1, 0, 1], [1, 0, 1]]), lib.tensor([1., 2., 7.]),
                                 (2, 2))


def _dense(lib):
    return lib.arange(6.).reshape(3, 2)


def _first_sentence(text):
    return text.split(" This could be because")[0]


def _assert_same_error(fn):
    theirs = error(fn, torch)
    assert theirs is not None, "torch does not raise"
    ours = error(fn, ember)
    assert ours is not None, f"ember does not raise; torch gives {theirs!r}"
    assert (ours[0], _first_sentence(ours[1])) == \
        (theirs[0], ember_names(_first_sentence(theirs[1])))


def _described(lib, t):
    if t.layout is lib.strided:
        return ("strided", str(t.dtype).split(".")[-1], t.tolist())
    layout = str(t.layout).split(".")[-1]
    if t.layout is lib.sparse_coo:
        return (layout, tuple(t.shape), t._indices().tolist(), t._values().tolist(),
                t.is_coalesced())
    if t.layout in (lib.sparse_csr, lib.sparse_bsr):
        parts = (t.crow_indices(), t.col_indices())
    else:
        parts = (t.ccol_indices(), t.row_indices())
    return (layout, tuple(t.shape), [str(p.dtype).split(".")[-1] for p in parts],
            [p.tolist() for p in parts], t.values().tolist())


def _assert_same(fn):
    ours, theirs = fn(ember), fn(torch)
    if isinstance(theirs, (tuple, list)):
        assert [_described(ember, t) for t in ours] == [_described(torch, t) for t in theirs]
    else:
        assert _described(ember, ours) == _described(torch, theirs)


_PRODUCT_ERRORS = {
    "smm_sparse_sparse": lambda lib: lib.smm(_coo(lib), _coo(lib).t()),
    "smm_sparse_3d_sparse": lambda lib: lib.smm(lib.sparse_coo_tensor(
        lib.zeros(3, 1, dtype=lib.int64), lib.ones(1), (2, 3, 3)), _coo(lib)),
    "smm_csr_dense": lambda lib: lib.smm(_coo(lib).to_sparse_csr(), _dense(lib)),
    "smm_dense_sparse": lambda lib: lib.smm(_dense(lib).t(), _coo(lib)),
    "smm_dense_dense": lambda lib: lib.smm(_dense(lib), _dense(lib)),
    "smm_sparse_csc": lambda lib: lib.smm(_coo(lib), _coo(lib).t().to_sparse_csc()),
    "smm_hybrid": lambda lib: lib.smm(lib.sparse_coo_tensor(
        lib.tensor([[0], [1]]), lib.ones(1, 2), (2, 3, 2)), _dense(lib)),
    "smm_vector": lambda lib: lib.smm(lib.sparse_coo_tensor(
        lib.tensor([[0, 2]]), lib.ones(2), (3,)), _dense(lib)),
    "smm_half": lambda lib: lib.smm(_coo(lib).half(), _dense(lib).half()),
    "hspmm_sparse_sparse": lambda lib: lib.hspmm(_coo(lib), _coo(lib).t()),
    "hspmm_sparse_sparse_bad_size": lambda lib: lib.hspmm(_coo(lib), _coo(lib)),
    "hspmm_dense_sparse": lambda lib: lib.hspmm(_dense(lib).t(), _coo(lib)),
    "hspmm_csr_dense": lambda lib: lib.hspmm(_coo(lib).to_sparse_csr(), _dense(lib)),
    "hspmm_hybrid": lambda lib: lib.hspmm(lib.sparse_coo_tensor(
        lib.tensor([[0], [1]]), lib.ones(1, 2), (2, 3, 2)), _dense(lib)),
    "hspmm_bool": lambda lib: lib.hspmm(_coo(lib).bool(), _dense(lib).bool()),
    "sspaddmm_dense_mat1": lambda lib: lib.sspaddmm(_input(lib), _dense(lib).t(), _dense(lib)),
    "sspaddmm_sparse_mat2": lambda lib: lib.sspaddmm(_input(lib), _coo(lib), _coo(lib).t()),
    "sspaddmm_csr_mat1": lambda lib: lib.sspaddmm(_input(lib), _coo(lib).to_sparse_csr(),
                                                  _dense(lib)),
    "sspaddmm_input_rows": lambda lib: lib.sspaddmm(lib.sparse_coo_tensor(
        lib.zeros(2, 0, dtype=lib.int64), lib.ones(0), (3, 2)), _coo(lib), _dense(lib)),
    "sspaddmm_input_columns": lambda lib: lib.sspaddmm(lib.sparse_coo_tensor(
        lib.zeros(2, 0, dtype=lib.int64), lib.ones(0), (2, 3)), _coo(lib), _dense(lib)),
    "sspaddmm_input_dtype": lambda lib: lib.sspaddmm(_input(lib).double(), _coo(lib),
                                                     _dense(lib)),
    "sspaddmm_mat2_dtype": lambda lib: lib.sspaddmm(_input(lib).long(), _coo(lib).long(),
                                                    _dense(lib)),
    "sspaddmm_bool": lambda lib: lib.sspaddmm(_input(lib).bool(), _coo(lib).bool(),
                                              _dense(lib).bool()),
    "sspaddmm_int_float_beta": lambda lib: lib.sspaddmm(_input(lib).long(), _coo(lib).long(),
                                                        _dense(lib).long(), beta=1.5),
    "sspaddmm_bfloat16": lambda lib: lib.sspaddmm(_input(lib).bfloat16(),
                                                  _coo(lib).bfloat16(),
                                                  _dense(lib).bfloat16()),
}


@pytest.mark.parametrize("name", sorted(_PRODUCT_ERRORS))
def test_hybrid_product_errors_match(name):
    _assert_same_error(_PRODUCT_ERRORS[name])


_PRODUCTS = {
    "smm": lambda lib: lib.smm(_coo(lib), _dense(lib)),
    "hspmm": lambda lib: lib.hspmm(_coo(lib), _dense(lib)),
    "sspaddmm": lambda lib: lib.sspaddmm(_input(lib), _coo(lib), _dense(lib)),
    "sspaddmm_scaled": lambda lib: lib.sspaddmm(_input(lib), _coo(lib), _dense(lib), beta=2,
                                                alpha=-3),
    "sspaddmm_beta0": lambda lib: lib.sspaddmm(_input(lib), _coo(lib), _dense(lib), beta=0),
    "sspaddmm_method": lambda lib: _input(lib).sspaddmm(_coo(lib), _dense(lib), alpha=0.5),
    "sspaddmm_coalesced_input": lambda lib: lib.sspaddmm(_input(lib).coalesce(), _coo(lib),
                                                         _dense(lib)),
    "sspaddmm_int": lambda lib: lib.sspaddmm(_input(lib).long(), _coo(lib).long(),
                                             _dense(lib).long()),
    "sspaddmm_uncoalesced_mat1": lambda lib: lib.sspaddmm(_input(lib), lib.sparse_coo_tensor(
        lib.tensor([[1, 0, 1], [0, 2, 0]]), lib.ones(3), (2, 3)), _dense(lib)),
}


@pytest.mark.parametrize("name", sorted(_PRODUCTS))
def test_hybrid_products_match(name):
    _assert_same(_PRODUCTS[name])


@pytest.mark.parametrize("which", [0, 1, 2])
def test_sspaddmm_refuses_backward(which):
    def run(lib):
        args = [_input(lib), _coo(lib), _dense(lib)]
        args[which].requires_grad_()
        out = lib.sspaddmm(*args)
        assert type(out.grad_fn).__name__ == "NotImplemented"
        out.to_dense().sum().backward()
    _assert_same_error(run)


_COMPRESSED = {
    "new_zeros": lambda lib: _csr32(lib).new_zeros((2, 3)),
    "new_zeros_batched": lambda lib: _csr32(lib).new_zeros((2, 2, 3)),
    "new_zeros_csc": lambda lib: _csr32(lib).to_sparse_csc().new_zeros((3, 2)),
    "new_zeros_coo": lambda lib: _coo(lib).new_zeros((2, 4), dtype=lib.float64),
    "new_zeros_strided": lambda lib: _csr32(lib).new_zeros((2, 2), layout=lib.strided),
    "empty_like_same": lambda lib: lib.zeros_like(_csr32(lib)),
    "unbind": lambda lib: _csr32(lib).unbind(),
    "unbind_columns": lambda lib: lib.unbind(_csr32(lib), 1),
    "unbind_csc": lambda lib: _csr32(lib).to_sparse_csc().unbind(),
    "row_of_csc": lambda lib: _csr32(lib).to_sparse_csc()[1],
}


def _csr32(lib):
    return lib.sparse_csr_tensor(lib.tensor([0, 1, 3], dtype=lib.int32),
                                 lib.tensor([1, 0, 2], dtype=lib.int32),
                                 lib.tensor([1., 2., 3.]), (2, 3))


@pytest.mark.parametrize("name", sorted(_COMPRESSED))
def test_compressed_factories_and_slices_match(name):
    _assert_same(_COMPRESSED[name])


_COMPRESSED_ERRORS = {
    "new_zeros_1d": lambda lib: _csr32(lib).new_zeros(4),
    "new_zeros_bsr": lambda lib: _csr32(lib).to_sparse_bsr(1).new_zeros((2, 3)),
    "empty_like_csc": lambda lib: lib.empty_like(_csr32(lib), layout=lib.sparse_csc),
    "empty_like_coo": lambda lib: lib.empty_like(_csr32(lib), layout=lib.sparse_coo),
    "sparse_sum_dim": lambda lib: lib.sparse.sum(_csr32(lib), 1),
    "sparse_sum_dim_csc": lambda lib: lib.sparse.sum(_csr32(lib).to_sparse_csc(), (0, 1)),
    "unbind_out_of_range": lambda lib: _csr32(lib).unbind(2),
}


@pytest.mark.parametrize("name", sorted(_COMPRESSED_ERRORS))
def test_compressed_errors_match(name):
    _assert_same_error(_COMPRESSED_ERRORS[name])


@pytest.mark.parametrize("layout, block", [
    ("csr", None), ("csc", None), ("bsr", (1, 1)), ("bsr", (1, 2)), ("bsr", (2, 1)),
    ("bsr", (2, 2)), ("bsc", (1, 1)), ("bsc", (2, 2))])
@pytest.mark.parametrize("data", ["two_rows", "one_block", "empty"])
def test_compressed_to_coo_coalesced_flag_matches(layout, block, data):
    def flag(lib):
        x = {"two_rows": lib.tensor([[1., 2., 0., 0.], [3., 4., 0., 5.]]),
             "one_block": lib.tensor([[0., 0., 1., 2.], [0., 0., 3., 4.]]),
             "empty": lib.zeros(2, 4)}[data]
        convert = getattr(x, f"to_sparse_{layout}")
        s = convert() if block is None else convert(block)
        return s.to_sparse().is_coalesced()
    assert flag(ember) == flag(torch)


@pytest.mark.parametrize("make", ["csr", "csr32", "csc", "bsr", "coo", "origin"])
def test_whole_sum_gives_a_dense_gradient(make):
    def grad(lib):
        dense = lib.tensor([[0., 1., 0.], [2., 0., 3.]], requires_grad=make == "origin")
        source = {"csr": lambda: dense.to_sparse_csr(), "csr32": lambda: _csr32(lib),
                  "csc": lambda: dense.to_sparse_csc(), "bsr": lambda: dense.to_sparse_bsr(1),
                  "coo": lambda: dense.to_sparse(), "origin": lambda: dense.to_sparse()}[make]()
        s = source if make == "origin" else source.detach().requires_grad_()
        out = s.sum()
        assert repr(out.grad_fn).startswith("<SumBackward0 object at ")
        (out * 2).backward()
        return dense.grad if make == "origin" else s.grad
    ours, theirs = grad(ember), grad(torch)
    assert _described(ember, ours) == _described(torch, theirs)


_REFUSED = {
    "sum_dim": lambda lib, s: s.sum(1),
    "sum_dim_keepdim": lambda lib, s: s.sum(0, keepdim=True),
    "index_select": lambda lib, s: s.index_select(0, lib.tensor([1, 0])),
    "index_select_dense": lambda lib, s: s.index_select(1, lib.tensor([2])).to_dense(),
    "select": lambda lib, s: s.select(1, 2),
    "getitem": lambda lib, s: s[0],
}


@pytest.mark.parametrize("name", sorted(_REFUSED))
def test_refused_backwards_match(name):
    def run(lib):
        s = _coo(lib, requires_grad=True)
        out = _REFUSED[name](lib, s)
        node = repr(out.grad_fn).split(" object")[0]        # "<SumBackward1", as printed
        total = out.sum() if out.layout is lib.strided else lib.sparse.sum(out)
        try:
            total.backward()
        except (RuntimeError, NotImplementedError) as e:
            return node, type(e).__name__, _first_sentence(str(e))
        return node, None
    ours, theirs = run(ember), run(torch)
    assert ours == tuple(ember_names(x) if isinstance(x, str) else x for x in theirs)
    assert ours[1] is not None


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8", "float32", "bool"])
@pytest.mark.parametrize("sized", [False, True])
def test_legacy_constructor_refuses_non_int64_indices(dtype, sized):
    def make(lib):
        args = (lib.tensor([[0, 1], [1, 0]], dtype=getattr(lib, dtype)), lib.tensor([1., 2.]))
        return lib.sparse.FloatTensor(*args, *([(2, 2)] if sized else []))
    _assert_same_error(make)


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8"])
def test_small_coo_index_dtypes_become_int64(dtype):
    _assert_same(lambda lib: lib.sparse_coo_tensor(
        lib.tensor([[0, 1], [1, 0]], dtype=getattr(lib, dtype)), lib.tensor([1., 2.]), (2, 2)))


@pytest.mark.parametrize("index, plain, path", [
    ("int32", "int32", "values"), ("int64", "int64", "values"), ("int32", "int64", "values"),
    ("int32", "int32", "to_dense"), ("int32", "int32", "values_then_to_dense"),
    ("int32", "int32", "to_dense_then_values")])
def test_csr_leaf_gradient_index_dtype(index, plain, path):
    def grad(lib):
        c = lib.sparse_csr_tensor(lib.tensor([0, 1, 3], dtype=getattr(lib, index)),
                                  lib.tensor([1, 0, 1], dtype=getattr(lib, plain)),
                                  lib.tensor([1., 2., 3.]), (2, 2), requires_grad=True)
        steps = {"values": ["values"], "to_dense": ["to_dense"],
                 "values_then_to_dense": ["values", "to_dense"],
                 "to_dense_then_values": ["to_dense", "values"]}[path]
        for step in steps:
            getattr(c, step)().sum().backward()
        return c.grad
    assert _described(ember, grad(ember)) == _described(torch, grad(torch))


@pytest.mark.parametrize("layout", ["csc", "bsr", "bsc"])
def test_values_backward_of_other_compressed_layouts_refuses(layout):
    def run(lib):
        x = lib.tensor([[0., 1.], [2., 3.]])
        s = (x.to_sparse_csc() if layout == "csc" else
             getattr(x, f"to_sparse_{layout}")(1)).requires_grad_()
        values = s.values()
        assert type(values.grad_fn).__name__ == "ValuesBackward0"
        values.sum().backward()
    _assert_same_error(run)


def test_spmm_is_offered_to_torch_function_as_mm():
    def seen(lib):
        funcs = []

        class Logged(lib.Tensor):
            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):
                funcs.append(func.__name__)
                return super().__torch_function__(func, types, args, kwargs or {})
        a = lib.ones(2, 2).as_subclass(Logged)
        lib.spmm(a, lib.ones(2, 2))
        return funcs[:1]
    assert seen(ember) == seen(torch) == ["mm"]


_NONE_SIZE = {
    "csr_keyword": lambda lib: lib.sparse_csr_tensor(
        lib.tensor([0, 1, 3]), lib.tensor([1, 0, 2]), lib.tensor([1., 2., 3.]), size=None),
    "csc_positional": lambda lib: lib.sparse_csc_tensor(
        lib.tensor([0, 1, 3]), lib.tensor([1, 0, 2]), lib.tensor([1., 2., 3.]), None),
    "bsr_with_dtype": lambda lib: lib.sparse_bsr_tensor(
        lib.tensor([0, 1, 2]), lib.tensor([1, 0]), lib.ones(2, 1, 2), None, dtype=lib.float64),
    "compressed": lambda lib: lib.sparse_compressed_tensor(
        lib.tensor([0, 1, 3]), lib.tensor([1, 0, 2]), lib.tensor([1., 2., 3.]), size=None,
        layout=lib.sparse_csr),
    "coo": lambda lib: lib.sparse_coo_tensor(lib.tensor([[0, 1]]), lib.tensor([1., 2.]),
                                             size=None, requires_grad=True),
}


@pytest.mark.parametrize("name", sorted(_NONE_SIZE))
def test_size_none_is_refused_as_torch_parser(name):
    theirs = error(_NONE_SIZE[name], torch)
    ours = error(_NONE_SIZE[name], ember)
    assert ours == (theirs[0], ember_names(theirs[1]))


def _mixed(lib, crow="int32", col="int64", layout="csr"):
    make = getattr(lib, f"sparse_{layout}_tensor")
    return make(lib.tensor([0, 1, 3], dtype=getattr(lib, crow)),
                lib.tensor([1, 0, 1], dtype=getattr(lib, col)), lib.tensor([1., 2., 3.]), (2, 2))


_MIXED = {
    "resize_": lambda lib, m: m.resize_(3, 2),
    "copy_": lambda lib, m: m.copy_(_mixed(lib, "int64", "int64")),
    "fill_": lambda lib, m: m.fill_(2.),
    "zero_": lambda lib, m: m.zero_(),
    "sum_keepdim": lambda lib, m: m.sum(0, keepdim=True),
    "to_bsc": lambda lib, m: m.to_sparse_bsc(1),
    "t": lambda lib, m: m.t(),
    "neg": lambda lib, m: -m,
    "to_sparse": lambda lib, m: m.to_sparse(),
}


@pytest.mark.parametrize("order", [("int32", "int64"), ("int64", "int32")])
@pytest.mark.parametrize("name", sorted(_MIXED))
def test_mixed_compressed_index_dtypes_match(name, order):
    _assert_same(lambda lib: _MIXED[name](lib, _mixed(lib, *order)))


_MIXED_ERRORS = {
    "add_dense": lambda lib, m: m + lib.ones(2, 2),
    "dense_add": lambda lib, m: lib.ones(2, 2) + m,
    "to_bsr": lambda lib, m: m.to_sparse_bsr(1),
    "csc_to_bsc": lambda lib, m: m.t().to_sparse_bsc(1),
}


@pytest.mark.parametrize("order", [("int32", "int64"), ("int64", "int32")])
@pytest.mark.parametrize("name", sorted(_MIXED_ERRORS))
def test_mixed_compressed_index_dtypes_refused_as_torch(name, order):
    _assert_same_error(lambda lib: _MIXED_ERRORS[name](lib, _mixed(lib, *order)))


@pytest.mark.parametrize("layout", ["bsr", "bsc"])
@pytest.mark.parametrize("block", [(1, 1), (1, 2), (2, 1), (2, 2), (1, 4), (4, 1)])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("pattern", ["full", "scattered"])
def test_blocked_select_views_match(layout, block, dim, pattern):
    def lines(lib):
        x = lib.arange(1., 17.).reshape(4, 4) if pattern == "full" else lib.tensor(
            [[1., 0., 0., 2.], [0., 0., 3., 0.], [0., 4., 0., 0.], [5., 0., 0., 6.]])
        s = getattr(x, f"to_sparse_{layout}")(block)
        out = []
        for index in range(4):
            try:
                out.append(_described(lib, s.select(dim, index)))
            except RuntimeError as e:
                out.append(ember_names(str(e)))
        return out
    assert lines(ember) == lines(torch)


_INDEXING_ERRORS = {
    "coo_slice": lambda lib: _coo(lib)[0:1],
    "coo_tensor": lambda lib: _coo(lib)[lib.tensor([0])],
    "csr_slice": lambda lib: _csr32(lib)[0:1],
    "csc_slice": lambda lib: _csr32(lib).to_sparse_csc()[:, 0:1],
    "bsr_list": lambda lib: _csr32(lib).to_sparse_bsr(1)[[0]],
    "csr_none": lambda lib: _csr32(lib)[None],
    "csr_new_tensor": lambda lib: _csr32(lib).new_tensor([1.]),
}


@pytest.mark.parametrize("name", sorted(_INDEXING_ERRORS))
def test_indexing_errors_match(name):
    _assert_same_error(_INDEXING_ERRORS[name])


def test_row_of_csr_then_none_matches():
    _assert_same(lambda lib: _csr32(lib)[1, None])
