"""Signatures of PyTorch's Python-level APIs beyond nn's functions and module constructors
(optim, lr_scheduler, distributions, utils.data, nn.init, nn.utils, func, autograd, amp,
serialization, random, torch.functional, Tensor and Module methods) against ember's, and
dir() completeness of ember's modules (round 24)."""
import importlib
import inspect

import pytest

import ember
from tests.parity.test_parity_signatures import _call_problems

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_P = inspect.Parameter

# the modules whose public functions and classes (their constructors and public methods) are
# compared: their ``__all__``, else what dir() lists that torch defines (not typing's imports)
_MODULES = ["optim", "optim.lr_scheduler", "optim.swa_utils", "distributions",
            "distributions.transforms", "distributions.constraints", "utils.data", "nn.init",
            "nn.utils", "nn.utils.rnn", "nn.utils.parametrize", "nn.utils.parametrizations",
            "nn.utils.prune", "nn.utils.stateless", "func", "autograd", "autograd.functional",
            "autograd.forward_ad", "autograd.graph", "autograd.function", "autograd.grad_mode",
            "amp", "serialization", "random", "functional"]

# What is not compared, and why (each name is the audit's label for it)
_ALLOWED = {
    # first-class dimensions (functorch.dim), which ember does not implement
    "Tensor.index", "Parameter.index",
    # abstract in torch's Python Node; its C++ nodes (what grad_fn is) have it as a
    # property, as ember's nodes do
    "autograd.graph.Node.metadata",
    # the class of a custom Function's graph node: its apply* methods are the engine's calls
    "autograd.function.BackwardCFunction.apply",
    "autograd.function.BackwardCFunction.apply_jvp",
    "autograd.function.BackwardCFunction.apply_boxed",
    # the datapipes of torch.utils.data (deprecated in PyTorch, moved out to torchdata):
    # not implemented in ember
    "utils.data.DFIterDataPipe", "utils.data.DataChunk", "utils.data.IterDataPipe",
    "utils.data.MapDataPipe", "utils.data.functional_datapipe",
    "utils.data.guaranteed_datapipes_determinism", "utils.data.non_deterministic",
    "utils.data.runtime_validation", "utils.data.runtime_validation_disabled",
    "utils.data.argument_validation",
    # switches of the CUDA engine's per-node streams and of CUDA graph capture, which
    # ember's engine (one stream, no graph capture of backward) has no use for
    "autograd.graph.set_warn_on_accumulate_grad_stream_mismatch",
    "autograd.graph.set_override_stale_capture_stream",
    # a hint to torch.compile's min-cut partitioner, which raises outside a compiled region;
    # ember's compile runs the function eagerly (nothing to partition)
    "autograd.graph.region_activation_memory_budget",
}

# functions torch builds with boolean_dispatch ((*args, **kwargs)): the signature compared
# is that of the function they dispatch to
_DISPATCHED = {"lu": "_lu_impl", "unique": "_unique_impl",
               "unique_consecutive": "_unique_consecutive_impl"}


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):     # builtins without text signatures
        return None


def _order_problems(torch_sig, ember_fn, bound_self):
    """Positional parameters out of torch's order, and torch's keyword-only parameters that
    ember takes positionally (which _call_problems' binding lets through)."""
    ember_params = list(inspect.signature(ember_fn).parameters.values())
    torch_params = [p for p in torch_sig.parameters.values()
                    if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if bound_self:
        torch_params = [p for p in torch_params if p.name not in ("self", "cls")]
        ember_params = ember_params[1:]
    positional = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)
    torch_pos = [p.name for p in torch_params if p.kind in positional]
    ember_pos = [p.name for p in ember_params if p.kind in positional]
    problems = []
    if ember_pos[:len(torch_pos)] != torch_pos:
        problems.append(f"positional order: torch {torch_pos}, ember {ember_pos}")
    by_name = {p.name: p for p in ember_params}
    problems += [f"{p.name} is keyword-only in torch" for p in torch_params
                 if p.kind is _P.KEYWORD_ONLY and p.name in by_name
                 and by_name[p.name].kind is not _P.KEYWORD_ONLY]
    return problems


def _compare(torch_fn, ember_fn, bound_self):
    torch_sig = _signature(torch_fn)
    if torch_sig is None:
        return []
    if ember_fn is None:
        return ["missing"]
    if _signature(ember_fn) is None:
        return ["ember's has no signature"]
    if bound_self and next(iter(torch_sig.parameters), None) != "self":
        bound_self = False      # a metaclass's method: its ``cls`` is compared as a parameter
    return (_call_problems(torch_sig, ember_fn, bound_self)
            + _order_problems(torch_sig, ember_fn, bound_self))


def _is_torch_api(obj):
    return (getattr(obj, "__module__", None) or "").startswith("torch")


def _public_methods(cls):
    """(name, function, bound) of ``cls``'s public methods (and __init__) that torch defines
    in Python; ``bound``: called on an instance."""
    for name in dir(cls):
        if name.startswith("_") and name != "__init__":
            continue
        raw = inspect.getattr_static(cls, name)
        if isinstance(raw, (staticmethod, classmethod)):
            fn, bound = getattr(cls, name), False
        elif inspect.isfunction(raw):
            fn, bound = raw, True
        else:
            continue
        if _is_torch_api(fn) and fn is not object.__init__:
            yield name, fn, bound


def _class_problems(label, torch_cls, ember_cls, only=None):
    problems = {}
    for name, fn, bound in _public_methods(torch_cls):
        if only is not None and name not in only or f"{label}.{name}" in _ALLOWED:
            continue
        raw = inspect.getattr_static(ember_cls, name, None)
        ember_bound = bound and not isinstance(raw, (staticmethod, classmethod))
        ember_fn = getattr(ember_cls, name) if isinstance(raw, (staticmethod, classmethod)) \
            else raw
        if raw is not None and ember_bound != bound:
            found = ["static/class method in one, instance method in the other"]
        else:
            found = _compare(fn, ember_fn, bound)
        if found:
            problems[f"{label}.{name}"] = found
    return problems


def _public_names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if _is_torch_api(getattr(module, n))]
    return [n for n in names if not n.startswith("_")]


@pytest.mark.parametrize("path", _MODULES)
def test_module_signatures_bind_in_ember(path):
    torch_mod = importlib.import_module(f"torch.{path}")
    ember_mod = importlib.import_module(f"ember.{path}")
    problems = {}
    for name in _public_names(torch_mod):
        label = f"{path}.{name}"
        obj = getattr(torch_mod, name)
        if label in _ALLOWED or inspect.ismodule(obj):
            continue
        ember_obj = getattr(ember_mod, name, None)
        if ember_obj is None:
            problems[label] = ["missing"]
        elif inspect.isclass(obj):
            problems.update(_class_problems(label, obj, ember_obj))
        elif inspect.isfunction(obj):
            target = obj
            if path == "functional" and name in _DISPATCHED:
                target = getattr(torch_mod, _DISPATCHED[name])
            first = next(iter(_signature(target).parameters), None)
            found = _compare(target, ember_obj, bound_self=first == "self")
            if found:
                problems[label] = found
    assert not problems, problems


def test_tensor_methods_defined_in_python_bind_in_ember():
    """The methods torch/_tensor.py defines (backward, register_hook, stft, split, unique,
    norm, lu, unflatten, ...)."""
    in_python = {name for name, fn, _ in _public_methods(torch.Tensor)
                 if fn.__module__ == "torch._tensor"}
    assert {"backward", "register_hook", "stft", "istft", "split", "unique", "norm", "lu",
            "unflatten"} <= in_python
    assert not _class_problems("Tensor", torch.Tensor, ember.Tensor, only=in_python)


@pytest.mark.parametrize("cls", ["Module", "Parameter"])
def test_module_and_parameter_methods_bind_in_ember(cls):
    assert not _class_problems(cls, getattr(torch.nn, cls), getattr(ember.nn, cls))


def test_torch_level_python_functions_bind_in_ember():
    """The functions of torch's namespace written in Python (torch.functional's einsum,
    meshgrid, split, ..., torch.random's, torch.serialization's, sym_* helpers)."""
    problems = {}
    for name in dir(torch):
        fn = getattr(torch, name)
        if name.startswith("_") or not inspect.isfunction(fn) or not _is_torch_api(fn) \
                or fn.__module__.startswith("torch._") or f"torch.{name}" in _ALLOWED:
            continue
        target = getattr(torch.functional, _DISPATCHED[name]) if name in _DISPATCHED else fn
        first = next(iter(_signature(target).parameters), None)
        found = _compare(target, getattr(ember, name, None), bound_self=first == "self")
        if found:
            problems[name] = found
    assert not problems, problems


# ----- dir() lists what resolves ------------------------------------------------------------

_DIR_CHECK = """
import importlib, json, pkgutil, sys
import torch, ember

def missing(ember_mod, torch_mod):
    listed = set(dir(ember_mod))        # before anything lazy resolves
    return [n for n in dir(torch_mod) if not n.startswith("_") and n not in listed
            and hasattr(ember_mod, n)]

problems = {}
def check(name, ember_mod):
    try:
        torch_mod = importlib.import_module("torch" + name[len("ember"):])
    except Exception:
        return
    found = missing(ember_mod, torch_mod)
    if found:
        problems[name] = found

# first the modules ``import ember`` makes reachable, as a fresh process sees them
fresh = [("ember", ember)] + [(f"ember.{n}", getattr(ember, n)) for n in sorted(dir(ember))
                               if not n.startswith("_")
                               and type(getattr(ember, n)) is type(ember)]
for name, module in fresh:
    check(name, module)
# then every public module, imported
for info in pkgutil.walk_packages(ember.__path__, "ember."):
    if any(part.startswith("_") for part in info.name.split(".")[1:]):
        continue
    try:
        module = importlib.import_module(info.name)
    except Exception:
        continue
    check(info.name, module)
print(json.dumps(problems))
"""


def test_dir_lists_every_public_name_that_resolves():
    """For each public module, the names torch's dir() lists that ember's module resolves
    (lazily, through a module ``__getattr__``) are in its dir() too."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-c", _DIR_CHECK], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}


# ----- the behaviour behind the fixed signatures --------------------------------------------

def _both(program):
    """``program(lib)`` for torch and ember (a warning-free comparison of their results)."""
    import warnings
    results = []
    for lib in (torch, ember):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append(program(lib))
    return results


def test_sequential_lr_undoes_nested_schedulers_and_starts_at_its_milestone():
    def program(lib):
        p = lib.nn.Parameter(lib.zeros(1))
        opt = lib.optim.SGD([p], lr=1.0)
        S = lib.optim.lr_scheduler
        first = S.StepLR(opt, 2, 0.5)
        inner = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 2), S.ExponentialLR(opt, 0.9)],
                               [2])
        outer = S.SequentialLR(opt, [first, inner], [0])
        lrs = [opt.param_groups[0]["lr"]]
        for _ in range(6):
            opt.step()
            outer.step()
            lrs.append(round(opt.param_groups[0]["lr"], 6))
        return lrs, first.last_epoch, inner.last_epoch, [s.last_epoch for s in inner._schedulers]
    theirs, ours = _both(program)
    assert ours == theirs
    assert theirs[0][:3] == [0.5, 1.0, 0.9]


def test_sequential_lr_recursive_undo_steps_back_the_leaves():
    def program(lib):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=1.0)
        S = lib.optim.lr_scheduler
        a, b = S.StepLR(opt, 2), S.ExponentialLR(opt, 0.9)
        seq = S.SequentialLR(opt, [a, b], [3])
        before = (a.last_epoch, b.last_epoch, seq.last_epoch)
        seq.recursive_undo(b)
        seq.recursive_undo()
        return before, (a.last_epoch, b.last_epoch, seq.last_epoch)
    theirs, ours = _both(program)
    assert ours == theirs


def test_optimizer_step_hooks_run_own_post_hooks_before_global_ones():
    import importlib

    def program(lib):
        module = importlib.import_module(f"{lib.__name__}.optim.optimizer")
        p = lib.nn.Parameter(lib.ones(1))
        opt = lib.optim.SGD([p], lr=0.1)
        p.grad = lib.ones(1)
        seen = []
        handles = [module.register_optimizer_step_pre_hook(lambda *a: seen.append("global pre")),
                   module.register_optimizer_step_post_hook(lambda *a: seen.append("global")),
                   opt.register_step_pre_hook(lambda *a: seen.append("own pre")),
                   opt.register_step_post_hook(lambda *a: seen.append("own"))]

        def custom_step(self, scale):
            seen.append(f"step {scale}")
            return scale * 2
        out = lib.optim.Optimizer.profile_hook_step(custom_step)(opt, 3)
        opt.step()
        for handle in handles:
            handle.remove()
        return out, seen, p.tolist()
    theirs, ours = _both(program)
    assert ours == theirs
    assert theirs[1][:4] == ["global pre", "own pre", "step 3", "own"]


def test_fork_rng_defaults_and_meta():
    def program(lib):
        lib.manual_seed(0)
        with lib.random.fork_rng():
            lib.rand(3)
        restored = lib.rand(2).tolist()
        lib.manual_seed(0)
        with lib.random.fork_rng(device_type="meta"):      # forks nothing
            lib.rand(3)
        after_meta = lib.rand(2).tolist()
        lib.manual_seed(0)
        with lib.random.fork_rng(enabled=False, _caller="f", _devices_kw="d"):
            lib.rand(3)
        unforked = lib.rand(2).tolist()
        lib.manual_seed(0)
        fresh = lib.rand(2).tolist()
        return restored == fresh, after_meta == fresh, unforked == fresh
    theirs, ours = _both(program)
    assert ours == theirs == (True, False, False)


def test_sym_sum_takes_a_sequence_or_numbers_and_sym_fresh_size():
    def program(lib):
        return (lib.sym_sum([1, 2, 3]), lib.sym_sum((1.5, 2)), lib.sym_sum(1, 2, 3),
                lib.sym_sum(4), lib.sym_sum(), lib.sym_fresh_size(7),
                type(lib.sym_fresh_size(7)).__name__, lib.compiled_with_cxx11_abi())
    theirs, ours = _both(program)
    assert ours == theirs


def test_lu_takes_out_positionally_and_tensor_split_its_split_size():
    def program(lib):
        a = lib.tensor([[4., 3.], [8., 3.]])    # (multiplier 1/2: U exact on every CPU)
        out = (lib.empty(2, 2), lib.empty(2, dtype=lib.int32))
        result = lib.lu(a, True, False, out)
        x = lib.arange(5)
        return (result[0] is out[0], out[0].tolist(), out[1].tolist(),
                [t.tolist() for t in x.split(split_size=2)],
                [t.tolist() for t in lib.split(x, split_size_or_sections=[1, 4])])
    theirs, ours = _both(program)
    assert ours == theirs


@pytest.mark.parametrize("method", ["xpu", "ipu", "mtia"])
def test_module_moves_to_devices_ember_lacks_raise_torch_errors(method):
    from tests.parity._compare import assert_same_error, error
    assert_same_error(lambda lib, m: getattr(m, method)(), lambda lib: lib.nn.Linear(2, 2))
    for lib in (torch, ember):      # a module without tensors moves nowhere: no error
        module = lib.nn.ReLU()
        assert error(lambda m: getattr(m, method)(), module) is None


def test_enforce_grad_layout_policy_lets_backward_keep_a_gradient_as_laid_out():
    def program(lib):
        strides = []
        for enable in (True, False):
            with lib.autograd.enforce_grad_layout_policy(enable):
                p = lib.zeros(2, 3, 4).permute(2, 0, 1).requires_grad_()
                (p * 2).sum().backward()
                q = lib.zeros(3, 4).t().requires_grad_()
                q.exp().sum().backward()
                strides += [p.grad.stride(), q.grad.stride()]
        policy = lib.autograd.enforce_grad_layout_policy(False)    # a call sets it at once
        p = lib.zeros(2, 3, 4).permute(2, 0, 1).requires_grad_()
        (p * 2).sum().backward()
        policy.__exit__(None, None, None)
        strides.append(p.grad.stride())

        @lib.autograd.enforce_grad_layout_policy(False)             # a decorator too
        def run():
            r = lib.zeros(2, 3, 4).permute(2, 0, 1).requires_grad_()
            (r * 2).sum().backward()
            return r.grad.stride()
        strides.append(run())
        p = lib.zeros(2, 3, 4).permute(2, 0, 1).requires_grad_()
        (p * 2).sum().backward()
        return strides + [p.grad.stride()]
    theirs, ours = _both(program)
    assert ours == theirs
    assert theirs[0] != theirs[2]


def test_legacy_autograd_function_names():
    from tests.parity._compare import assert_same_error, recorded

    assert_same_error(lambda lib, _: lib.autograd.variable(lib.ones(1)), lambda lib: None)

    def program(lib):
        function = __import__(f"{lib.__name__}.autograd.function", fromlist=["x"])

        class Inplace(function.InplaceFunction):
            pass

        class Nested(function.NestedIOFunction):
            def forward_extended(self, x):
                return x

        inplace = Inplace(True)
        nested = Nested()
        t = lib.ones(1)
        nested.save_for_backward(t, [t, (t, None)])
        nested.mark_dirty(t, [t])
        nested.mark_non_differentiable(t)
        return (inplace.inplace, isinstance(lib.autograd.Function, function.FunctionMeta),
                issubclass(lib.autograd.Function, function.FunctionCtx), len(nested.to_save),
                len(nested.dirty_tensors), len(nested.non_differentiable),
                recorded(nested.save_for_backward, t, 1)[0],
                recorded(nested.backward_extended, t)[0][0])
    theirs, ours = _both(program)
    assert ours == theirs
    for lib in (torch, ember):
        ctx = lib.autograd.function.FunctionCtx()
        outcome, warned = recorded(ctx.mark_shared_storage, (1, 2))
        assert [w[0] for w in warned] == ["FutureWarning"]
        assert "mark_shared_storage` is deprecated" in warned[0][1]


def test_removed_linalg_functions_bind_as_torch_declares_them():
    from tests.parity._compare import error

    for call in (lambda lib, a: lib.eig(a, True, e=None), lambda lib, a: a.eig(True),
                 lambda lib, a: lib.symeig(a, True, False), lambda lib, a: a.solve(a),
                 lambda lib, a: lib.matrix_rank(a, None, True),
                 lambda lib, a: lib.eig(a, True, True), lambda lib, a: a.lstsq(a, a)):
        theirs = error(call, torch, torch.eye(2))
        ours = error(call, ember, ember.eye(2))
        assert ours[0] == theirs[0]


def test_storage_type_names_its_dtype_and_thread_safe_generator():
    from tests.parity._compare import error
    for lib in (torch, ember):
        assert str(lib.serialization.StorageType("DoubleStorage").dtype) == \
            f"{lib.__name__}.float64"
        assert error(lib.serialization.StorageType, "UntypedStorage") == \
            ("KeyError", "'pickle storage type \"UntypedStorage\" is not recognized'")
        assert lib.random.thread_safe_generator() is None
        assert lib.thread_safe_generator is lib.random.thread_safe_generator


def test_dual_level_clone_is_a_fresh_level():
    def program(lib):
        fwAD = lib.autograd.forward_ad
        level = fwAD.dual_level()
        copy = level.clone()

        @fwAD.dual_level()
        def tangent_of_square(x):
            y = fwAD.make_dual(x, lib.ones_like(x)) ** 2
            return fwAD.unpack_dual(y).tangent.tolist()
        return type(copy) is fwAD.dual_level, copy is not level, \
            tangent_of_square(lib.tensor([1., 3.]))
    theirs, ours = _both(program)
    assert ours == theirs
