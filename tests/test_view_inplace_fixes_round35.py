"""Views x in-place leftovers of round 34's fuzzer, fixed in round 35 (each checked against
PyTorch 2.13's behaviour): ``set_`` on a tensor with views or a history, gradients of a shape
their node did not record (a shape changed under no_grad), ``copy_`` of a tensor onto itself,
``requires_grad_`` on a stale no_grad view, meta tensors' strides and storage offsets, and
``as_strided_`` at an offset of a tensor's own memory."""

import pytest

import ember


# --- set_ ------------------------------------------------------------------------------------

def test_views_of_a_base_set_elsewhere_keep_their_memory_and_place():
    b = ember.zeros(12)
    v = b[4:]
    b.set_(ember.ones(20)[2:])          # a temporary source: its base goes at once
    assert v.storage_offset() == 4 and v.tolist() == [0.0] * 8
    assert b.storage_offset() == 2 and b.tolist() == [1.0] * 18
    assert v.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()


def test_a_view_set_elsewhere_keeps_its_base():
    b = ember.zeros(3, 4)
    v = b[1:]
    v.set_(ember.arange(100.0, 112.0).reshape(3, 4))
    assert v._base is b and v.storage_offset() == 0 and v.shape == (3, 4)
    v.add_(1)                           # into its new memory only
    assert b.tolist() == [[0.0] * 4] * 3 and v[0, 0].item() == 101.0


def test_set_from_a_source_requiring_grad_gets_a_not_implemented_node():
    a = ember.ones(3, requires_grad=True)
    x = ember.zeros(3)
    x.set_(a * 2)
    assert x.grad_fn.name() == "torch::autograd::NotImplemented"
    assert x.requires_grad and not x.is_leaf
    with pytest.raises(RuntimeError, match="^derivative for set_ is not implemented$"):
        x.sum().backward()
    y = ember.zeros(3)
    with ember.no_grad():
        y.set_(a * 2)
    assert y.grad_fn is None and not y.requires_grad


def test_set_on_a_tensor_with_history_gets_a_not_implemented_node():
    a = ember.ones(3, 4, requires_grad=True)
    c = a * 1.5
    c.set_(ember.zeros(3, 4))
    assert c.grad_fn.name() == "torch::autograd::NotImplemented"
    assert c.grad_fn.next_functions[0][0].name() == "MulBackward0"


# --- gradients of a shape their node did not record ------------------------------------------

def test_a_gradient_of_a_shape_changed_under_no_grad_is_refused_by_its_producer():
    a = ember.ones(2, 3, requires_grad=True)
    c = a * 2
    with ember.no_grad():
        c.t_()
    with pytest.raises(RuntimeError, match=r"^Function SumBackward0 returned an invalid "
                       r"gradient at index 0 - got \[3, 2\] but expected shape compatible "
                       r"with \[2, 3\]$"):
        c.sum().backward()


def test_a_gradient_that_broadcasts_to_the_recorded_shape_is_summed_to_it():
    a = ember.ones(2, 3, requires_grad=True)
    c = a * 2
    with ember.no_grad():
        c.unsqueeze_(0)
    c.sum().backward()
    assert a.grad.tolist() == [[2.0] * 3] * 2


def test_gradients_of_two_shapes_meeting_name_the_later_producer():
    a = ember.ones(2, 3, requires_grad=True)
    c = a * 2
    y = c.exp()                         # recorded before the change: the old shape
    with ember.no_grad():
        c.t_()
    with pytest.raises(RuntimeError, match="^Function SinBackward0 returned an invalid "
                       r"gradient at index 0 - got \[3, 2\]"):
        (y.sum() + c.sin().sum()).backward()


def test_a_leaf_transposed_under_no_grad_refuses_a_gradient_of_its_new_shape():
    a = ember.ones(3, 4, requires_grad=True)
    c = a * 1.5
    with ember.no_grad():
        a.transpose_(0, 1)
    with pytest.raises(RuntimeError, match=r"^Function MulBackward0 returned an invalid "
                       r"gradient at index 0 - got \[4, 3\] but expected shape compatible "
                       r"with \[3, 4\]$"):
        (c.sum() + (a * ember.ones(4, 3)).sum()).backward()


def test_shapes_changed_back_pass():
    a = ember.ones(2, 3, requires_grad=True)
    c = a * 2
    with ember.no_grad():
        c.t_()
        c.t_()
    c.sum().backward()
    assert a.grad.tolist() == [[2.0] * 3] * 2


# --- copy_, requires_grad_, as_strided_, mT ----------------------------------------------------

def test_copy_of_an_expanded_tensor_onto_itself_writes_nothing():
    x = ember.ones(3).expand(2, 3)
    before = x._version
    assert x.copy_(x) is x and x.tolist() == [[1.0] * 3] * 2
    assert x._version == before + 1
    assert x.copy_(x.detach()) is x     # the same elements, laid out alike
    with pytest.raises(RuntimeError, match="more than one element of the written-to"):
        x.copy_(x.clone())


@pytest.mark.parametrize("made", ["no_grad", "inference_mode"])
@pytest.mark.parametrize("flag", [True, False])
def test_requires_grad_on_a_stale_view_made_without_grad_is_allowed(made, flag):
    a = ember.ones(4, 1, requires_grad=True)
    p = a * 1
    with getattr(ember, made)():
        v = p.unflatten(0, (-1, 1))
    p.mul_(2)                           # v is stale now
    assert v.requires_grad_(flag) is v
    assert v.requires_grad              # (through its base, as PyTorch's)
    with pytest.raises(RuntimeError, match="A view was created in"):
        v.grad_fn


def test_as_strided_in_place_at_an_offset_of_its_own_memory():
    b = ember.arange(12.0)
    v = b[2:]
    b.as_strided_((5,), (1,), 7)
    assert b.storage_offset() == 7 and b.tolist() == [7.0, 8.0, 9.0, 10.0, 11.0]
    assert v.storage_offset() == 2
    assert b.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()


def test_mT_of_a_0_dim_tensor_is_itself():
    x = ember.tensor(2.0)
    with pytest.warns(UserWarning, match="Tensor.mT is deprecated on 0-D tensors"):
        assert x.mT is x


# --- meta tensors' layouts -------------------------------------------------------------------

def _m(*shape):
    return ember.empty(*shape, device="meta")


@pytest.mark.parametrize("make,stride,offset,contiguous", [
    (lambda m: m.t(), (1, 4), 0, False),
    (lambda m: m.transpose(0, 1), (1, 4), 0, False),
    (lambda m: m[:, ::2], (4, 2), 0, False),
    (lambda m: m[1:], (4, 1), 4, True),
    (lambda m: m[:, 1:2], (4, 1), 1, False),
    (lambda m: m[None, :, 0], (12, 4), 0, False),
    (lambda m: m.expand(2, 3, 4), (0, 4, 1), 0, False),
    (lambda m: m.as_strided((2, 2), (1, 3), 1), (1, 3), 1, False),
    (lambda m: m[1:].as_strided((2,), (1,), 0), (1,), 0, True),
    (lambda m: m.t().unsqueeze(0), (4, 1, 4), 0, False),
    (lambda m: m.t().reshape(12), (1,), 0, True),           # a copy
    (lambda m: m[:, ::2].reshape(6), (2,), 0, False),        # a view
    (lambda m: m.t().contiguous(), (3, 1), 0, True),
    (lambda m: m.t().clone(), (1, 4), 0, False),             # preserve_format
    (lambda m: m.t() + 1, (1, 4), 0, False),                 # as TensorIterator lays it
    (lambda m: m.diagonal(), (5,), 0, False),
])
def test_meta_views_and_results_have_pytorchs_layout(make, stride, offset, contiguous):
    t = make(_m(3, 4))
    assert t.is_meta
    assert (t.stride(), t.storage_offset(), t.is_contiguous()) == (stride, offset, contiguous)


def test_meta_layouts_in_memory_formats_and_in_place_view_ops():
    m = _m(1, 3, 4, 4).to(memory_format=ember.channels_last)
    assert m.stride() == (48, 1, 12, 3) and m.is_contiguous(memory_format=ember.channels_last)
    assert (m + 1).stride() == (48, 1, 12, 3)
    assert m.permute(0, 2, 3, 1).stride() == (48, 12, 3, 1)
    x = _m(3, 4)
    x.t_()
    assert x.stride() == (1, 4) and not x.is_contiguous()
    y = _m(12)
    y.as_strided_((5,), (1,), 7)
    assert y.storage_offset() == 7 and y.data_ptr() == 28


def test_meta_view_refuses_what_strides_do_not_allow_and_reshape_views_are_views():
    m = _m(3, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        m.t().view(12)
    assert m.reshape(12)._base is m and m.flatten()._base is m
    assert m.unflatten(0, (-1, 1))._base is m
    assert m.t().reshape(12)._base is None          # a copy


# --- review (RC3): meta factories and results, set_ onto its own memory, reshaped hooks --------

def test_meta_like_factories_and_memory_formats_lay_out_without_memory():
    m = _m(3, 4)
    c = _m(2, 3, 4, 5).to(memory_format=ember.channels_last)
    for make in (ember.empty_like, ember.zeros_like, ember.ones_like, ember.rand_like,
                 ember.randn_like, lambda x: ember.full_like(x, 2.0)):
        assert make(m.t()).stride() == (1, 4) and make(m.t()).is_meta
        assert make(c).stride() == (60, 1, 15, 3)
    assert ember.full_like(m[:, ::2], 1.0, dtype=ember.float16).stride() == (2, 1)
    assert ember.empty_like(m.t(), device="cpu").stride() == (1, 4)
    made = ember.empty(2, 3, 4, 5, device="meta", memory_format=ember.channels_last)
    assert made.is_meta and made.stride() == (60, 1, 15, 3)
    assert ember.empty_like(_m(2, 3, 4, 5), memory_format=ember.channels_last).stride() \
        == (60, 1, 15, 3)
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last"):
        ember.empty_like(m, memory_format=ember.channels_last)


@pytest.mark.parametrize("make,stride", [
    (lambda m, c: m.t()[:, :1].neg(), (1, 1)),             # size-1 dims' strides tell nothing
    (lambda m, c: m.t()[:, :1] * m.t()[:, :1], (1, 1)),
    (lambda m, c: _m(4, 1) + m.t(), (1, 4)),                 # TensorIterator's operand order
    (lambda m, c: m.t().contiguous() + m.t(), (3, 1)),
    (lambda m, c: m.t() * m.t()[:, :1], (1, 4)),
    (lambda m, c: c + _m(2, 3, 4, 5), (60, 1, 15, 3)),
    (lambda m, c: _m(2, 3, 4, 5) + c, (60, 20, 5, 1)),
    (lambda m, c: _m(5) + c, (60, 1, 15, 3)),
    (lambda m, c: m[:0].t().clone(), (1, 4)),                # empty: strides kept
    (lambda m, c: m[:0].t().to(ember.float16), (1, 4)),
])
def test_meta_pointwise_results_are_laid_out_as_on_the_cpu(make, stride):
    m, c = _m(3, 4), _m(2, 3, 4, 5).to(memory_format=ember.channels_last)
    assert make(m, c).stride() == stride
    assert m.t()[:, :1].is_contiguous()


def test_set_onto_a_part_of_its_own_memory_keeps_that_memory_its_storage():
    b = ember.arange(6.0)
    v = b[1:]
    b.set_(b[2:])
    v.fill_(9)
    assert b.tolist() == [9.0] * 4 and (v.storage_offset(), b.storage_offset()) == (1, 2)
    assert v.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def test_a_detached_tensor_keeps_its_memory_when_its_root_is_set_elsewhere():
    b = ember.zeros(4)
    d = b.detach()
    b.set_(ember.ones(4))
    d.fill_(7)
    assert b.tolist() == [1.0] * 4 and d.tolist() == [7.0] * 4
    assert d.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()


def test_a_view_set_elsewhere_is_still_a_view():
    b = ember.zeros(3, 4)
    v = b[1:]
    v.set_(ember.ones(2, 4))
    assert v._is_view() and v._base is b
    assert not b._is_view()


def test_hooks_of_a_reshaped_output_see_gradients_of_its_recorded_shape():
    a = ember.ones(2, 3, requires_grad=True)
    c = a * 2
    c.retain_grad()
    seen = []
    c.register_hook(lambda g: seen.append(tuple(g.shape)))
    c.grad_fn.register_prehook(lambda go: seen.append(tuple(go[0].shape)))
    with ember.no_grad():
        c.unsqueeze_(0)
    (c * ember.ones(4, 2, 3)).sum().backward()
    assert seen == [(2, 3), (2, 3)]
    assert c.grad.shape == (2, 3) and c.grad.sum().item() == 24.0
    assert a.grad.sum().item() == 48.0
