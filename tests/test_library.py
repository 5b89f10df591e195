"""ember.library (torch.library): custom ops with their schemas, kernels, fake impls and
autograd formulas, the older Library API, opcheck, and the ember.ops namespaces."""

import warnings

import numpy as np
import pytest

import ember
import ember.library as library
from ember import Tensor
from ember.autograd import gradcheck, gradgradcheck

NS = "embertest"


@pytest.fixture
def lib():
    """A FRAGMENT library of its own namespace, destroyed after the test."""
    made = library.Library("embertest_lib", "FRAGMENT")
    yield made
    made._destroy()


def _scaled_sin():
    """``x.sin() * factor`` as a custom op with a fake impl and an autograd formula written
    with ember ops (so it has a second derivative)."""
    @library.custom_op(f"{NS}::scaled_sin", mutates_args=())
    def scaled_sin(x: Tensor, factor: float = 1.0) -> Tensor:
        return ember.from_numpy(np.sin(x.detach().numpy()) * factor)

    @scaled_sin.register_fake
    def _(x, factor=1.0):
        return ember.empty_like(x)

    def setup_context(ctx, inputs, output):
        x, factor = inputs
        ctx.save_for_backward(x)
        ctx.factor = factor

    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * x.cos() * ctx.factor, None

    scaled_sin.register_autograd(backward, setup_context=setup_context)
    return scaled_sin


# --- custom_op -------------------------------------------------------------------------------

def test_custom_op_forward_by_every_name():
    op = _scaled_sin()
    x = ember.tensor([0.0, 0.5, 1.0], dtype=ember.float64)
    expected = np.sin([0.0, 0.5, 1.0]) * 2
    for call in (op, ember.ops.embertest.scaled_sin, ember.ops.embertest.scaled_sin.default):
        np.testing.assert_allclose(call(x, 2.0).numpy(), expected)
    np.testing.assert_allclose(op(x).numpy(), np.sin([0.0, 0.5, 1.0]))
    assert repr(op) == "<CustomOpDef(embertest::scaled_sin)>"
    assert str(op._opoverload._schema) == \
        "embertest::scaled_sin(Tensor x, float factor=1.) -> Tensor"
    assert ember.ops.embertest.scaled_sin.overloads() == ["default"]


def test_custom_op_gradients_to_second_order():
    op = _scaled_sin()
    x = ember.tensor([0.1, 0.7, -1.3], dtype=ember.float64, requires_grad=True)
    y = op(x, 3.0)
    assert type(y.grad_fn).__name__ == "GeneratedBackwardFor_embertest_scaled_sin_defaultBackward"
    (g,) = ember.autograd.grad(y.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.cos([0.1, 0.7, -1.3]))
    assert gradcheck(lambda t: op(t, 3.0), (x,))
    assert gradgradcheck(lambda t: op(t, 3.0), (x,))


def test_setup_context_sees_defaults_and_keyword_only_inputs():
    seen = {}

    @library.custom_op(f"{NS}::kw_scale", mutates_args=())
    def kw_scale(x: Tensor, n: int = 2, *, scale: float = 1.5) -> Tensor:
        return x * n * scale

    def setup_context(ctx, inputs, keyword_only_inputs, output):
        seen.update(inputs=inputs, kw=keyword_only_inputs)
        ctx.k = inputs[1] * keyword_only_inputs["scale"]

    def backward(ctx, grad):
        seen["needs"] = ctx.needs_input_grad
        return grad * ctx.k, None

    kw_scale.register_autograd(backward, setup_context=setup_context)
    x = ember.ones(2, requires_grad=True)
    kw_scale(x, scale=4.0).sum().backward()
    assert seen["inputs"][1] == 2 and seen["kw"] == {"scale": 4.0}
    assert seen["needs"] == (True, False)
    assert x.grad.tolist() == [8.0, 8.0]


def test_tensor_list_inputs_and_outputs_get_gradients():
    @library.custom_op(f"{NS}::weighted", mutates_args=())
    def weighted(xs: list[Tensor], weights: list[float]) -> list[Tensor]:
        return [x * w for x, w in zip(xs, weights)]

    def setup_context(ctx, inputs, output):
        ctx.weights = inputs[1]

    def backward(ctx, grads):
        assert ctx.needs_input_grad == ([True, False], False)
        return [g * w for g, w in zip(grads, ctx.weights)], None

    weighted.register_autograd(backward, setup_context=setup_context)
    a = ember.ones(2, requires_grad=True)
    out = weighted([a, ember.ones(3)], [2.0, 5.0])
    assert isinstance(out, list) and [o.tolist() for o in out] == [[2.0, 2.0], [5.0] * 3]
    out[0].sum().backward()
    assert a.grad.tolist() == [2.0, 2.0]


def test_backward_without_a_formula_raises_at_backward_time():
    @library.custom_op(f"{NS}::no_formula", mutates_args=())
    def no_formula(x: Tensor) -> Tensor:
        return x * 2

    x = ember.ones(2, requires_grad=True)
    y = no_formula(x)                               # the forward works
    assert y.tolist() == [2.0, 2.0] and y.requires_grad
    with pytest.raises(RuntimeError, match=r"^Trying to backward through "
                       r"embertest\.no_formula\.default but no autograd formula was "
                       r"registered\. Please use register_autograd to add one\.$"):
        y.sum().backward()
    assert not no_formula(ember.ones(2)).requires_grad


def test_backward_returning_too_few_gradients():
    @library.custom_op(f"{NS}::two_in", mutates_args=())
    def two_in(x: Tensor, y: Tensor) -> Tensor:
        return x * y

    two_in.register_autograd(lambda ctx, grad: grad)
    a = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients "
                       r"\(expected 2, got 1\)"):
        two_in(a, a.detach()).sum().backward()


def test_mutating_op_bumps_the_version():
    @library.custom_op(f"{NS}::add_one_", mutates_args=("x",))
    def add_one_(x: Tensor) -> None:
        x.add_(1)

    assert str(add_one_._opoverload._schema) == "embertest::add_one_(Tensor(a0!) x) -> ()"
    t = ember.zeros(3)
    before = t._version
    assert add_one_(t) is None
    assert t.tolist() == [1.0, 1.0, 1.0]
    assert t._version == before + 2         # the op's own bump, and add_'s
    with pytest.raises(RuntimeError, match=r"^Cannot register autograd formula for "
                       r"non-functional operator <CustomOpDef\(embertest::add_one_\)> with "
                       r"schema embertest::add_one_\(Tensor\(a0!\) x\) -> \(\)\. Please create"):
        add_one_.register_autograd(lambda ctx, g: g)


def test_mutates_args_is_a_required_keyword():
    def f(x: Tensor) -> Tensor:
        return x.clone()

    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: "
                       "'mutates_args'"):
        library.custom_op(f"{NS}::f", f)
    with pytest.raises(ValueError, match="^mutates_args must either be a sequence of the names"):
        library.custom_op(f"{NS}::f", f, mutates_args="x")
    with pytest.raises(ValueError, match=r"\{'y'\} in mutates_args were not found"):
        library.custom_op(f"{NS}::f", f, mutates_args=("y",))


def test_returning_an_input_is_refused():
    @library.custom_op(f"{NS}::identity", mutates_args=())
    def identity(x: Tensor) -> Tensor:
        return x.view(-1)

    with pytest.raises(RuntimeError, match=r"^identity \(with implementation in <module "
                       r"'tests\.test_library'.*must not also be an input"):
        identity(ember.ones(2))


def test_device_types_pick_the_kernel_by_device():
    @library.custom_op(f"{NS}::which", mutates_args=(), device_types="cpu")
    def which(x: Tensor) -> Tensor:
        return x + 1

    @which.register_kernel("cuda")
    def _(x):
        return x + 2

    assert which(ember.zeros(1)).tolist() == [1.0]
    which.register_kernel("cpu", lambda x: x + 10)
    assert which(ember.zeros(1)).tolist() == [10.0]
    with which.set_kernel_enabled("cpu", False):     # the original function again
        assert which(ember.zeros(1)).tolist() == [1.0]
    assert which(ember.zeros(1)).tolist() == [10.0]

    @library.custom_op(f"{NS}::cuda_only", mutates_args=(), device_types="cuda")
    def cuda_only(x: Tensor) -> Tensor:
        return x + 2

    with pytest.raises(NotImplementedError, match=r"^Could not run 'embertest::cuda_only' "
                       r"with arguments from the 'CPU' backend\..*only available for these "
                       r"backends: \[CUDA\]"):
        cuda_only(ember.zeros(1))
    with pytest.raises(RuntimeError, match="^Expected one of cpu, cuda, .* device type at "
                       "start of device string: tpu$"):
        which.register_kernel("tpu", lambda x: x)


def test_ops_without_tensors_need_a_device_argument():
    def ones(n: int) -> Tensor:
        return ember.ones(n)

    with pytest.raises(ValueError, match="^Functions without tensor inputs are required to "
                       "have a `device: torch.device` argument$"):
        library.custom_op(f"{NS}::ones", ones, mutates_args=(), device_types="cpu")

    @library.custom_op(f"{NS}::ones_on", mutates_args=(), device_types="cpu")
    def ones_on(n: int, device: ember.device) -> Tensor:
        return ember.ones(n, device=device)

    assert ones_on(2, "cpu").tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="^ones_on does not have a kernel registered for "
                       "cuda. Please use register_kernel to do so.$"):
        ones_on(2, "cuda")


def test_calls_are_checked_against_the_schema():
    @library.custom_op(f"{NS}::checked", mutates_args=())
    def checked(x: Tensor, n: int = 2, *, flag: bool = False) -> Tensor:
        return x * n + flag

    x = ember.ones(1)
    decl = r"Declaration: embertest::checked\(Tensor x, SymInt n=2, \*, bool flag=False\)"
    with pytest.raises(RuntimeError, match=r"^embertest::checked\(\) Expected a value of "
                       r"type 'int' for argument 'n' but instead found type 'float'\.\n"
                       r"Position: 1\nValue: 2\.5\n" + decl):
        checked(x, 2.5)
    with pytest.raises(RuntimeError, match=r"^embertest::checked\(\) is missing value for "
                       r"argument 'x'\. " + decl):
        checked(n=3)
    with pytest.raises(RuntimeError, match=r"takes 2 positional argument\(s\) but 3 "
                       r"was/were given\."):
        checked(x, 2, True)
    with pytest.raises(RuntimeError, match=r"^Unknown keyword argument 'bogus' for operator "
                       r"'embertest::checked'\."):
        checked(x, bogus=1)
    assert checked(x, ember.tensor(3), flag=True).tolist() == [4.0]   # 0-dim tensors are ints


def test_tensor_subclasses_are_offered_the_call():
    op = _scaled_sin()
    calls = []

    class Logged(ember.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            calls.append(func)
            return super().__torch_function__(func, types, args, kwargs)

    t = ember.zeros(2, dtype=ember.float64).as_subclass(Logged)
    out = op(t, 2.0)
    assert calls[0] is ember.ops.embertest.scaled_sin.default
    assert type(out) is Logged and out.tolist() == [0.0, 0.0]


def test_torch_function_modes_see_the_op_overload():
    from ember.overrides import TorchFunctionMode
    op = _scaled_sin()
    seen = []

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    x = ember.zeros(2, dtype=ember.float64)
    with Recorder():
        out = op(x, 2.0)
    assert seen == [ember.ops.embertest.scaled_sin.default]   # not the kernel's own ops
    assert out.tolist() == [0.0, 0.0]


def test_triton_op_runs_the_function_as_is():
    @library.triton_op(f"{NS}::tri", mutates_args=())
    def tri(x: Tensor) -> Tensor:
        return x * 3

    assert tri(ember.ones(1)).tolist() == [3.0]
    with pytest.raises(RuntimeError, match="^wrap_triton only works on functions annotated "
                       "with triton.jit or triton.autotune$"):
        library.wrap_triton(lambda: 0)


def test_bad_names_raise_pytorchs_errors():
    def f(x: Tensor) -> Tensor:
        return x.clone()

    with pytest.raises(ValueError, match=r"^not enough values to unpack"):
        library.custom_op("nonamespace", f, mutates_args=())
    with pytest.raises(RuntimeError, match=r"^expected eof but found 'ident' here:\nmy lib::foo"
                       r"\n   ~~~ <--- HERE\n$"):
        library.custom_op("my lib::foo", f, mutates_args=())
    with pytest.raises(RuntimeError, match=r"^expected ident but found 'number' here:\n1foo"):
        library.custom_op(f"{NS}::1foo", f, mutates_args=())
    with pytest.raises(ValueError, match="^prim is a reserved namespace"):
        library.custom_op("prim::foo", f, mutates_args=())


# --- infer_schema ------------------------------------------------------------------------------

def test_infer_schema_strings():
    def a(x: Tensor, n: int, s: float = 1.0, b: bool = True, name: str = "a") -> Tensor: ...
    def b(x: Tensor | None, xs: list[Tensor], d: ember.dtype = ember.float32,
          *, alpha: float = 2) -> tuple[Tensor, Tensor]: ...
    def c(x: Tensor, out: Tensor) -> None: ...

    assert library.infer_schema(a, mutates_args=()) == \
        '(Tensor x, SymInt n, float s=1.0, bool b=True, str name="a") -> Tensor'
    assert library.infer_schema(b, mutates_args=(), op_name="bb") == \
        "bb(Tensor? x, Tensor[] xs, ScalarType d=float32, *, float alpha=2) -> (Tensor, Tensor)"
    assert library.infer_schema(c, mutates_args=("out",)) == "(Tensor x, Tensor(a1!) out) -> ()"
    assert library.infer_schema(c, mutates_args="unknown") == \
        "(Tensor(a0!) x, Tensor(a1!) out) -> ()"
    with pytest.raises(ValueError, match=r"^infer_schema\(func\): Parameter x must have a type "
                       r"annotation\. Got func with signature \(x\)\)$"):
        library.infer_schema(lambda x: x, mutates_args=())


# --- the Library API ---------------------------------------------------------------------------

def test_library_define_and_impl(lib):
    assert repr(lib) == "Library(kind=FRAGMENT, ns=embertest_lib, dispatch_key=)>"
    assert lib.define("twice(Tensor x, int n=2) -> Tensor") == "twice"
    lib.define("twice.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    seen = []

    def twice(x, *rest):
        seen.append(rest)
        return x * 2

    lib.impl("twice", twice, "CPU")
    lib.impl("twice.out", lambda x, *, out: out.copy_(x * 2), "CPU")
    packet = ember.ops.embertest_lib.twice
    assert packet.overloads() == ["default", "out"]
    assert packet(ember.ones(2)).tolist() == [2.0, 2.0]
    packet.default(ember.ones(2), 3)
    assert seen == [(), (3,)]            # a default value is not passed to the kernel
    out = ember.zeros(2)
    packet.out(ember.ones(2), out=out)
    assert out.tolist() == [2.0, 2.0]
    lib.define("nokernel(Tensor x) -> Tensor")
    with pytest.raises(NotImplementedError, match=r"^Could not run 'embertest_lib::nokernel' "
                       r"with arguments from the 'CPU' backend\."):
        ember.ops.embertest_lib.nokernel(ember.ones(1))


def test_library_ops_differentiate_through_their_kernel(lib):
    lib.define("cube(Tensor x) -> Tensor")
    lib.impl("cube", lambda x: x * x * x, "CPU")
    x = ember.tensor([2.0], requires_grad=True)
    ember.ops.embertest_lib.cube(x).sum().backward()
    assert x.grad.tolist() == [12.0]       # the kernel's ember ops recorded the graph
    library.register_autograd("embertest_lib::cube", lambda ctx, g: g * 100)
    x.grad = None
    ember.ops.embertest_lib.cube(x).sum().backward()
    assert x.grad.tolist() == [100.0]


def test_library_errors(lib):
    with pytest.raises(ValueError, match="^Unsupported kind: BOGUS$"):
        library.Library("embertest_lib", "BOGUS")
    lib.define("dup(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match=r"^Tried to register an operator "
                       r"\(embertest_lib::dup\(Tensor x\) -> Tensor\) with the same name and "
                       r"overload name multiple times\."):
        lib.define("dup(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match=r"^expected \) but found 'arrow' here:\n"):
        lib.define("bad(Tensor x -> Tensor")
    with pytest.raises(RuntimeError, match="^\nunknown type specifier"):
        lib.define("bad(Tensor x, Foo y) -> Tensor")
    with pytest.raises(RuntimeError, match="^could not parse dispatch key: TPU$"):
        lib.impl("dup", lambda x: x, "TPU")
    impl_lib = library.Library("embertest_lib", "IMPL", "CPU")
    with pytest.raises(RuntimeError, match=r'^def\("z"\): Cannot define an operator inside of '
                       r"a TORCH_LIBRARY_IMPL block\."):
        impl_lib.define("z(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match=r"Explicitly provided dispatch key \(CUDA\) is "
                       r"inconsistent with the dispatch key of the enclosing "
                       r"TORCH_LIBRARY_IMPL block \(CPU\)"):
        impl_lib.impl("dup", lambda x: x, "CUDA")


def test_a_def_library_is_unique_and_takes_its_ops_away():
    first = library.Library("embertest_def", "DEF")
    first.define("f(Tensor x) -> Tensor")
    first.impl("f", lambda x: x + 1, "CompositeExplicitAutograd")
    with pytest.raises(RuntimeError, match="^Only a single TORCH_LIBRARY can be used to "
                       "register the namespace embertest_def"):
        library.Library("embertest_def", "DEF")
    assert ember.ops.embertest_def.f(ember.zeros(1)).tolist() == [1.0]
    first._destroy()
    with pytest.raises(AttributeError, match="has no attribute 'embertest_def'"):
        ember.ops.embertest_def
    again = library.Library("embertest_def", "DEF")     # the namespace is free again
    again._destroy()


def test_functional_registration_api(lib):
    ns = "embertest_lib"
    library.define(f"{ns}::minus", "(Tensor x, float s=1.0) -> Tensor", lib=lib)
    with pytest.raises(ValueError, match=r'^define\(qualname, schema, \.\.\.\): expected '
                       r'schema to look like e\.g\. "\(Tensor x\) -> Tensor" but got '
                       r'"m2\(Tensor x\) -> Tensor"$'):
        library.define(f"{ns}::m2", "m2(Tensor x) -> Tensor", lib=lib)
    with pytest.raises(ValueError, match='^Expected `qualname` to be of the form '
                       '"namespace::name", but got nonamespace'):
        library.define("nonamespace", "(Tensor x) -> Tensor")
    library.impl(f"{ns}::minus", "cpu", lambda x, s=1.0: x - s, lib=lib)
    assert ember.ops.embertest_lib.minus(ember.zeros(1), 2.0).tolist() == [-2.0]
    library.register_kernel(f"{ns}::minus", "cpu", lambda x, s=1.0: x - 10 * s, lib=lib)
    assert ember.ops.embertest_lib.minus(ember.zeros(1)).tolist() == [-10.0]
    fake = library.register_fake(f"{ns}::minus", lambda x, s=1.0: ember.empty_like(x), lib=lib)
    assert callable(fake)
    with pytest.raises(RuntimeError, match=f"^operator {ns}::nope does not exist$"):
        library.register_fake(f"{ns}::nope", lambda x: x, lib=lib)
    with pytest.raises(ValueError, match=r"^register_autograd\(embertest_lib\.minus\): got "
                       r"unexpected type for op"):
        library.register_autograd(ember.ops.embertest_lib.minus, lambda ctx, g: g)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        library.impl_abstract(f"{ns}::minus", lambda x, s=1.0: ember.empty_like(x), lib=lib)
    assert caught[0].category is FutureWarning


# --- opcheck -----------------------------------------------------------------------------------

def test_opcheck_passes_a_correct_op():
    op = _scaled_sin()
    x = ember.randn(3, dtype=ember.float64, requires_grad=True)
    expected = {"test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
                "test_faketensor": "SUCCESS", "test_aot_dispatch_dynamic": "SUCCESS"}
    assert library.opcheck(op, (x, 2.0)) == expected
    assert library.opcheck(ember.ops.embertest.scaled_sin.default, (x,)) == expected
    assert library.opcheck(op, (x,), test_utils="test_schema") == {"test_schema": "SUCCESS"}
    with pytest.raises(ValueError, match=r"expected test_utils to be subset of"):
        library.opcheck(op, (x,), test_utils=("test_schema", "bogus"))


def test_opcheck_reports_a_wrong_op():
    @library.custom_op(f"{NS}::sneaky", mutates_args=())
    def sneaky(x: Tensor) -> Tensor:
        x.add_(1)                              # writes an argument it did not declare
        return x + 0

    @sneaky.register_fake
    def _(x):
        return ember.empty(x.shape[0] + 1)     # promises the wrong shape

    results = library.opcheck(sneaky, (ember.zeros(3),), raise_exception=False)
    assert str(results["test_schema"]) == "Argument x is not defined as mutable but was mutated"
    assert str(results["test_faketensor"]) == (
        "When comparing the output of embertest.sneaky.default on FakeTensor and concrete "
        "Tensors, found mismatched tensor metadata: Shapes ember.Size([3]) and "
        "ember.Size([4]) are not equal!")
    assert results["test_autograd_registration"] == "SUCCESS"
    with pytest.raises(library.OpCheckError, match=r"^opcheck\(op, \.\.\.\): test_schema "
                       r"failed with Argument x is not defined as mutable"):
        library.opcheck(sneaky, (ember.zeros(3),))


def test_opcheck_flags_a_library_op_without_autograd(lib):
    lib.define("plain(Tensor x) -> Tensor")
    lib.impl("plain", lambda x: x * 2, "CPU")
    x = ember.ones(2, requires_grad=True)
    results = library.opcheck(ember.ops.embertest_lib.plain.default, (x,),
                              raise_exception=False)
    assert isinstance(results["test_autograd_registration"], AssertionError)
    assert str(results["test_autograd_registration"]).startswith(
        "embertest_lib::plain: at least one output of this operator has requires_grad=True")


# --- ember.ops namespaces ----------------------------------------------------------------------

def test_aten_names_call_ember_functions():
    x, y = ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0])
    aten = ember.ops.aten
    assert aten.add.default(x, y).tolist() == [4.0, 6.0]
    assert aten.add.Tensor(x, y, alpha=2).tolist() == [7.0, 10.0]
    assert aten.mm.default(x[None], y[:, None]).tolist() == [[11.0]]
    assert aten.gelu.default(ember.zeros(1)).tolist() == [0.0]     # nn.functional's op
    assert aten.absolute(ember.tensor([-1.0])).tolist() == [1.0]   # an alias
    z = x.clone()
    aten.add_.default(z, y)
    assert z.tolist() == [4.0, 6.0]
    assert aten.mm.default is aten.mm.default                      # stable for policy sets
    assert repr(aten.mm.default) == "<OpOverload(op='aten.mm', overload='default')>"
    with pytest.raises(AttributeError, match="^'_OpNamespace' 'aten' object has no attribute "
                       "'not_an_op'$"):
        aten.not_an_op
    with pytest.raises(AttributeError, match="^The underlying op of 'aten.add' has no "
                       "overload name 'nope'$"):
        aten.add.nope


def test_ops_module_attributes_are_not_shadowed():
    import ember.ops as ops
    from ember.ops import linalg
    assert ops.linalg is linalg and isinstance(ops.MODULES, tuple)
    with pytest.raises(AttributeError, match="^module 'ember.ops' has no attribute "
                       "'no_such_namespace'$"):
        ops.no_such_namespace
    assert not hasattr(ops, "no_such_namespace")


def test_meta_tensors_run_the_fake_impl():
    @ember.library.custom_op("metatest::scale", mutates_args=())
    def scale(x: ember.Tensor, f: float) -> ember.Tensor:
        return x * f

    @scale.register_fake
    def _(x, f):
        return ember.empty_like(x)

    assert scale(ember.empty(3, 4, device="meta"), 2.0).shape == (3, 4)
    assert scale(ember.ones(2), 2.0).tolist() == [2.0, 2.0]

    @ember.library.custom_op("metatest::nofake", mutates_args=())
    def nofake(x: ember.Tensor) -> ember.Tensor:
        return x * 2

    with pytest.raises(RuntimeError, match=r"^There was no fake impl registered for "
                                           r"<CustomOpDef\(metatest::nofake\)>"):
        nofake(ember.empty(3, device="meta"))
