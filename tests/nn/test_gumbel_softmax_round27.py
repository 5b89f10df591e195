"""F.gumbel_softmax draws its noise as ``-log(empty_like(logits).exponential_())`` (PyTorch's
definition): its dtype check, 0-dim logits, and the generator stream; and
``legacy_contiguous_format``, the alias its reference code uses."""

import numpy as np
import pytest

import ember
import ember.nn.functional as F


def test_values_from_the_exponential_stream():
    logits = ember.from_numpy(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    ember.manual_seed(5)
    y = F.gumbel_softmax(logits, tau=0.5, hard=True)
    ember.manual_seed(5)
    g = -np.log(ember.empty(3, 4).exponential_().numpy())
    z = (logits.numpy() + g) / 0.5
    expected = np.eye(4, dtype=np.float32)[z.argmax(-1)]
    np.testing.assert_array_equal(y.numpy(), expected)


@pytest.mark.parametrize("dtype,name", [(ember.long, "Long"), (ember.complex64, "ComplexFloat")])
def test_non_floating_logits_raise(dtype, name):
    with pytest.raises(RuntimeError, match=f"dtype must be a floating point but you specified "
                                           f"{name}"):
        F.gumbel_softmax(ember.zeros(2, 3, dtype=dtype))


def test_zero_dim_logits():
    x = ember.tensor(0.5, requires_grad=True)
    y = F.gumbel_softmax(x, hard=True)
    assert y.shape == () and y.item() == 1.0
    y.backward()
    assert x.grad.item() == 0.0


def test_legacy_contiguous_format():
    assert ember.legacy_contiguous_format is ember.contiguous_format
    x = ember.zeros(2, 3).t()
    assert ember.empty_like(x, memory_format=ember.legacy_contiguous_format).stride() == (2, 1)
