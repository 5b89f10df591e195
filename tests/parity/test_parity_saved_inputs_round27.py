"""What ops save for backward, part 2, against PyTorch 2.13.

An input written in place after an op and before backward makes backward raise ("one of the
variables needed for gradient computation has been modified by an inplace operation") only
where PyTorch's node saved that input: trapezoid and cumulative_trapezoid with sample points,
kron, special.ndtr, msort, quantile/nanquantile (input and q), take_along_dim's indices along
a dim, cross_entropy's input (and a smoothed probability target) and circular F.pad save
values computed from their inputs, not the inputs; batch_norm and group_norm save no bias;
matrix_power saves nothing for n = 0 and 1, inverses for n < 0. The gradients that backward
computes then, also when only some inputs require grad, are PyTorch's.
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_INPLACE = "modified by an inplace operation"


def _outcome(lib, build, shapes, written, fixed, req):
    """Run ``build(lib, *inputs)`` on float64 inputs of ``shapes`` (non-leaf clones of leaves
    requiring grad where ``req`` says, else plain tensors; ``fixed[i](lib)`` for index and
    probability inputs), write in place into input ``written``, then backward: ("ok", the
    leaves' gradients), or ("inplace", None), or (the other error's type name, None)."""
    rng = np.random.default_rng(0)
    leaves, xs = [], []
    for i, s in enumerate(shapes):
        if i in fixed:
            leaves.append(None)
            xs.append(fixed[i](lib))
            continue
        leaf = lib.tensor(rng.standard_normal(s), requires_grad=req[i])
        leaves.append(leaf if req[i] else None)
        xs.append(leaf.clone() if req[i] else leaf)
    out = build(lib, *xs)
    if xs[written].is_floating_point():
        xs[written].mul_(2)
    else:
        xs[written].add_(0)
    wanted = [leaf for leaf in leaves if leaf is not None]
    try:
        grads = lib.autograd.grad(out.sum(), wanted, allow_unused=True)
    except RuntimeError as e:
        return ("inplace" if _INPLACE in str(e) else type(e).__name__), None
    return "ok", [None if g is None else g.detach().numpy() for g in grads]


def _target(lib):
    return lib.tensor([0, 2, 1], dtype=lib.int64)


def _probabilities(lib):
    return lib.tensor(np.random.default_rng(1).dirichlet(np.ones(4), 3))


def _rows(lib):
    return lib.tensor([[0, 2], [1, 0], [2, 2]], dtype=lib.int64)


def _negative_rows(lib):
    return lib.tensor([[0], [-1], [2]], dtype=lib.int64)


def _flat_indices(lib):
    return lib.tensor([0, 5, 7], dtype=lib.int64)


def _qs(lib):
    return lib.tensor([0.2, 0.7], dtype=lib.float64)


def _bn(lib, x, w, b):
    return lib.nn.functional.batch_norm(x, None, None, w, b, training=True)


def _bn_eval(lib, x, w, b):
    stats = lib.zeros(3, dtype=lib.float64), lib.ones(3, dtype=lib.float64)
    return lib.nn.functional.batch_norm(x, *stats, w, b, training=False)


def _gn(lib, x, w, b):
    return lib.nn.functional.group_norm(x, 2, w, b)


def _ce(**kwargs):
    return lambda lib, x, t, *w: lib.nn.functional.cross_entropy(
        x, t, *w, **kwargs)


_NORM = [(4, 3, 2), (3,), (3,)]
_GROUP = [(2, 4, 3), (4,), (4,)]
_ALL3, _ONLY_X = (True, True, True), (True, False, False)

CASES = {
    # name: (build, shapes, written input, expected outcome, {fixed inputs}, requires grad)
    "trapezoid_x_write_y": (lambda L, y, x: L.trapezoid(y, x=x), [(3, 4), (4,)], 0, "ok"),
    "trapezoid_x_write_x": (lambda L, y, x: L.trapezoid(y, x=x), [(3, 4), (4,)], 1, "ok"),
    "trapezoid_x_only_x": (lambda L, y, x: L.trapezoid(y, x=x, dim=0), [(4, 3), (4, 1)], 0,
                           "ok", {}, (False, True)),
    "trapezoid_x_only_y": (lambda L, y, x: L.trapezoid(y, x=x), [(3, 4), (4,)], 1, "ok", {},
                           (True, False)),
    "cumulative_trapezoid_x_write_y": (lambda L, y, x: L.cumulative_trapezoid(y, x=x),
                                       [(3, 4), (4,)], 0, "ok"),
    "cumulative_trapezoid_x_write_x": (lambda L, y, x: L.cumulative_trapezoid(y, x=x),
                                       [(3, 4), (4,)], 1, "ok"),
    "batch_norm_bias": (_bn, _NORM, 2, "ok"),
    "batch_norm_bias_alone": (_bn, _NORM, 2, "ok", {}, (False, False, True)),
    "batch_norm_weight": (_bn, _NORM, 1, "inplace"),
    "batch_norm_input": (_bn, _NORM, 0, "inplace"),
    "batch_norm_eval_bias": (_bn_eval, _NORM, 2, "ok"),
    "batch_norm_eval_weight": (_bn_eval, _NORM, 1, "inplace"),
    "group_norm_bias": (_gn, _GROUP, 2, "ok"),
    "group_norm_bias_alone": (_gn, _GROUP, 2, "ok", {}, (False, False, True)),
    "group_norm_weight": (_gn, _GROUP, 1, "inplace"),
    "group_norm_input": (_gn, _GROUP, 0, "inplace"),
    "msort": (lambda L, x: L.msort(x), [(3, 4)], 0, "ok"),
    "matrix_power_0": (lambda L, a: L.linalg.matrix_power(a, 0), [(3, 3)], 0, "ok"),
    "matrix_power_1": (lambda L, a: L.linalg.matrix_power(a, 1), [(2, 3, 3)], 0, "ok"),
    "matrix_power_top_0": (lambda L, a: L.matrix_power(a, 0), [(3, 3)], 0, "ok"),
    "matrix_power_top_1": (lambda L, a: L.matrix_power(a, 1), [(3, 3)], 0, "ok"),
    "matrix_power_-1": (lambda L, a: L.linalg.matrix_power(a, -1), [(3, 3)], 0, "ok"),
    "matrix_power_-2": (lambda L, a: L.linalg.matrix_power(a, -2), [(3, 3)], 0, "ok"),
    "matrix_power_-3_batch": (lambda L, a: L.linalg.matrix_power(a, -3), [(2, 3, 3)], 0, "ok"),
    "matrix_power_2": (lambda L, a: L.linalg.matrix_power(a, 2), [(3, 3)], 0, "inplace"),
    "ndtr": (lambda L, x: L.special.ndtr(x), [(5,)], 0, "ok"),
    "kron_write_a": (lambda L, a, b: L.kron(a, b), [(2, 3), (3, 2)], 0, "ok"),
    "kron_write_b": (lambda L, a, b: L.kron(a, b), [(2, 3), (3, 2)], 1, "ok"),
    "kron_only_a": (lambda L, a, b: L.kron(a, b), [(2, 3), (3,)], 1, "ok", {}, (True, False)),
    "kron_only_b": (lambda L, a, b: L.kron(a, b), [(2, 3), (3, 2)], 0, "ok", {},
                    (False, True)),
    "quantile": (lambda L, x: L.quantile(x, 0.3, dim=1), [(3, 5)], 0, "ok"),
    "quantile_all": (lambda L, x: L.quantile(x, 0.3), [(3, 5)], 0, "ok"),
    "quantile_q_tensor": (lambda L, x, q: L.quantile(x, q, dim=1), [(3, 5), None], 1, "ok",
                          {1: _qs}),
    "nanquantile": (lambda L, x: L.nanquantile(x, 0.6, dim=0), [(3, 5)], 0, "ok"),
    "nanquantile_q_tensor": (lambda L, x, q: L.nanquantile(x, q), [(3, 5), None], 1, "ok",
                             {1: _qs}),
    "take_along_dim_indices": (lambda L, x, i: L.take_along_dim(x, i, dim=1), [(3, 4), None],
                               1, "ok", {1: _rows}),
    "take_along_dim_negative": (lambda L, x, i: L.take_along_dim(x, i, dim=1),
                                [(3, 4), None], 1, "ok", {1: _negative_rows}),
    "take_along_dim_input": (lambda L, x, i: L.take_along_dim(x, i, dim=1), [(3, 4), None],
                             0, "inplace", {1: _rows}),
    "take_along_dim_flat_indices": (lambda L, x, i: L.take_along_dim(x, i), [(3, 4), None],
                                    1, "inplace", {1: _flat_indices}),
    "cross_entropy_input": (_ce(), [(3, 4), None], 0, "ok", {1: _target}),
    "cross_entropy_target": (_ce(), [(3, 4), None], 1, "inplace", {1: _target}),
    "cross_entropy_none_input": (_ce(reduction="none"), [(3, 4), None], 0, "ok",
                                 {1: _target}),
    "cross_entropy_weight_input": (_ce(), [(3, 4), None, (4,)], 0, "ok", {1: _target},
                                   _ONLY_X),
    "cross_entropy_weight_weight": (_ce(), [(3, 4), None, (4,)], 2, "inplace", {1: _target},
                                    _ONLY_X),
    "cross_entropy_smoothing_input": (_ce(label_smoothing=0.2), [(3, 4), None, (4,)], 0, "ok",
                                      {1: _target}, _ONLY_X),
    "cross_entropy_probabilities_input": (_ce(), [(3, 4), None], 0, "ok",
                                          {1: _probabilities}),
    "cross_entropy_probabilities_target": (_ce(), [(3, 4), None], 1, "inplace",
                                           {1: _probabilities}),
    "cross_entropy_smoothed_probabilities_target": (_ce(label_smoothing=0.1), [(3, 4), (3, 4)],
                                                    1, "ok"),
    "cross_entropy_probabilities_weight_input": (_ce(), [(3, 4), (3, 4), (4,)], 0, "ok", {},
                                                 _ALL3),
    "cross_entropy_probabilities_weight_weight": (_ce(), [(3, 4), (3, 4), (4,)], 2, "inplace",
                                                  {}, _ALL3),
    "cross_entropy_target_alone": (_ce(), [(3, 4), (3, 4)], 0, "ok", {}, (False, True)),
    "pad_circular": (lambda L, x: L.nn.functional.pad(x, (1, 2), mode="circular"),
                     [(1, 2, 3)], 0, "ok"),
    "pad_circular_2d": (lambda L, x: L.nn.functional.pad(x, (1, 1, 2, 0), mode="circular"),
                        [(1, 2, 3, 3)], 0, "ok"),
    "pad_replicate": (lambda L, x: L.nn.functional.pad(x, (1, 1), mode="replicate"),
                      [(1, 2, 3)], 0, "inplace"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_saved_inputs_match_pytorch(name):
    build, shapes, written, expected, *rest = CASES[name]
    fixed = rest[0] if rest else {}
    req = rest[1] if len(rest) > 1 else (True,) * len(shapes)
    ours, our_grads = _outcome(ember, build, shapes, written, fixed, req)
    theirs, their_grads = _outcome(torch, build, shapes, written, fixed, req)
    assert (ours, theirs) == (expected, expected)
    if expected == "ok":
        assert len(our_grads) == len(their_grads)
        for g, h in zip(our_grads, their_grads):
            assert (g is None) == (h is None)
            if g is not None:
                np.testing.assert_allclose(g, h, rtol=1e-7, atol=1e-10)


def _double_backward(lib, build, shapes):
    """Gradients of the sum of squared first gradients (create_graph), after writing every
    input in place between the op and the first backward."""
    rng = np.random.default_rng(2)
    leaves = [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    xs = [x.clone() for x in leaves]
    out = build(lib, *xs)
    for x in xs:
        x.mul_(2)
    first = lib.autograd.grad((out * out).sum(), leaves, create_graph=True)
    total = sum((g * g).sum() for g in first)
    return [g.detach().numpy() for g in lib.autograd.grad(total, leaves)]


@pytest.mark.parametrize("name,build,shapes", [
    ("kron", lambda L, a, b: L.kron(a, b), [(2, 3), (3, 2)]),
    ("trapezoid", lambda L, y, x: L.trapezoid(y, x=x), [(3, 4), (4,)]),
    ("ndtr", lambda L, x: L.special.ndtr(x), [(5,)]),
    ("matrix_power_-2", lambda L, a: L.linalg.matrix_power(a, -2), [(3, 3)]),
    ("cross_entropy", lambda L, x, t: L.nn.functional.cross_entropy(x, t.softmax(1)),
     [(3, 4), (3, 4)]),
])
def test_copies_keep_double_backward(name, build, shapes):
    """The private copies a node keeps are made with clone (and kron's aliases read the
    values written, as PyTorch's): double backward through them still reaches the inputs."""
    ours = _double_backward(ember, build, shapes)
    theirs = _double_backward(torch, build, shapes)
    for g, h in zip(ours, theirs):
        np.testing.assert_allclose(g, h, rtol=1e-7, atol=1e-10)


def test_batch_norm_saved_attributes():
    """NativeBatchNormBackward0 exposes the input and weight it saved; the bias it did not."""
    results = []
    for lib in (ember, torch):
        x = lib.randn(4, 3, dtype=lib.float64, requires_grad=True)
        w = lib.ones(3, dtype=lib.float64, requires_grad=True)
        b = lib.zeros(3, dtype=lib.float64, requires_grad=True)
        node = lib.nn.functional.batch_norm(x, None, None, w, b, training=True).grad_fn
        results.append((node._saved_input is x, node._saved_weight is w,
                        getattr(node, "_saved_bias", None) is None))
    assert results[0] == results[1] == (True, True, True)


def _output_outcome(lib, build, shapes, fixed, req):
    """As ``_outcome``, writing in place into the op's result instead."""
    rng = np.random.default_rng(0)
    leaves, xs = [], []
    for i, s in enumerate(shapes):
        if i in fixed:
            xs.append(fixed[i](lib))
            continue
        leaf = lib.tensor(rng.standard_normal(s), requires_grad=req[i])
        leaves.append(leaf)
        xs.append(leaf.clone() if req[i] else leaf)
    out = build(lib, *xs)
    out.mul_(2)
    try:
        lib.autograd.grad(out.sum(), [x for x in leaves if x.requires_grad], allow_unused=True)
    except RuntimeError as e:
        return "inplace" if _INPLACE in str(e) else type(e).__name__
    return "ok"


@pytest.mark.parametrize("name", list(CASES))
def test_written_results_match_pytorch(name):
    """A write into the result raises where PyTorch's node saved it (a negative matrix
    power's inverse, as linalg.inv's), and only there."""
    build, shapes, _, _, *rest = CASES[name]
    fixed = rest[0] if rest else {}
    req = rest[1] if len(rest) > 1 else (True,) * len(shapes)
    assert _output_outcome(ember, build, shapes, fixed, req) == \
        _output_outcome(torch, build, shapes, fixed, req)


def test_copies_on_the_meta_device():
    """A recorded call on meta tensors saves meta copies and aliases (shapes only)."""
    x = ember.randn(3, 4, device="meta", requires_grad=True)
    p = ember.randn(3, 4, device="meta", requires_grad=True)
    loss = ember.nn.functional.cross_entropy(x, p, label_smoothing=0.1)
    assert type(loss.grad_fn).__name__ == "DivBackward1"
    assert ember.kron(x, p).shape == (9, 16)
    assert ember.special.ndtr(x).device.type == "meta"


_CLASS_TARGETS = {
    # name: (input shape, target, cross_entropy's keywords, dtype)
    "plain": ((4, 5), [0, 4, 2, 2], {}, "float64"),
    "float32": ((4, 5), [0, 4, 2, 2], {}, "float32"),
    "one_sample": ((5,), 3, {}, "float64"),
    "weight_smoothing": ((4, 5), [0, 4, 2, 2], {"weight": [1., .5, 2., 3., .25],
                                                "label_smoothing": 0.2}, "float64"),
    "ignore_sum": ((4, 5), [0, 4, 2, 2], {"ignore_index": 2, "reduction": "sum"}, "float64"),
    "pixels_none": ((2, 3, 4), [[0, 2, 1, 1], [2, 2, 0, 1]], {"reduction": "none"}, "float64"),
    "far_apart_rows": ((3, 4), [0, 1, 3], {"scale": [[1.], [300.], [-900.]]}, "float64"),
}


def _class_target_grads(lib, name, hooks):
    """First and second gradients of cross_entropy with a class target, its input written in
    place after the call (under pass-through saved-tensor hooks where ``hooks``)."""
    shape, target, kwargs, dtype = _CLASS_TARGETS[name]
    kwargs = dict(kwargs)
    data = np.random.default_rng(3).standard_normal(shape) * np.asarray(kwargs.pop("scale", 1))
    if "weight" in kwargs:
        kwargs["weight"] = lib.tensor(kwargs["weight"], dtype=getattr(lib, dtype))
    leaf = lib.tensor(data, dtype=getattr(lib, dtype), requires_grad=True)
    x = leaf.clone()
    if len(shape) == 3:
        x = x.transpose(1, 2).contiguous().transpose(1, 2)     # non-contiguous logits
    if hooks:
        with lib.autograd.graph.saved_tensors_hooks(lambda t: (t,), lambda p: p[0]):
            loss = lib.nn.functional.cross_entropy(x, lib.tensor(target), **kwargs)
    else:
        loss = lib.nn.functional.cross_entropy(x, lib.tensor(target), **kwargs)
    x.mul_(3)
    first, = lib.autograd.grad((loss * loss).sum(), leaf, create_graph=True)
    second, = lib.autograd.grad((first * first).sum(), leaf)
    return [g.detach().numpy() for g in (first, second)]


@pytest.mark.parametrize("hooks", [False, True])
@pytest.mark.parametrize("name", list(_CLASS_TARGETS))
def test_class_target_keeps_its_softmax(name, hooks):
    """With class targets the node keeps what the forward computed (not the input, not a
    copy): a write into the input changes nothing, and double backward reaches the input,
    as through PyTorch's saved log_softmax result."""
    ours, theirs = _class_target_grads(ember, name, hooks), _class_target_grads(torch, name,
                                                                                   hooks)
    tol = 1e-5 if _CLASS_TARGETS[name][3] == "float32" else 1e-10
    for g, h in zip(ours, theirs):
        np.testing.assert_allclose(g, h, rtol=tol, atol=tol)
