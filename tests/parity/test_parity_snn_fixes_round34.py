"""A compiled module's attribute traffic as PyTorch's OptimizedModule (without running it, so
that no compilation happens): writes, deletes and ``training`` reach the wrapped module, and
len/dir/copies follow it."""

import copy

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _attribute_traffic(lib):
    nn = lib.nn
    m = nn.Linear(2, 2)
    cm = lib.compile(m)
    out = []
    cm.mem = lib.ones(2)                  # state reset on the compiled net
    out.append(hasattr(m, "mem"))
    cm.mem = None
    out.append(m.mem is None)
    del cm.mem
    out.append(hasattr(m, "mem") or hasattr(cm, "mem"))
    cm.weight = nn.Parameter(lib.zeros(2, 2))
    out.append(m.weight.tolist())
    cm.sub = nn.Linear(1, 1)
    out.append(list(cm.state_dict()))
    out.append([n for n, _ in cm.named_modules()])
    m.eval()
    out.append(cm.training)
    cm.training = True
    out.append(m.training)
    cm.eval()
    out.append([m.training, m.sub.training])
    try:
        len(cm)
    except TypeError as e:
        out.append(str(e))
    out.append(len(lib.compile(nn.Sequential(nn.ReLU(), nn.Tanh()))))
    out.append(["weight" in dir(cm), "sub" in dir(cm), "forward" in dir(cm)])
    clone = copy.deepcopy(cm)
    out.append([type(clone).__name__, clone._orig_mod is m, clone.weight.tolist()])
    return out


def test_compiled_module_attributes_as_torch():
    assert _attribute_traffic(ember) == _attribute_traffic(torch)
