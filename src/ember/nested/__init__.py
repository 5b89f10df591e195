"""ember.nested: nested tensors, a batch of tensors whose sizes differ along some dims: build
one, pad it to a dense tensor, take its components back. Two layouts: strided (below) and
jagged (``layout=ember.jagged``, one ragged dim; see NOTE [Jagged tensors] in _jagged.py).

An ember NestedTensor holds its components as ember tensors (``as_nested_tensor`` keeps their
autograd history, ``to_padded_tensor`` is ``F.pad`` and ``stack``, so gradients reach them).
It is not an ``ember.Tensor``: ops reach it through ``__torch_function__`` and run on the
components (_strided_ops.py), as PyTorch's strided nested tensors run them."""

import ember
from ember._dtype import WIDE_UNSIGNED as _WIDE_UNSIGNED
from ember._tensor_str import _close
from ember._warn import warn_once
from ember.ops._recording import rename_node
from ember.nested._jagged import JaggedTensor
from ember.nested._versions import share, version

__all__ = ["NestedTensor", "nested_tensor", "as_nested_tensor", "to_padded_tensor", "narrow",
           "nested_tensor_from_jagged", "masked_select"]

_LAYOUTS_ERROR = "ember.nested supports only layout=ember.strided and layout=ember.jagged"
# PyTorch warns (once) each time it makes a strided nested tensor
NESTED_PROTOTYPE = ("The PyTorch API of nested tensors is in prototype stage and will change "
                    "in the near future. We recommend specifying layout=torch.jagged when "
                    "constructing a nested tensor, as this layout receives active development,"
                    " has better operator coverage, and works with torch.compile.")
NO_SIZES = "Internal error: NestedTensorImpl doesn't support sizes. Please file an issue."
NO_STRIDES = "Internal error: NestedTensorImpl doesn't support strides. Please file an issue."


class NestedTensor:
    """A batch of tensors with the same number of dims, whose sizes may differ."""

    is_nested = True
    is_sparse = is_sparse_csr = False

    def __init__(self, components, is_leaf=True, *, quiet=False, dtype=None,
                 requires_grad=False):
        self._components = list(components)
        share(self._components)     # (see NOTE [Nested versions])
        self._is_leaf = is_leaf
        self._empty_dtype = dtype       # (the dtype of one with no components)
        self._empty_grad = requires_grad    # (and whether it requires grad)
        if not quiet:       # (PyTorch's view of a dense tensor, and a stored .grad, do not warn)
            warn_once(NESTED_PROTOTYPE)

    @property
    def dtype(self):
        """The components' dtype."""
        if self._components:
            return self._components[0].dtype
        return self._empty_dtype or ember.get_default_dtype()

    @property
    def device(self):
        """The components' device."""
        return self._components[0].device if self._components else ember.device("cpu")

    @property
    def layout(self):
        """``ember.strided``: the components are dense."""
        return ember.strided

    @property
    def _version(self):
        return version(self)

    @property
    def requires_grad(self):
        """Whether any component requires grad (one without components: as made)."""
        if not self._components:
            return self._empty_grad
        return any(t.requires_grad for t in self._components)

    @property
    def is_leaf(self):
        """Whether this nested tensor is a leaf of the graph: one made by ``nested_tensor``,
        or by ``as_nested_tensor`` from tensors that do not require grad."""
        return self._is_leaf

    @property
    def grad(self):
        """The gradients of a leaf's (or a ``retain_grad`` one's) components, as a nested
        tensor (None before any)."""
        if not (self._is_leaf or self.retains_grad):
            return None
        grads = [t.grad for t in self._components]
        if all(g is None for g in grads):
            return None
        grads = [g if g is not None else ember.zeros_like(t)
                 for g, t in zip(grads, self._components)]
        # (a create_graph backward's gradient is on the graph)
        return NestedTensor(grads, is_leaf=not any(g.requires_grad for g in grads), quiet=True)

    @grad.setter
    def grad(self, value):
        # PyTorch takes None alone (``optimizer.zero_grad()``): a nested gradient has no sizes
        if value is not None:
            raise RuntimeError(NO_SIZES)
        for t in self._components:
            t.grad = None

    @property
    def _grad(self):
        # (the optimizers read and clear ``.grad`` through ``_grad``)
        return self.grad

    @_grad.setter
    def _grad(self, value):
        self.grad = value

    @property
    def retains_grad(self):
        """Whether this non-leaf keeps its components' gradients (``retain_grad``)."""
        return not self._is_leaf and any(t.retains_grad for t in self._components)

    def retain_grad(self):
        """Keep the components' gradients from the next backward on (a non-leaf's)."""
        for t in self._components:
            if t.requires_grad:
                t.retain_grad()

    @property
    def shape(self):
        """Refused, as PyTorch does: a nested tensor has no single shape."""
        raise RuntimeError(NO_SIZES)

    def dim(self):
        """The components' number of dims, plus one for the batch."""
        return 1 + (self._components[0].dim() if self._components else 0)

    ndim = property(dim)
    ndimension = dim

    @property
    def is_cuda(self):
        """Whether the components are on a CUDA device."""
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        """Whether the components are on the CPU."""
        return self.device.type == "cpu"

    @property
    def data(self):
        """The components detached (sharing their storage, not their version counter), as a
        nested tensor."""
        return NestedTensor(_leaf_parts(t.data for t in self._components))

    @property
    def real(self):
        """Self, for a real nested tensor; refused for a complex one (as PyTorch's lacks
        ``view_as_real``)."""
        if self.dtype.is_complex:
            raise _strided_ops.unsupported("view_as_real", self)
        return self

    @property
    def imag(self):
        """Refused: a real nested tensor has no imaginary part, and PyTorch's complex ones
        lack ``view_as_real``."""
        if not self.dtype.is_complex:
            raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
        raise _strided_ops.unsupported("view_as_real", self)

    @property
    def mT(self):
        """The components with their last two dims swapped."""
        return self.transpose(-2, -1)

    def size(self, dim=None):
        """``size(dim)`` of a regular dim (one where every component agrees)."""
        if dim is None:
            return self.shape
        ndim = self.dim()
        if not -ndim <= dim < ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                             f"{ndim - 1}], but got {dim})")
        d = dim % ndim
        if d == 0:
            return len(self._components)
        sizes = {t.shape[d - 1] for t in self._components}
        if len(sizes) != 1:     # (named as given)
            raise RuntimeError(f"Given dimension {dim} is irregular and does not have a size.")
        return sizes.pop()

    def numel(self):
        """The total number of elements of all components."""
        return sum(t.numel() for t in self._components)

    nelement = numel

    def element_size(self):
        """The size in bytes of one element."""
        return self.dtype.itemsize

    def item(self):
        """Refused, as PyTorch refuses it (with a dense tensor's error unless one element)."""
        if self.numel() == 1:
            raise _strided_ops.unsupported("_local_scalar_dense", self)
        raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")

    def numpy(self, *, force=False):
        """Refused, as PyTorch does: a nested tensor has no single shape."""
        if self.requires_grad and not force and ember.is_grad_enabled():
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        raise RuntimeError(NO_SIZES)

    def tolist(self):
        """Refused, as PyTorch does: a nested tensor has no single set of strides."""
        raise RuntimeError(NO_STRIDES)

    def unbind(self, dim=0):
        """The components, as a tuple of views of them (on the graph, when they require
        grad, by PyTorch's node for it)."""
        if dim != 0:
            raise RuntimeError(f"NestedTensor can only be unbound along dimension 0 got "
                               f"dimension {dim} instead.")
        from ember.nested._strided_grad import freed_together
        # (PyTorch's one node for them all saves the nested tensor: a backward through any
        # of them frees it for all)
        return tuple(freed_together([_view(t, i, multi=True) for i, t in
                                     enumerate(self._components)],
                                    "UnbindBackwardAutogradNestedTensor0"))

    def __getitem__(self, index):
        """Component ``index`` (an int, or a tuple led by one: the rest indexes the
        component); slices of the batch are refused, as PyTorch refuses them."""
        rest = ()
        if type(index) is tuple and index and type(index[0]) is int:
            index, rest = index[0], index[1:]
        n = len(self._components)
        if type(index) is not int:
            raise _strided_ops.refused("slice.Tensor", (self,))
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of bounds for dimension 0 with size {n}")
        view = _view(self._components[index], index % n)
        return view[rest] if rest else view

    def __bool__(self):
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")

    def __len__(self):
        raise RuntimeError(NO_SIZES)

    def stride(self, dim=None):
        """Refused, as PyTorch does: a nested tensor has no single set of strides."""
        raise RuntimeError(NO_STRIDES)

    def is_contiguous(self, memory_format=None):
        """Whether every component is contiguous."""
        return all(t.is_contiguous() for t in self._components)

    def detach(self):
        """A nested tensor of the components detached from the graph (a leaf)."""
        return NestedTensor(_leaf_parts(t.detach() for t in self._components),
                            dtype=self._empty_dtype)

    def detach_(self):
        """Detach the components from the graph (sharing their storage): self, now a leaf."""
        self._components = _leaf_parts(t.detach() for t in self._components)
        self._is_leaf = True
        return self

    def values(self):
        """The components' elements, flattened into one dense tensor (a copy: ember keeps no
        single buffer), on the graph."""
        if not self._components:
            return ember.empty(0, dtype=self.dtype, device=self.device)
        out = ember.cat([t.reshape(-1) for t in self._components])
        return rename_node(out, "ValuesBackwardAutogradNestedTensor0")

    def data_ptr(self):
        """The address of the first component's first element (0 when there is none)."""
        return self._components[0].data_ptr() if self._components else 0

    def is_pinned(self, device=None):
        """Whether the components are in pinned memory."""
        return bool(self._components) and all(t.is_pinned() for t in self._components)

    def pin_memory(self, device=None):
        """The components copied into pinned memory."""
        return _strided_ops.each(self, ember.Tensor.pin_memory)

    def is_shared(self):
        """Whether the components are in shared memory."""
        return bool(self._components) and all(t.is_shared() for t in self._components)

    def share_memory_(self):
        """Move the components to shared memory: self."""
        for t in self._components:
            t.share_memory_()
        return self

    def new(self, *args, **kwargs):
        """Refused, as PyTorch refuses it."""
        raise RuntimeError(f"Unrecognized tensor type ID: NestedTensor"
                           f"{'CUDA' if self.is_cuda else 'CPU'}")

    def clone(self):
        """A nested tensor of copies of the components, on the same graph."""
        return NestedTensor((t.clone() for t in self._components), self._is_leaf and
                            not self.requires_grad, dtype=self._empty_dtype)

    def to(self, *args, **kwargs):
        """The components converted by ``Tensor.to`` (dtype, device); self when none
        changes."""
        if not self._components:        # (the dtype it would convert to)
            dtype = ember.empty(0, dtype=self.dtype).to(*args, **kwargs).dtype
            return self if dtype == self.dtype else NestedTensor([], dtype=dtype, quiet=True)
        out = [t.to(*args, **kwargs) for t in self._components]
        if all(o is t for o, t in zip(out, self._components)):
            return self
        return NestedTensor(out, self._is_leaf and not self.requires_grad)

    def requires_grad_(self, requires_grad=True):
        """Set whether the components (of a leaf) record operations on them."""
        if not self._is_leaf:          # (its components are the caller's tensors)
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If "
                               "you want to use a computed variable in a subgraph that doesn't "
                               "require differentiation use var_no_grad = var.detach().")
        for t in self._components or [ember.empty(0, dtype=self.dtype)]:  # (its dtype check)
            t.requires_grad_(requires_grad)
        self._empty_grad = requires_grad
        _leaf_parts(self._components)
        return self

    def to_padded_tensor(self, padding, output_size=None):
        """A dense tensor: the components padded with ``padding`` to a common size."""
        return to_padded_tensor(self, padding, output_size)

    @property
    def grad_fn(self):
        """The node that made the components (None for a leaf)."""
        return None if self._is_leaf else next(
            (t.grad_fn for t in self._components if t.grad_fn is not None), None)

    def contiguous(self, memory_format=None):
        """Self when every component is contiguous, else a nested tensor of contiguous copies."""
        return self if self.is_contiguous() else _strided_ops.each(self, ember.Tensor.contiguous)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Backpropagate ``gradient`` (a nested tensor of the components' gradients)."""
        if gradient is None:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if not isinstance(gradient, NestedTensor):
            raise RuntimeError("Expected both self and other to be nested tensors. Self is "
                               "nested. While Other is not nested.")
        given, wanted = _sizes(gradient), _sizes(self)
        if given.shape != wanted.shape or not ember.equal(given, wanted):
            raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {given} and "
                               f"output[0] has a shape of {wanted}.")
        pairs = [(t, g) for t, g in zip(self._components, gradient._components)
                 if t.requires_grad]
        if not pairs:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                               "grad_fn")
        ember.autograd.backward([t for t, _ in pairs], [g for _, g in pairs],
                                retain_graph=retain_graph, create_graph=create_graph,
                                inputs=inputs)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _strided_ops.dispatch(func, args, kwargs or {})

    def __getattr__(self, name):
        # a Tensor method not defined here runs through __torch_function__ (the op table); an
        # in-place one (which would reach the Tensor internals) is one of ours, or refused
        method = None if name.startswith("_") else getattr(ember.Tensor, name, None)
        if not callable(method):
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")   # (PyTorch's)
        if name.endswith("_"):
            return _strided_ops.inplace_method(self, name)
        return lambda *args, **kwargs: method(self, *args, **kwargs)

    def __repr__(self):
        # PyTorch prints the components as views of one tensor: all require grad, or none
        grad = self.requires_grad
        body = ",\n".join("  " + _component_repr(t, grad).replace("\n", "\n  ")
                          for t in self._components)
        suffix = [f"device='{self.device}'"] if self.device.type != "cpu" else []
        if not grad:
            pass
        elif self._is_leaf:
            suffix.append("requires_grad=True")
        else:
            suffix.append(f"grad_fn=<{type(self.grad_fn).__name__}>")
        # (the suffixes wrap at the line width as a tensor's do)
        return _close(f"nested_tensor([\n{body}\n]", suffix, len("nested_tensor("))

    def __format__(self, spec):
        if spec:        # (PyTorch's strided nested tensor is of class Tensor)
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return str(self)


def by_components(x):
    """Whether ``x`` is a strided nested tensor: the one hook of ember's core (autograd, the
    optimizers), which ask it of a non-Tensor only and then work on its components."""
    return isinstance(x, NestedTensor)


def _leaf_parts(tensors):
    """``tensors`` (as a list), those that require grad marked as the components of a nested
    leaf: PyTorch accumulates a gradient into one once (``autograd.graph.accumulate`` refuses
    a second, with its error). Others stay unmarked: ``unbind`` hands the components out, and
    one made to require grad by itself is an ordinary leaf."""
    tensors = list(tensors)
    for t in tensors:
        if t.requires_grad:
            if t._meta is None:
                t._meta = {}
            t._meta["nested_leaf"] = True
    return tensors


def _view(t, index, multi=False):
    """Component ``t`` (number ``index``) as PyTorch hands it out: a view of the nested
    tensor's memory, on the graph by the nested kernel's node. ``multi``: one of ``unbind``'s
    outputs, which may not be written in place under autograd (a ``select``'s may, where the
    write is not recorded: a recorded one asks the nested tensor's sizes)."""
    # (the one-element unbind or select of ``t.unsqueeze(0)`` views t; its index is how
    # ``_inplace`` finds the view again, so the output number PyTorch names is in the meta.
    # PyTorch's node saves the nested tensor, so a backward frees it: ``freed_together``,
    # which ``unbind`` calls on all its outputs at once)
    if multi:
        view = t.unsqueeze(0).unbind(0)[0]
        view._meta = dict(view._meta or (), nested_output=index)
        return view
    from ember.nested._strided_grad import freed_together
    view = freed_together([t.unsqueeze(0).select(0, 0)], "SelectBackwardAutogradNestedTensor0")[0]
    view._meta = dict(view._meta or (), nested_select=True)    # (a write under autograd refused)
    return view


def _sizes(nt):
    # the (components, dims) int64 tensor PyTorch prints for a nested tensor's sizes
    return ember.tensor([list(t.shape) for t in nt._components], dtype=ember.int64)


def _component_repr(t, grad):
    if grad:            # (a copied component's own grad_fn is not shown; the suffix wraps)
        return repr(t.detach().requires_grad_())
    return repr(t)


def _check_same_dim(tensors):
    for i, t in enumerate(tensors):
        if t.dim() != tensors[0].dim():
            raise RuntimeError(
                f"All Tensors given to nested_tensor must have the same dimension. Found "
                f"dimension {t.dim()} for Tensor at index {i} and dimension {tensors[0].dim()} "
                f"for Tensor at index 0.")


def _check_buffer_dtype(tensors):
    """PyTorch packs a list of tensors into one buffer of their promoted dtype (its errors),
    which has no kernel for uint16/32/64 (ops/_barebones.py)."""
    if tensors:
        common = tensors[0].dtype
        for t in tensors[1:]:
            common = ember.promote_types(common, t.dtype)
        if common in _WIDE_UNSIGNED:
            raise NotImplementedError(f"\"create_nt_buffer\" not implemented for "
                                      f"'{common._torch_name}'")


def as_nested_tensor(ts, dtype=None, device=None, layout=None):
    """A nested tensor of ``ts`` (a list of tensors, or a tensor split along dim 0) that
    keeps their autograd history."""
    if layout not in (None, ember.strided, ember.jagged):
        raise NotImplementedError(_LAYOUTS_ERROR)
    if not isinstance(ts, (ember.Tensor, list, tuple)) or (
            not isinstance(ts, ember.Tensor) and
            not all(isinstance(t, ember.Tensor) for t in ts)):
        raise TypeError("as_nested_tensor(): Expected first argument to be a tensor or a list "
                        "/ tuple of tensors ")
    tensors = list(ts.unbind(0)) if isinstance(ts, ember.Tensor) else list(ts)
    if layout is ember.jagged:
        return _jagged_build.from_tensor_list(tensors, dtype, device, keep_graph=True)
    _check_same_dim(tensors)
    if not isinstance(ts, ember.Tensor):
        _check_buffer_dtype(tensors)
    # PyTorch records the packing as a node (a nested tensor of tensors that require grad
    # is not a leaf) and copies the components (differentiably): in-place ops never reach the inputs
    # (packed into one buffer: the components come out contiguous)
    comps = [t.to(dtype=dtype, device=device, copy=True, memory_format=ember.contiguous_format)
             for t in tensors]
    grads = [t for t in tensors if t.requires_grad] if ember.is_grad_enabled() else []
    one = isinstance(ts, ember.Tensor)
    if grads and one and not (comps[0].dtype.is_floating_point or comps[0].dtype.is_complex):
        grads = []          # (one tensor is converted first, then viewed: integers need none)
    if grads:
        _check_differentiable([c.dtype for c in comps], "_nested_view_from_buffer" if one else
                              "_nested_tensor_from_tensor_list")
        # that buffer requires grad when one input does, and its one node gives every input
        # a gradient: each component is linked to all of them by an exact zero (``- 0.0``
        # keeps a -0.0), their gradients zeros from the others, as PyTorch's are
        link = ember.cat([t.reshape(-1)[:0] for t in grads]).sum()
        comps = [c - link.to(c.dtype) for c in comps]
    from ember.nested._strided_grad import freed_together
    return NestedTensor(freed_together(comps, "NestedTensorFromTensorListBackward0"),
                        is_leaf=not grads, quiet=one)


def _check_differentiable(dtypes, kernel):
    """PyTorch's errors for its nested ``kernel`` differentiating into one of ``dtypes``."""
    for d in dtypes:
        if d.is_complex:
            raise RuntimeError(f"{kernel} does not support automatic differentiation for "
                               f"outputs with complex dtype.")
        if not d.is_floating_point:
            raise RuntimeError(f"Autograd not support dtype: {d._torch_name}")


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """A nested tensor of copies of ``tensor_list`` (tensors or nested lists of numbers),
    a leaf of its own."""
    if layout not in (None, ember.strided, ember.jagged):
        raise NotImplementedError(_LAYOUTS_ERROR)
    tensors = [t.detach() if isinstance(t, ember.Tensor) else ember.tensor(t, dtype=dtype)
               for t in tensor_list]
    if layout is ember.jagged:
        return _jagged_build.from_tensor_list(tensors, dtype, device, requires_grad)
    _check_same_dim(tensors)
    _check_buffer_dtype(tensors)
    made = dtype or (tensors[0].dtype if tensors else ember.get_default_dtype())
    if requires_grad and not (made.is_floating_point or made.is_complex):
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    # (every component takes the first one's dtype, as PyTorch's, unless given one)
    return NestedTensor(_leaf_parts(
        t.to(dtype=made, device=device, copy=True, memory_format=ember.contiguous_format)
        ._set_requires_grad(requires_grad) for t in tensors), dtype=dtype,
        requires_grad=requires_grad)


def to_padded_tensor(input, padding, output_size=None):
    """A dense tensor of shape ``output_size`` (default: the largest size along each dim)
    holding ``input``'s components, padded with ``padding``."""
    if isinstance(input, JaggedTensor):
        return input.to_padded_tensor(padding, output_size)
    comps = input._components
    if not input.is_contiguous():
        raise RuntimeError("for now to_padded_tensor only supports contiguous nested tensor")
    if not comps:           # (PyTorch's is empty whatever the output_size)
        return ember.empty(0, dtype=input.dtype, device=input.device)
    target = [max(t.shape[d] for t in comps) for d in range(input.dim() - 1)]
    if output_size is not None:
        if len(output_size) != input.dim():
            raise RuntimeError("Length of output_size does not match NestedTensor dims. "
                               "Broadcasting is not supported.")
        if any(want < have for want, have in zip(output_size, [len(comps)] + target)):
            raise RuntimeError("Value in output_size is less than NestedTensor padded size. "
                               "Truncation is not supported.")
        target = list(output_size)[1:]
    padded = []
    for t in comps:
        pad = []
        for d in reversed(range(t.dim())):
            pad += [0, target[d] - t.shape[d]]
        padded.append(ember.nn.functional.pad(t, pad, value=padding))
    out = ember.stack(padded)
    extra = 0 if output_size is None else output_size[0] - len(comps)
    if extra:               # output_size[0] adds whole components of padding
        out = ember.nn.functional.pad(out, [0, 0] * len(target) + [0, extra], value=padding)
    rename_node(out, "ToPaddedTensorBackward0")
    if extra and out.requires_grad:     # (PyTorch's backward then fails on the batch size)
        from ember.nested._strided_grad import refusing
        refusing([out], lambda: RuntimeError(
            f"The size of tensor a ({len(comps)}) must match the size of tensor b "
            f"({output_size[0]}) at non-singleton dimension 0"))
    return out


def narrow(tensor, dim, start, length, layout=ember.strided):
    """A nested tensor of ``tensor``'s slices ``start`` to ``start + length`` along dim 0
    (the strided layout takes int bounds and dim 0 only); for the jagged layout, a view of
    the rows ``start`` to ``start + length`` (ints or one per batch element) along dim 1."""
    if layout is ember.jagged:
        return _jagged_build.narrow(tensor, dim, start, length)
    if layout is not ember.strided:
        raise NotImplementedError(_LAYOUTS_ERROR)
    if isinstance(start, ember.Tensor) or isinstance(length, ember.Tensor):
        raise RuntimeError("start and length must be integers for the strided layout NT impl")
    components = ember.unbind(tensor)
    if dim != 0:
        raise RuntimeError(f"narrow(): only dim=0 supported for nested tensors, but got: {dim}")
    # (PyTorch narrows a copy: ``as_nested_tensor`` of the components)
    return narrow_view(as_nested_tensor(list(components)), start, length)


def narrow_view(nt, start, length):
    """Components ``start`` to ``start + length`` of strided nested tensor ``nt``, as views
    of them (``Tensor.narrow`` along dim 0: writes reach ``nt``)."""
    n = len(nt._components)
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start})")
    start = start + n if start < 0 else start
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative")
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    if not nt.is_contiguous():
        raise RuntimeError("narrow(): only contiguous nested tensors supported")
    parts = [t.view_as(t) for t in nt._components[start:start + length]]
    grad = any(t.requires_grad for t in parts)
    if grad:                    # (PyTorch records a node it has no derivative for)
        from ember.nested._strided_grad import refusing
        refusing([rename_node(t, "NotImplemented") for t in parts],
                 lambda: RuntimeError("derivative for aten::narrow is not implemented"))
    return NestedTensor(parts, is_leaf=not grad, quiet=True, dtype=nt.dtype)


def nested_tensor_from_jagged(values, offsets=None, lengths=None, jagged_dim=None,
                              min_seqlen=None, max_seqlen=None):
    """A jagged nested tensor viewing ``values`` split at ``offsets`` (or by ``lengths``)
    along dim ``jagged_dim - 1``; gradients reach ``values``."""
    return _jagged_build.nested_tensor_from_jagged(values, offsets, lengths, jagged_dim,
                                                   min_seqlen, max_seqlen)


def masked_select(tensor, mask):
    """A 2-D jagged nested tensor holding, for each row, ``tensor``'s elements where
    ``mask`` holds."""
    return _jagged_build.masked_select(tensor, mask)


from ember.nested import _jagged_build  # noqa: E402  (it reads _check_same_dim from here)
from ember.nested import _jagged_views  # noqa: E402,F401  (registers its ops in the table)
from ember.nested import _strided_ops  # noqa: E402

_strided_ops.install(NestedTensor)
