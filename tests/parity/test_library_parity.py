"""ember.library against torch.library: the schemas infer_schema writes for the same
annotations, and the error messages of custom ops, schemas, calls and opcheck."""

import re
import typing
from typing import Optional, Sequence

import pytest

import ember
import ember.library
from tests.parity._compare import error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _prototypes(lib):
    """The same annotated functions, written against ``lib`` (ember or torch)."""
    Tensor, dtype, device = lib.Tensor, lib.dtype, lib.device
    number = typing.Union[int, float, bool]

    def plain(x: Tensor, y: Tensor) -> Tensor: ...
    def scalars(x: Tensor, n: int, s: float = 1.0, b: bool = True, name: str = "a") -> Tensor: ...
    def optionals(x: Optional[Tensor], n: Optional[int] = None, s: Optional[str] = None,
                  f: Optional[float] = 1.5, d: Optional[dtype] = None) -> Tensor: ...
    def lists(xs: list[Tensor], ys: Sequence[Optional[Tensor]], ns: list[int],
              fs: Optional[Sequence[float]], bs: list[bool]) -> list[Tensor]: ...
    def keyword_only(x: Tensor, *, alpha: float = 2, beta: int = -1) -> Tensor: ...
    def numbers(x: Tensor, s: number = 2.5, t: Optional[number] = None,
                u: Sequence[number] = None) -> number: ...
    def things(x: Tensor, d: dtype = lib.float32, dev: device = "cpu",
               e: dtype = lib.int64) -> Tensor: ...
    def several(x: Tensor) -> tuple[Tensor, int, float, bool]: ...
    def one_tuple(x: Tensor) -> tuple[Tensor]: ...
    def nothing(x: Tensor, out: Tensor, more: list[Tensor]) -> None: ...
    def pipe_union(x: int | None = None, y: float | None = 1.5, z: Tensor | None = None) \
            -> Tensor: ...
    def odd_floats(x: Tensor, a: float = -1e-5, b: float = 1e20, c: float = 1) -> Tensor: ...

    return {f.__name__: f for f in (plain, scalars, optionals, lists, keyword_only, numbers,
                                    things, several, one_tuple, nothing, pipe_union,
                                    odd_floats)}


OURS, THEIRS = _prototypes(ember), _prototypes(torch)
MUTATIONS = [("plain", ()), ("plain", ("x",)), ("nothing", ("out",)), ("nothing", "unknown"),
             ("nothing", ("out", "more")), ("lists", ("xs",)), ("optionals", ("x",))]


@pytest.mark.parametrize("name", sorted(OURS))
def test_infer_schema_matches(name):
    ours = ember.library.infer_schema(OURS[name], mutates_args=())
    assert ours == torch.library.infer_schema(THEIRS[name], mutates_args=())
    assert ember.library.infer_schema(OURS[name], mutates_args=(), op_name="op") == \
        torch.library.infer_schema(THEIRS[name], mutates_args=(), op_name="op")


@pytest.mark.parametrize("name, mutated", MUTATIONS)
def test_infer_schema_of_mutating_functions_matches(name, mutated):
    assert ember.library.infer_schema(OURS[name], mutates_args=mutated) == \
        torch.library.infer_schema(THEIRS[name], mutates_args=mutated)


def _error(fn):
    """(exception type name, message) of what ``fn()`` raises."""
    answer = error(fn)
    assert answer is not None, "no error raised"
    return answer


def _both(make):
    """The errors of ``make(lib, library)`` for ember and for torch (torch's names, like
    ``torch.Size``, spelled ``ember.Size``)."""
    ours = _error(lambda: make(ember, ember.library))
    kind, message = _error(lambda: make(torch, torch.library))
    return ours, (kind, _as_ember(message))


def _as_ember(message):
    """PyTorch's reprs of sizes and dtypes as ember writes them."""
    return re.sub(r"torch\.(Size|float|int|bool)", r"ember.\1", message)


def _cut(message, marker):
    return message.split(marker)[0]


def _prototype(lib):
    def f(x: lib.Tensor, n: int = 2, s: float = 1.0, *, flag: bool = False) -> lib.Tensor:
        return x * n * s + flag
    return f


_DEFINITION_ERRORS = {
    "no mutates_args": lambda lib, L: L.custom_op("parity::a", _prototype(lib)),
    "mutates_args a string": lambda lib, L: L.custom_op("parity::a", _prototype(lib),
                                                        mutates_args="x"),
    "digit first": lambda lib, L: L.custom_op("parity::1foo", _prototype(lib),
                                              mutates_args=()),
    "dash": lambda lib, L: L.custom_op("parity::foo-x", _prototype(lib), mutates_args=()),
    "empty name": lambda lib, L: L.custom_op("parity::", _prototype(lib), mutates_args=()),
    "reserved namespace": lambda lib, L: L.custom_op("prim::foo", _prototype(lib),
                                                     mutates_args=()),
    "no annotation": lambda lib, L: L.infer_schema(lambda x: x, mutates_args=()),
    "bad device type": lambda lib, L: L.custom_op("parity::dev", _prototype(lib),
                                                  mutates_args=(), device_types="tpu"),
    "unsupported kind": lambda lib, L: L.Library("parity_kind", "BOGUS"),
    "define with a name": lambda lib, L: L.define("parity::g", "g(Tensor x) -> Tensor"),
    "define without namespace": lambda lib, L: L.define("g", "(Tensor x) -> Tensor"),
    "missing paren": lambda lib, L: L.define("parity::g", "(Tensor x -> Tensor"),
    "trailing comma": lambda lib, L: L.define("parity::g", "(Tensor x,) -> Tensor"),
    "unknown type": lambda lib, L: L.define("parity::g", "(Tensor x, Foo y) -> Tensor"),
    "no arrow": lambda lib, L: L.define("parity::g", "(Tensor x)"),
    "empty default": lambda lib, L: L.define("parity::g", "(Tensor x, int y=) -> Tensor"),
    "bad dispatch key": lambda lib, L: L.Library("parity_key", "FRAGMENT").impl(
        "f", lambda x: x, "TPU"),
}


@pytest.mark.parametrize("case", sorted(_DEFINITION_ERRORS))
def test_definition_errors_match(case):
    ours, theirs = _both(_DEFINITION_ERRORS[case])
    assert ours == theirs


def test_unsupported_annotation_errors_match():
    def make(lib, L):
        def f(x: lib.Tensor, y: dict) -> lib.Tensor: ...
        return L.infer_schema(f, mutates_args=())
    ours, theirs = _both(make)
    assert _cut(ours[1], "The valid types") == _cut(theirs[1], "The valid types")


def _custom_ops():
    """One op defined by each library, with a CPU kernel only."""
    ours = ember.library.custom_op("parity_ours::f", _prototype(ember), mutates_args=(),
                                   device_types="cpu")
    theirs = torch.library.custom_op("parity_theirs::f", _prototype(torch), mutates_args=(),
                                     device_types="cpu")
    return ours, theirs


_CALL_ERRORS = {
    "wrong type": lambda lib, op: op(lib.ones(1), 2.5),
    "not a tensor": lambda lib, op: op(3),
    "missing": lambda lib, op: op(n=3),
    "too many": lambda lib, op: op(lib.ones(1), 2, 1.0, True),
    "unknown keyword": lambda lib, op: op(lib.ones(1), bogus=1),
}


@pytest.mark.parametrize("case", sorted(_CALL_ERRORS))
def test_call_errors_match(case):
    ours_op, theirs_op = _custom_ops()
    ours = _error(lambda: _CALL_ERRORS[case](ember, ours_op))
    theirs = _error(lambda: _CALL_ERRORS[case](torch, theirs_op))
    # the same text but for the op's namespace and PyTorch's C++ cast details
    assert ours[0] == theirs[0]
    marker = "\nCast error details: Unable to cast Python"
    assert _cut(ours[1], marker) == _cut(theirs[1].replace("parity_theirs", "parity_ours"),
                                         marker)


def test_missing_kernel_and_formula_errors_match():
    def cuda_only(lib, L):
        def f(x: lib.Tensor) -> lib.Tensor:
            return x * 2
        return L.custom_op("parity::cuda_only", f, mutates_args=(), device_types="cuda")(
            lib.ones(1))
    ours, theirs = _both(cuda_only)
    assert ours[0] == theirs[0] == "NotImplementedError"
    assert _cut(ours[1], "(if using custom build).") == _cut(theirs[1],
                                                             "(if using custom build).")

    def no_formula(lib, L):
        def f(x: lib.Tensor) -> lib.Tensor:
            return x * 2
        op = L.custom_op("parity::no_formula", f, mutates_args=())
        op(lib.ones(1, requires_grad=True)).sum().backward()
    ours, theirs = _both(no_formula)
    assert ours == theirs

    def mutating_formula(lib, L):
        def f(x: lib.Tensor) -> None:
            x.add_(1)
        op = L.custom_op("parity::mutating", f, mutates_args=("x",))
        op.register_autograd(lambda ctx, g: g)
    ours, theirs = _both(mutating_formula)
    assert ours == theirs


def test_aliasing_output_errors_match():
    def make(lib, L):
        def f(x: lib.Tensor) -> lib.Tensor:
            return x.view(-1)
        return L.custom_op("parity::alias", f, mutates_args=())(lib.ones(2))
    ours, theirs = _both(make)
    assert ours[0] == theirs[0] and ours[1].split("): ")[1] == theirs[1].split("): ")[1]


def _opcheck(lib, L, ns, sneaky):
    def f(x: lib.Tensor) -> lib.Tensor:
        if sneaky:
            x.add_(1)
        return x.sin()
    op = L.custom_op(f"{ns}::checked", f, mutates_args=())
    op.register_fake(lambda x: lib.empty(x.shape[0] + sneaky))
    op.register_autograd(lambda ctx, g: g * ctx.x.cos(),
                         setup_context=lambda ctx, inputs, output: setattr(ctx, "x", inputs[0]))
    return L.opcheck(op, (lib.ones(3, requires_grad=not sneaky),), raise_exception=False)


@pytest.mark.parametrize("sneaky", [False, True])
def test_opcheck_results_match(sneaky):
    ours = _opcheck(ember, ember.library, "parity_ours", sneaky)
    theirs = _opcheck(torch, torch.library, "parity_theirs", sneaky)
    assert list(ours) == list(theirs)
    for key in ours:
        mine, other = ours[key], theirs[key]
        if mine == "SUCCESS" or other == "SUCCESS":
            assert mine == other, key
        else:
            assert str(mine).replace("parity_ours", "parity_theirs") == \
                _as_ember(str(other)), key
