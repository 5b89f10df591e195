"""Tensor.set_ and is_set_to against PyTorch: sharing another tensor's memory, a storage's
with offset, size and stride, becoming empty, dtype and autograd refusals, no_grad use on
parameters, and is_set_to's answers."""

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _program(lib):
    out = []
    warnings.simplefilter("ignore")
    a, b = lib.ones(2), lib.arange(6.).view(2, 3)
    out.append((a.set_(b) is a, a.tolist(), a.data_ptr() == b.data_ptr(), a._version,
                a.is_set_to(b), b.is_set_to(a)))
    a.add_(1)
    out.append(b.tolist())
    c = lib.ones(2).set_(b.untyped_storage(), 1, (2, 2), (1, 2))
    out.append((c.tolist(), c.storage_offset(), c.stride()))
    d = lib.ones(2).set_()
    out.append((d.tolist(), tuple(d.shape)))
    out.append(lib.ones(2).set_(b.storage(), 2, (2,)).tolist())
    out.append(lib.ones(2).set_(b.storage()).tolist())
    for make in (lambda: lib.ones(2, requires_grad=True).set_(b),
                 lambda: lib.ones(2, dtype=lib.int64).set_(b),
                 lambda: lib.ones(2, dtype=lib.float16).set_(b),
                 lambda: lib.ones(2, dtype=lib.complex64).set_(b)):
        with pytest.raises(RuntimeError) as info:
            make()
        out.append(str(info.value))
    with lib.no_grad():
        p = lib.ones(2, requires_grad=True)
        p.set_(b)
    out.append((p.tolist(), p.requires_grad))
    f = lib.ones(3)
    out.append((f.is_set_to(f), f.is_set_to(f.view(3)), f.is_set_to(f[:]),
                f.is_set_to(f[1:]), f.is_set_to(f.clone())))
    g, h = lib.zeros(4), lib.ones(1)
    h.set_(g[1:]).fill_(5)
    out.append((g.tolist(), h.storage_offset()))
    return out


def test_set_matches():
    assert _program(ember) == _program(torch)
