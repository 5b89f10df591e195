"""Tensor attributes and Python protocols: metadata, conversions, memory sharing, pickling."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import ember


def test_metadata():
    t = ember.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and isinstance(t.shape, ember.Size)
    assert t.size() == ember.Size([2, 3, 4]) and t.size(1) == 3 and t.size(-1) == 4
    assert t.dim() == t.ndim == 3 and t.numel() == 24 and t.nelement() == 24
    assert t.dtype is ember.float32 and t.device == ember.device("cpu")
    assert t.element_size() == 4 and t.itemsize == 4 and t.nbytes == 96
    assert t.stride() == (12, 4, 1) and t.stride(0) == 12
    assert repr(t.shape) == "ember.Size([2, 3, 4])"
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of "
                                         r"\[-3, 2\], but got 3\)"):
        t.size(3)


def test_size_behaves_like_a_tuple():
    s = ember.Size([2, 3])
    assert s == (2, 3) and s.numel() == 6 and isinstance(s[0:1], ember.Size)
    assert isinstance(s + (4,), ember.Size)


def test_strides_and_contiguity_of_views():
    t = ember.zeros(3, 4)
    tt = t.t()
    assert tt.stride() == (1, 4) and not tt.is_contiguous()
    assert t.unsqueeze(1).is_contiguous()
    assert ember.zeros(1, 5).t().is_contiguous()      # size-1 dims do not count
    c = tt.contiguous()
    assert c.is_contiguous() and c.stride() == (3, 1)
    assert t.contiguous() is t


def test_storage_offset_and_data_ptr():
    t = ember.arange(12).reshape(3, 4)
    row = t.view(12)
    assert row.storage_offset() == 0 and row.data_ptr() == t.data_ptr()
    assert t.t().data_ptr() == t.data_ptr()


def test_item_tolist_and_python_numbers():
    assert ember.tensor(2.5).item() == 2.5 and isinstance(ember.tensor(2).item(), int)
    assert ember.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert ember.tensor([True]).item() is True
    assert ember.tensor([1.5], dtype=ember.bfloat16).item() == 1.5
    assert float(ember.tensor(2)) == 2.0 and int(ember.tensor(3.7)) == 3
    assert complex(ember.tensor(1 + 2j)) == 1 + 2j
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to "
                                           "Scalar"):
        ember.tensor([1, 2]).item()


def test_bool_len_index():
    assert bool(ember.tensor([1])) and not bool(ember.tensor(0.0))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(ember.tensor([1, 2]))
    assert len(ember.zeros(4, 2)) == 4
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(ember.tensor(1))
    assert [10, 20, 30][ember.tensor(1)] == 20
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [1, 2][ember.tensor(1.0)]


def test_numpy_shares_memory_both_ways():
    a = np.arange(6, dtype=np.float32)
    t = ember.from_numpy(a)
    a[0] = 100
    assert t.tolist()[0] == 100
    t.add_(1)
    assert a[0] == 101
    assert t.numpy() is a or np.shares_memory(t.numpy(), a)
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        ember.ones(1, requires_grad=True).numpy()


def test_from_numpy_rejects_negative_strides_and_unsupported_dtypes():
    with pytest.raises(ValueError, match="negative"):
        ember.from_numpy(np.arange(3)[::-1])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.longdouble"):
        ember.from_numpy(np.zeros(2, dtype=np.longdouble))


def test_array_protocol():
    t = ember.tensor([1.0, 2.0])
    assert np.asarray(t).tolist() == [1.0, 2.0]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_dlpack_round_trip():
    t = ember.arange(4)
    a = np.from_dlpack(t)
    assert a.tolist() == [0, 1, 2, 3] and np.shares_memory(a, t.numpy())


def test_pickle_and_deepcopy():
    t = ember.tensor([1.0, 2.0], requires_grad=True)
    u = pickle.loads(pickle.dumps(t))
    assert u.tolist() == [1.0, 2.0] and u.requires_grad
    d = copy.deepcopy(t)
    assert d.tolist() == [1.0, 2.0] and d.requires_grad and d.data_ptr() != t.data_ptr()
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(t * 2)


def test_to_and_type_conversions():
    t = ember.tensor([1.5, -2.5])
    assert t.to(ember.int32).tolist() == [1, -2] and t.to(ember.int32).dtype is ember.int32
    assert t.to("cpu") is t and t.to(ember.float32) is t
    assert t.to(ember.float32, copy=True) is not t
    assert t.to(ember.zeros(1, dtype=ember.float64)).dtype is ember.float64
    assert t.to(device="cpu", dtype=ember.float16).dtype is ember.float16
    assert t.double().dtype is ember.float64 and t.half().dtype is ember.float16
    assert t.bfloat16().dtype is ember.bfloat16 and t.long().dtype is ember.int64
    assert t.int().dtype is ember.int32 and t.bool().tolist() == [True, True]
    assert t.float() is t and t.cpu() is t
    assert t.type() == "ember.FloatTensor" and t.type(ember.float64).dtype is ember.float64
    assert t.type("torch.DoubleTensor").dtype is ember.float64


def test_to_is_differentiable():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x.double()
    assert y.grad_fn.name() == "ToCopyBackward0"
    (y * y).sum().backward()
    assert x.grad.dtype is ember.float32 and x.grad.tolist() == [2.0, 4.0]


def test_cuda_unavailable_without_cupy():
    if ember.cuda.is_available():
        pytest.skip("a GPU is present")
    assert ember.cuda.device_count() == 0
    with pytest.raises(RuntimeError, match="not compiled with CUDA enabled"):
        ember.zeros(1).cuda()
    with pytest.raises(RuntimeError, match="not compiled with CUDA enabled"):
        ember.zeros(1, device="cuda")


def test_clone_and_copy():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    assert y.grad_fn.name() == "CloneBackward0" and y.data_ptr() != x.data_ptr()
    z = ember.zeros(2, 2)
    z.copy_(ember.tensor([1, 2]))                  # broadcasts and casts
    assert z.tolist() == [[1.0, 2.0], [1.0, 2.0]]
    z.fill_(7)
    assert z.tolist() == [[7.0, 7.0], [7.0, 7.0]] and z._version == 2
    z.zero_()
    assert z.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_version_counter_shared_with_views():
    base = ember.zeros(4)
    v = base.view(2, 2)
    assert base._version == v._version == 0
    v.add_(1)
    assert base._version == v._version == 1 and base.tolist() == [1.0] * 4
    assert v._base is base and v._is_view() and not base._is_view()


def test_attribute_assignment_is_allowed():
    t = ember.zeros(1)
    t.name_for_user = "anything"
    assert t.name_for_user == "anything"


def test_data_attribute():
    x = ember.tensor([1.0], requires_grad=True)
    d = x.data
    assert not d.requires_grad
    d.mul_(3)
    assert x.tolist() == [3.0]
    x.data = ember.tensor([5.0])
    assert x.tolist() == [5.0] and x.requires_grad


def test_legacy_constructor():
    assert ember.Tensor(2, 3).shape == (2, 3) and ember.Tensor(2, 3).dtype is ember.float32
    assert ember.Tensor([1, 2]).dtype is ember.float32
    assert ember.Tensor().shape == (0,)
    alias = ember.Tensor(ember.arange(2))      # any dtype: an alias, as PyTorch's
    assert alias.dtype is ember.int64 and alias._is_view()


def test_new_makes_tensors_like_this_one():
    x = ember.ones(2, dtype=ember.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype is ember.float64
    assert x.new([1, 2]).tolist() == [1.0, 2.0] and x.new([1, 2]).dtype is ember.float64
    assert x.new().shape == (0,) and x.new(ember.Size([3])).shape == (3,)
    same = ember.zeros(2, dtype=ember.float64)
    assert x.new(same)._base is same            # an alias, as PyTorch's
    with pytest.raises(TypeError, match=r"^expected TensorOptions\(dtype=double, device=cpu, "):
        x.new(ember.ones(2))
    made = x.new_empty_strided((2, 3), (3, 1))
    assert made.shape == (2, 3) and made.dtype is ember.float64


def test_python_functions_applied_in_place():
    y = ember.arange(3)
    assert y.apply_(lambda v: v * 1.7) is y
    assert y.tolist() == [0, 1, 3] and y._version == 1          # cast as the dtype casts
    z = ember.arange(3.0)
    z.map2_(ember.ones(3), ember.full((3,), 2.0), lambda a, b, c: a + b * c)
    assert z.tolist() == [2.0, 3.0, 4.0]
    z.map_(ember.ones(1), lambda a, b: a - b)                   # the other is broadcast
    assert z.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match=r"^Can't call apply_\(\) on Variable that requires "
                                           r"grad. Use var.detach\(\).apply_\(\) instead.$"):
        ember.ones(2, requires_grad=True).apply_(abs)


def test_kinds_of_tensor_ember_does_not_have():
    x = ember.ones(2)
    assert not (x.is_sparse or x.is_sparse_csr or x.is_quantized or x.is_meta or x.is_nested
                or x.is_mkldnn or x.is_mps or x.is_xpu)
    assert x.const_data_ptr() == x.data_ptr()


def test_resize_keeps_leading_elements():
    x = ember.arange(6.0)
    view = x.view(2, 3)
    assert x.resize_(2, 2) is x and x.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    x[0, 0] = 9.0                                   # shrinking keeps sharing memory
    assert view[0, 0].item() == 9.0 and view.shape == (2, 3)
    x.resize_(10)
    assert x.shape == (10,) and x[:4].tolist() == [9.0, 1.0, 2.0, 3.0]
    assert ember.ones(3).resize_as_(ember.zeros(2, 2)).shape == (2, 2)
    with pytest.raises(RuntimeError, match="^cannot resize variables that require grad$"):
        ember.ones(2, requires_grad=True).resize_(3)


def test_dim_order_reads_the_strides():
    assert ember.ones(2, 3, 4).dim_order() == (0, 1, 2)
    assert ember.ones(2, 3, 4).permute(2, 0, 1).dim_order() == (1, 2, 0)


def test_dim_order_ambiguity_check():
    assert ember.empty(2, 3, 5, 7).transpose(1, 2).dim_order(ambiguity_check=True) == \
        (0, 2, 1, 3)
    ambiguous = ember.empty(1, 2, 3, 4)                 # the size-1 dim could go anywhere
    assert ambiguous.dim_order() == (0, 1, 2, 3)
    with pytest.raises(RuntimeError, match="does not have unique dim order"):
        ambiguous.dim_order(ambiguity_check=True)
    formats = [ember.contiguous_format, ember.channels_last]
    assert ambiguous.dim_order(ambiguity_check=formats) == (0, 1, 2, 3)
    with pytest.raises(RuntimeError, match="cannot map to exact one"):
        ambiguous.dim_order(ambiguity_check=[ember.channels_last])
    with pytest.raises(RuntimeError):                   # both formats describe (2, 3, 1, 1)
        ember.empty(2, 3, 1, 1).dim_order(ambiguity_check=[ember.contiguous_format])
    with pytest.raises(TypeError, match="must be a bool or a list of memory formats"):
        ambiguous.dim_order(ambiguity_check="ILLEGAL")


def test_a_tuple_plus_a_size_is_a_size():
    assert repr(() + ember.Size([2])) == "ember.Size([2])"
    assert repr((1,) + ember.Size([2])) == "ember.Size([1, 2])"
    assert repr(ember.Size([2]) + (1,)) == "ember.Size([2, 1])"


def test_empty_tensors_are_contiguous():
    assert ember.zeros(0, 3).is_contiguous() and ember.empty(2, 0).is_contiguous()
    assert ember.zeros(3, 4)[:, :0].is_contiguous()


def test_size_takes_ints_only():
    assert ember.Size([True, ember.tensor([2])]) == (1, 2)
    with pytest.raises(TypeError, match=r"takes an iterable of 'int' \(item 1 is 'float'\)"):
        ember.Size([2, 2.5])
    with pytest.raises(TypeError, match=r"\(item 0 is 'Tensor'\)"):
        ember.Size([ember.tensor(2.0)])


def test_detach_keeps_the_storage_it_came_from():
    x = ember.arange(10.0)
    d = x[2:].detach()
    assert d.storage_offset() == 2 and d[3:].storage_offset() == 5
    assert d.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert d.as_strided((2,), (1,), 0).tolist() == [0.0, 1.0]


def test_a_detached_result_does_not_keep_its_graph_alive():
    import gc
    import weakref
    w = ember.randn(3, requires_grad=True)
    loss = (w * 2).sum()
    ref, logged = weakref.ref(loss), loss.detach()
    del loss
    gc.collect()
    assert ref() is None and logged.storage_offset() == 0


def test_empty_tensors_report_row_major_strides():
    assert ember.zeros(0, 3).stride() == (3, 1) and ember.empty(2, 0, 3).stride() == (3, 3, 1)
    assert ember.ones(4, 3).t()[:, 4:].stride() == (1, 3)   # a view keeps its base's
    assert ember.zeros(0).stride() == (1,) and ember.zeros(()).stride() == ()


def test_python_number_conversions_of_several_elements():
    for convert in (float, int):
        with pytest.raises(ValueError, match="^only one element tensors can be converted to "
                                             "Python scalars$"):
            convert(ember.ones(2))
    assert float(ember.tensor([2.5])) == 2.5


def test_detach_and_make_subclass_keep_subclasses():
    class Tagged(ember.Tensor):
        pass
    x = ember.ones(2).as_subclass(Tagged)
    assert type(x.detach()) is Tagged and type(x + 1) is Tagged
    assert type(ember.nn.Parameter(ember.ones(2)).detach()) is ember.Tensor
    made = ember.Tensor._make_subclass(Tagged, ember.ones(2), True)
    assert type(made) is Tagged and made.requires_grad and made.is_leaf


def test_numpy_protocols_keep_tensors_tensors():
    g = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="^Can't call numpy\\(\\) on Tensor that requires "
                                           "grad. Use tensor.detach\\(\\).numpy\\(\\) instead.$"):
        np.asarray(g)
    scaled = np.float64(2.0) * g                     # NumPy scalars defer to Tensor
    assert type(scaled) is ember.Tensor and scaled.requires_grad and scaled.tolist() == [2.0] * 3
    assert type(np.int64(3) - g.detach()) is ember.Tensor
    total = ember.ones(2) + np.array([1.0, 2.0])     # an array operand becomes a tensor
    assert type(total) is ember.Tensor and total.dtype is ember.float64
    assert total.tolist() == [2.0, 3.0]
    assert (ember.tensor([1, 2]) == np.array([1, 3])).tolist() == [True, False]
    t = ember.zeros(2)
    t += np.ones(2)
    assert t.tolist() == [1.0, 1.0]
    e = np.exp(ember.zeros(2))                       # ufuncs wrap their result
    assert type(e) is ember.Tensor and e.tolist() == [1.0, 1.0]
    assert np.greater(ember.tensor([1.0, -1.0]), 0).dtype is ember.uint8


def test_pickle_and_deepcopy_keep_views_of_one_memory():
    base = ember.arange(12.0).view(4, 3)
    view = base[1:3]
    b2, v2 = pickle.loads(pickle.dumps((base, view)))
    assert v2.storage_offset() == 3 and v2.tolist() == [[3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
    b2[1, 0] = 99.0
    assert v2[0, 0].item() == 99.0
    copies = copy.deepcopy({"a": base, "b": view})
    copies["a"][2, 2] = -7.0
    assert copies["b"][1, 2].item() == -7.0 and base[2, 2].item() == 8.0
    assert copies["b"].storage_offset() == 3
    ex = ember.ones(3, 1).expand(3, 4)
    assert pickle.loads(pickle.dumps(ex)).stride() == (1, 0)
    assert copy.deepcopy(ex).stride() == (1, 0)
    t = base.t()
    assert pickle.loads(pickle.dumps(t)).stride() == (1, 3)
    p = ember.nn.Parameter(ember.arange(4.0))
    d = copy.deepcopy([p, p.detach()[1:]])
    assert type(d[0]) is ember.nn.Parameter and d[1].requires_grad is False
    d[0].data[1] = 50.0
    assert d[1][0].item() == 50.0 and p[1].item() == 1.0


def test_deepcopy_of_a_non_leaf_names_weight_norm():
    y = ember.ones(2, requires_grad=True) * 2
    with pytest.raises(RuntimeError, match=r"support the deepcopy protocol at the moment\.  If "
                                           r"you were attempting to deepcopy a module, this may "
                                           r"be because of a torch.nn.utils.weight_norm usage"):
        copy.deepcopy(y)


def test_assigning_grad_or_data_of_the_wrong_kind():
    w = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^attempting to assign a gradient of size '\[3\]' "
                                           r"to a tensor of size '\[2\]'. Please ensure that "
                                           r"the gradient and the tensor are the same size$"):
        w.grad = ember.ones(3)
    with pytest.raises(RuntimeError, match=r"^attempting to assign a gradient with dtype "
                                           r"'double' to a tensor with grad_dtype 'Float'. "):
        w.grad = ember.ones(3, dtype=ember.float64)     # the dtype is checked first
    with pytest.raises(RuntimeError, match="with dtype 'long int' to a tensor"):
        w.grad = ember.ones(2, dtype=ember.int64)
    with pytest.raises(TypeError, match="^Variable data has to be a tensor, but got list$"):
        w.data = [1, 2]


def test_size_arithmetic_stays_a_size():
    s = ember.Size([2, 3])
    assert type(s * 2) is ember.Size and s * 2 == (2, 3, 2, 3)
    assert type(2 * s) is ember.Size and type(s * 0) is ember.Size
    with pytest.raises(TypeError, match=r"^can only concatenate tuple \(not list\) to "
                                        r"ember.Size$"):
        s + [1]
    with pytest.raises(TypeError, match="^can't multiply sequence by non-int of type "
                                        "'ember.Size'$"):
        s * s


def test_float_of_a_tensor_requiring_grad_warns_once(monkeypatch):
    x = ember.ones(1, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ember.no_grad():
            float(x)                    # no warning without grad mode
        assert x.item() == 1.0          # nor from item()
        assert not caught
        float(x)
        complex(x)                      # once per process, as PyTorch's TORCH_WARN_ONCE
    assert [str(w.message) for w in caught] == [
        "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
        "behavior.\nConsider using tensor.detach() first."]
    assert caught[0].filename == __file__


@pytest.mark.parametrize("value", ["x", 1, None, np.bool_(True), ember.tensor(True)])
def test_requires_grad_takes_only_bools(value):
    t = ember.randn(2)
    with pytest.raises(TypeError, match="^requires_grad_\\(\\): argument 'requires_grad' "
                                        "\\(position 1\\) must be bool, not "):
        t.requires_grad_(value)
    with pytest.raises(RuntimeError, match="^requires_grad must be a bool$"):
        t.requires_grad = value
    with pytest.raises(TypeError, match="argument 'require_grad' \\(position 3\\) must be bool"):
        ember.nn.Parameter(t, requires_grad=value)
    assert t.requires_grad is False
