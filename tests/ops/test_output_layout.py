"""Ops that PyTorch computes on a contiguous copy return row-major results for transposed or
permuted inputs (so ``.view()`` on them works), unlike the elementwise ops, which keep the
input's layout (found by the round-7 audit of non-contiguous inputs)."""

import pytest

import ember

F = ember.nn.functional

ROW_MAJOR = {
    "masked_fill": lambda t: t.masked_fill(t > 1, 0.0),
    "cumsum": lambda t: t.cumsum(0),
    "cumprod": lambda t: t.cumprod(-1),
    "softmax": lambda t: t.softmax(-1),
    "log_softmax": lambda t: t.log_softmax(0),
    "gather": lambda t: t.gather(0, ember.zeros_like(t, dtype=ember.long)),
    "repeat": lambda t: t.repeat((1,) * t.ndim),
    "cat": lambda t: ember.cat([t, t]),
    "stack": lambda t: ember.stack([t, t]),
    "layer_norm": lambda t: F.layer_norm(t, t.shape[-1:]),
}


@pytest.mark.parametrize("name", sorted(ROW_MAJOR))
def test_ops_return_row_major_for_transposed_and_permuted_inputs(name):
    for x in (ember.arange(24.).reshape(4, 6).t() / 10,
              ember.arange(24.).reshape(2, 3, 4).permute(2, 0, 1) / 10):
        expected = ROW_MAJOR[name](x.contiguous())
        got = ROW_MAJOR[name](x)
        assert got.is_contiguous()
        assert got.view(-1).tolist() == pytest.approx(expected.view(-1).tolist())


def test_elementwise_ops_keep_the_input_layout():
    x = ember.arange(24.).reshape(2, 3, 4).transpose(0, 2)
    assert (-x).stride() == (1, 4, 12)
    assert ember.exp(x).stride() == (1, 4, 12)


def test_cat_and_stack_keep_channels_last_only_when_every_input_has_it():
    cl = ember.arange(120.).reshape(2, 3, 4, 5).contiguous(memory_format=ember.channels_last)
    assert ember.cat([cl, cl]).stride() == (60, 1, 15, 3)
    assert ember.stack([cl, cl]).stride() == (120, 60, 1, 15, 3)
    assert ember.cat([cl, cl.contiguous()]).stride() == (60, 20, 5, 1)
    assert ember.cat([cl.contiguous(), cl]).stride() == (60, 20, 5, 1)
    assert ember.cat([cl, cl.contiguous()]).sum().item() == 2 * 7140.0
