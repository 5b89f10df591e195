"""Per-tensor saved hooks (``grad_fn._raw_saved_<name>.register_hooks``), named saved outputs
and ``.data``'s version counter against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _raw_hooks_run(lib):
    log = []

    def hooks(tag):
        def pack(t):
            log.append(("pack", tag, t.requires_grad, t.grad_fn is None))
            return t.clone()

        def unpack(t):
            log.append(("unpack", tag))
            return t
        return pack, unpack
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = lib.tensor([4.0, 5.0, 6.0], requires_grad=True)
    z = x * y
    z.grad_fn._raw_saved_self.register_hooks(*hooks("self"))
    e = z.exp()
    e.grad_fn._raw_saved_result.register_hooks(*hooks("result"))
    packed = list(log)
    e.sum().backward()
    errors = []
    for attempt in (lambda: z.grad_fn._raw_saved_other.register_hooks(lambda t: t,
                                                                      lambda t: t),
                    lambda: (x * 2).grad_fn._raw_saved_self.register_hooks(lambda t: t,
                                                                           lambda t: t)):
        try:
            attempt()
        except RuntimeError as exc:
            errors.append(str(exc))
    return packed, sorted(log[len(packed):]), x.grad.tolist(), y.grad.tolist(), errors


def test_raw_saved_hooks():
    ours, theirs = _raw_hooks_run(ember), _raw_hooks_run(torch)
    assert ours[:2] == theirs[:2] and ours[4] == theirs[4]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-5)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5)


def _named_and_data(lib):
    w = lib.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 0.5]], requires_grad=True)
    node = w.max(1).values.grad_fn
    indices = node._saved_indices
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    e = x.exp()
    e.data.mul_(0)
    e.sum().backward()
    return (indices.tolist(), indices.grad_fn is None, type(node._raw_saved_indices).__name__,
            e._version, x.grad.tolist())


def test_named_saved_outputs_and_data_versions():
    assert _named_and_data(ember) == _named_and_data(torch)
