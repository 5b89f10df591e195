"""Signatures of nn.functional and nn module constructors against PyTorch's (round 12)."""
import inspect

import pytest

import ember

torch = pytest.importorskip("torch")

# torch.nn.functional names that are helpers or imports, not part of the functional API
_NOT_API = {"Optional", "assert_int_or_pair", "boolean_dispatch", "handle_torch_function",
            "has_torch_function", "has_torch_function_unary", "has_torch_function_variadic",
            "scaled_mm", "scaled_grouped_mm"}
_MISSING = object()


def _call_problems(torch_sig, ember_fn, bound_self):
    """Ways a call that binds to ``torch_sig`` fails to bind to ``ember_fn``."""
    ember_sig = inspect.signature(ember_fn)
    params = [p for p in torch_sig.parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keyword = [p for p in params if p.kind is p.KEYWORD_ONLY]
    self_ = (_MISSING,) if bound_self else ()
    problems = []
    for label, args, kwargs in (
            ("positional", [_MISSING] * len(positional), {p.name: _MISSING for p in keyword}),
            ("keyword", [_MISSING] * sum(p.kind is p.POSITIONAL_ONLY for p in params),
             {p.name: _MISSING for p in params if p.kind is not p.POSITIONAL_ONLY})):
        try:
            ember_sig.bind(*self_, *args, **kwargs)
        except TypeError as error:
            problems.append(f"{label}: {error}")
    for p in params:
        q = ember_sig.parameters.get(p.name)
        if q is not None and p.default is not p.empty and q.default is not q.empty:
            if type(p.default) in (int, float, bool, str, type(None)) and (
                    p.default != q.default or type(p.default) is not type(q.default)):
                problems.append(f"default {p.name}: {p.default!r} != {q.default!r}")
    return problems


def _python_functionals():
    for name in dir(torch.nn.functional):
        fn = getattr(torch.nn.functional, name)
        if name.startswith("_") or name in _NOT_API or not inspect.isfunction(fn):
            continue
        kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
        if inspect.Parameter.VAR_POSITIONAL in kinds:  # boolean_dispatch: nothing to compare
            continue
        yield name, fn


def test_functional_python_signatures_bind_in_ember():
    problems = {}
    for name, fn in _python_functionals():
        ember_fn = getattr(ember.nn.functional, name, None)
        found = ["missing"] if ember_fn is None else _call_problems(
            inspect.signature(fn), ember_fn, bound_self=False)
        if found:
            problems[name] = found
    assert not problems, problems


def test_module_constructor_signatures_bind_in_ember():
    problems = {}
    for name in dir(torch.nn):
        cls = getattr(torch.nn, name)
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):
            continue
        ember_cls = getattr(ember.nn, name, None)
        found = ["missing"] if ember_cls is None else _call_problems(
            inspect.signature(cls.__init__), ember_cls.__init__, bound_self=True)
        if found:
            problems[name] = found
    assert not problems, problems


@pytest.mark.parametrize("call", [
    "F.max_pool1d_with_indices(x3, 2, None, 0, 1, False, False)",
    "F.adaptive_max_pool1d_with_indices(input=x3, output_size=3, return_indices=False)",
    "F.adaptive_max_pool2d_with_indices(input=x4, output_size=2, return_indices=False)",
    "F.adaptive_max_pool3d_with_indices(x5, 2, False)",
    "nn.LazyConv2d(4, 3, 2, 1, 1, 1, False)(x4)",
    "nn.LazyConvTranspose3d(2, 2, 1, 0, 0, 1, True, 1)(x5)",
])
def test_calls_that_torch_accepts_give_torch_values(call):
    results = []
    for lib in (torch, ember):
        lib.manual_seed(0)
        names = {"F": lib.nn.functional, "nn": lib.nn,
                 "x3": lib.arange(12.).reshape(1, 2, 6),
                 "x4": lib.arange(32.).reshape(1, 2, 4, 4),
                 "x5": lib.arange(64.).reshape(1, 1, 4, 4, 4)}
        out = eval(call, names)
        results.append([o.shape for o in out] if isinstance(out, tuple) else [out.shape])
    assert [tuple(s) for s in results[0]] == [tuple(s) for s in results[1]]
    if call.startswith("F."):
        t_out = eval(call, {"F": torch.nn.functional, "x3": torch.arange(12.).reshape(1, 2, 6),
                            "x4": torch.arange(32.).reshape(1, 2, 4, 4),
                            "x5": torch.arange(64.).reshape(1, 1, 4, 4, 4)})
        e_out = eval(call, {"F": ember.nn.functional, "x3": ember.arange(12.).reshape(1, 2, 6),
                            "x4": ember.arange(32.).reshape(1, 2, 4, 4),
                            "x5": ember.arange(64.).reshape(1, 1, 4, 4, 4)})
        assert [o.tolist() for o in t_out] == [o.tolist() for o in e_out]
