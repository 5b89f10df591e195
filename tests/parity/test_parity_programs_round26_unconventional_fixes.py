"""What the unconventional-network programs of round 26 (test_parity_programs_round26_unconventional
*.py) found, each pinned against PyTorch: a class deriving from ``torch.jit.ScriptModule`` with
``@torch.jit.script_method`` methods (RWKV-4's model.py with RWKV_JIT_ON, older TorchScript code)
is an ordinary module whose methods run, and ``script_method`` warns of its deprecation; the
other TorchScript module types exist for isinstance checks, and strict_fusion warns outside
script mode. A deprecated ``register_backward_hook`` hook (guided backpropagation, older
monitoring code) is a hook on the Node that made the module's output, seeing that Node's
gradients, with PyTorch's FutureWarnings where that misses some of the module's (ember gave it
the full hook's arguments); so is a global ``register_module_backward_hook`` hook, and the
global kind, once set, refuses the other."""

import copy
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _script_module_class(lib):
    class TokenShift(lib.jit.ScriptModule):
        def __init__(self, n):
            super().__init__()
            self.time_shift = lib.nn.ZeroPad2d((0, 0, 1, -1))
            self.mix = lib.nn.Parameter(lib.linspace(0.0, 1.0, n))
            self.key = lib.nn.Linear(n, n, bias=False)
            self.scale = 2

        @lib.jit.script_method
        def jit_func(self, x):
            xx = self.time_shift(x)
            return self.key(x * self.mix + xx * (1 - self.mix))

        def forward(self, x):
            return self.jit_func(x) * self.scale

    return TokenShift


def _use(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cls = _script_module_class(lib)
    m = cls(3)
    with lib.no_grad():
        m.key.weight.copy_(lib.from_numpy(np.arange(9.0, dtype=np.float32).reshape(3, 3) / 9))
    x = lib.from_numpy(np.arange(12.0, dtype=np.float32).reshape(2, 2, 3) / 7)
    y = m(x)
    y.sum().backward()
    clone = copy.deepcopy(m)
    m.eval()
    return {"y": y.detach().numpy().tolist(), "grad": m.mix.grad.numpy().tolist(),
            "keys": sorted(m.state_dict()), "names": [n for n, _ in m.named_modules()],
            "flags": [isinstance(m, lib.nn.Module), isinstance(m, lib.jit.ScriptModule),
                      m.training, m.key.training, isinstance(clone, lib.nn.Module),
                      len(list(clone.parameters())), m.scale]}


def test_script_module_subclass_runs_as_a_module():
    ours, theirs = _use(ember), _use(torch)
    for key in ("y", "grad"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-6, atol=1e-7)
    for key in ("keys", "names", "flags"):
        assert ours[key] == theirs[key], key


def _definition_warnings(lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _script_module_class(lib)
    return [(w.category, str(w.message)) for w in caught]


def test_script_method_warns_its_deprecation_once_per_method():
    ours = _definition_warnings(ember)
    assert ours == [(DeprecationWarning, "`torch.jit.script_method` is deprecated. Please "
                                         "switch to `torch.compile` or `torch.export`.")]
    assert ours == _definition_warnings(torch)


def test_bare_script_module():
    for lib in (ember, torch):
        m = lib.jit.ScriptModule()
        assert repr(m) == "ScriptModule()" and list(m.parameters()) == []


def _jit_names(lib):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lib.jit.strict_fusion():
            pass
    return {"warned": [(w.category.__name__, str(w.message), w.filename) for w in caught],
            "mro": [c.__name__ for c in lib.jit.TopLevelTracedModule.__mro__][:4],
            "flags": [isinstance(lib.nn.Linear(1, 1), lib.jit.RecursiveScriptModule),
                      issubclass(lib.jit.RecursiveScriptModule, lib.jit.ScriptModule),
                      issubclass(lib.jit.ScriptWarning, Warning)]}


def test_jit_module_types_and_strict_fusion():
    assert _jit_names(ember) == _jit_names(torch)


class _Wrap:
    """A module class whose forward is a given function (built per library)."""

    @staticmethod
    def make(lib, f):
        class M(lib.nn.Module):
            def forward(self, *args):
                return f(*args)
        return M()


_REGULAR_HOOK_CASES = {
    "single_node": (lambda lib: lambda a, b: a * b, lambda a, b: (a * 1, b * 1)),
    "swapped_inputs": (lambda lib: lambda a, b: b * a, lambda a, b: (a * 1, b * 1)),
    "leaf_inputs": (lambda lib: lambda a, b: a * b, lambda a, b: (a, b)),
    "scalar_operand": (lambda lib: lambda a: a * 2, lambda a, b: (a * 1,)),
    "multi_node": (lambda lib: lambda a, b: (a * b).exp(), lambda a, b: (a * 1, b * 1)),
    "dict_output": (lambda lib: lambda a, b: {"y": a * b}, lambda a, b: (a, b)),
    "nested_output": (lambda lib: lambda a, b: (a * b, (a * b,)), lambda a, b: (a * 1, b * 1)),
    "outputs_of_two_nodes": (lambda lib: lambda a, b: (a * 2, b * 3), lambda a, b: (a * 1, b)),
    "outputs_of_one_node": (lambda lib: lambda a, b: (a * b).unbind(0),
                            lambda a, b: (a * 1, b * 1)),
    "non_tensor_input": (lambda lib: lambda a, s: a * s, lambda a, b: (a * 1, 2.0)),
    "guided_relu": (lambda lib: lambda a: lib.relu(a), lambda a, b: (a * 1 - 1.5,)),
    "sequential": (lambda lib: lib.nn.Sequential(lib.nn.Tanh(), lib.nn.Sigmoid()),
                   lambda a, b: (a * 1,)),
    "no_graph": (lambda lib: lambda a, b: (a * b).detach(), lambda a, b: (a * 1, b * 1)),
}


def _regular_hook(lib, kind):
    """What a deprecated register_backward_hook sees, returns and warns for one module."""
    make, inputs = _REGULAR_HOOK_CASES[kind]
    f = make(lib)
    m = f if isinstance(f, lib.nn.Module) else _Wrap.make(lib, f)
    seen = []

    def hook(module, grad_input, grad_output):
        seen.append([[None if g is None else g.tolist() for g in grads]
                     for grads in (grad_input, grad_output)])
        if kind == "guided_relu":                   # guided backpropagation
            return (lib.clamp(grad_input[0], min=0.0) * 10,)
        return None

    m.register_backward_hook(hook)
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = lib.tensor([3.0, 4.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = m(*inputs(a, b))
    first = out
    while not isinstance(first, lib.Tensor):
        first = next(iter(first.values())) if isinstance(first, dict) else first[0]
    if first.requires_grad:
        (first * lib.tensor([1.0, -1.0])).sum().backward()
    return ([(w.category.__name__, str(w.message)) for w in caught], seen,
            None if a.grad is None else a.grad.tolist())


@pytest.mark.parametrize("kind", _REGULAR_HOOK_CASES)
def test_regular_backward_hook_sees_the_output_node(kind):
    assert _regular_hook(ember, kind) == _regular_hook(torch, kind)


def _global_regular_hook(lib):
    mm = lib.nn.modules.module
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        handle = mm.register_module_backward_hook(
            lambda m, gi, go: seen.append((type(m).__name__, [g.tolist() for g in gi])))
        try:
            m = lib.nn.Sequential(lib.nn.Tanh(), lib.nn.Sigmoid())
            m(lib.tensor([0.5, -1.0], requires_grad=True) * 1).sum().backward()
            try:
                mm.register_module_full_backward_hook(lambda *a: None)
            except RuntimeError as e:
                seen.append(str(e))
        finally:
            handle.remove()
    return seen, [str(w.message) for w in caught]


def test_global_regular_backward_hook_sees_each_modules_output_node():
    from ember.nn.modules import _hooks
    # (another test in this worker may have fixed the kind as full: start free, as alone)
    _hooks.GLOBAL_FULL[0] = None
    torch.nn.modules.module._global_is_full_backward_hook = None
    try:
        ours, theirs = _global_regular_hook(ember), _global_regular_hook(torch)
    finally:        # the kind sticks once set, in both libraries: free it for other tests
        _hooks.GLOBAL_FULL[0] = None
        torch.nn.modules.module._global_is_full_backward_hook = None
    assert ours[1] == theirs[1] and ours[0][-1] == theirs[0][-1]
    assert [name for name, _ in ours[0][:-1]] == [name for name, _ in theirs[0][:-1]]
    for (_, got), (_, expected) in zip(ours[0][:-1], theirs[0][:-1]):
        np.testing.assert_allclose(got, expected, rtol=1e-6)
