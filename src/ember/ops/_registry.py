"""The op registry: one record per op, from which the public functions and methods are made.

An op is declared once::

    @op("mul(input, other)", inputs=2, promote=BINARY, inplace=True)
    def mul(xp, a, b):                  # backend arrays in, a backend array out
        return xp.multiply(a, b)

    @mul.derivative
    def _(grad, a, b):                  # ember tensors in, one gradient per input out
        return grad * b.conj(), grad * a.conj()

The signature string is PyTorch's; from it the registry generates ``ember.mul``,
``Tensor.mul``, ``Tensor.mul_`` (and the ``out=`` keyword) with real Python signatures, so
argument binding costs nothing here. Forwards and derivatives take the tensor inputs first,
in ``inputs`` order, then the remaining parameters in signature order. A derivative that
names a keyword-only ``out`` parameter receives the op's output(s) as well, and one that names
a keyword-only ``needs`` parameter receives a tuple with one bool per input saying whether that
input wants a gradient (so ``x * 2`` computes no gradient for the 2). Give ``needs`` a default
of all True: other derivatives call derivatives directly.

NOTE [Kept values]: a forward that names a keyword-only ``keep`` parameter may hand its node
values it computed anyway (cross_entropy's ``exp(input - shift)``, attention's kernel choice)
rather than have backward recompute them. ``keep`` is None unless the call is recorded; then
it is a list the forward appends to (or leaves empty: a CUDA kernel override keeps nothing).
The recorder stores them on the node, never as outputs (users, vmap, tracing and
``__torch_function__`` see none): backend arrays as tensors, which ``saved_tensors_hooks``
pack as saved tensors and backward frees (``kept_as`` gives one the history of an op of an
input, for double backward). A derivative naming a keyword-only ``kept`` parameter receives
them (a tuple), or None for a call recorded without them; so do the per-call declarations
of a keeping op (``reads_inputs``, ``copies_inputs``' and ``aliases_inputs``' ``when``,
``named_by``, ``derivative(outputs=)``), as keyword ``kept``, when there are any.
"""

import ast
import functools
import itertools
from numbers import Number

from ember import _dtype as D
from ember._tensor import Tensor
from ember.ops._barebones import REFUSED
from ember.autograd.graph import InputMeta, OpNode
from ember.ops._dispatch import RAW_OUTPUTS, call, device_mismatch
from ember.ops._entry_points import ENTRY_KINDS, GENERATED, generate, method_varargs, varargs
from ember.ops._op_errors import OpValueError, broadcast_message, translate_error
from ember.ops._out_compute import OUT_PREPARE
from ember.ops._overlap import check_no_overlap, check_no_partial_overlap
from ember.ops._recording import RoutedOpNode, record_checks, rename_node, unrecorded_checks

# the registry's face: ops import their helpers from here (the dispatcher, the entry points
# and graph recording live in _dispatch.py, _entry_points.py and _recording.py)
__all__ = ["op", "Op", "REGISTRY", "attach_methods", "call", "RAW_OUTPUTS", "device_mismatch",
           "rename_node", "ENTRY_KINDS", "GENERATED", "method_varargs", "varargs",
           "OpValueError", "broadcast_message", "translate_error"]

REGISTRY = {}
D.ON_DEFAULT_CHANGE.append(lambda: [o.dtype_cache.clear() for o in REGISTRY.values()])


class Op:
    """Everything ember knows about one op; see the module docstring."""

    # whether operands cast to the compute dtype keep being non-contiguous (searchsorted warns
    # about non-contiguous operands as given, before PyTorch promotes them)
    casts_keep_layout = False
    # positions of tensor inputs the dispatcher hands over in their own dtype, not cast to the
    # compute dtype (see leave_uncast)
    uncast = frozenset()
    # positions of params that hold tensors PyTorch's node saves (index_put's indices): a
    # write into one before backward raises, as for a saved input (see _recording._record)
    versioned_params = ()
    # whether saved-tensor hooks get the saved inputs in reverse order (gather: PyTorch packs
    # index, then self)
    packs_reversed = False
    # how many of the values its forward keeps (NOTE [Kept values]) saved-tensor hooks get
    # after the saved inputs, not before them (nll_loss's total weight, as PyTorch saves it)
    kept_last = 0
    # whether the op declares copied inputs or versioned params: None until its first
    # recorded call (see _recording._record)
    records_more = None
    # an elementwise op, whose result PyTorch lays out after its operands' strides (see
    # ops/_pointwise_layout.py); see op()
    pointwise = False
    # how many operands an elementwise op of several has (0 for the others): the dispatcher's
    # one test for a layout check, set at registration
    laid_operands = 0
    # ``out_layout(result, inputs, out)``: the array whose layout a resized ``out=`` tensor takes
    # (None: an elementwise op's takes its result's, another op's is row-major); for an op
    # whose out= PyTorch lays out otherwise than its result (see ops/_out.py)
    out_layout = None

    def __init__(self, forward, signature, *, inputs, promote, upcast, method, inplace,
                 view, out, saves_inputs, grad_fn_name, scalars, method_varargs,
                 namedtuple, differentiable, checked_scalars, namespace):
        tree = ast.parse(f"def {signature}: pass").body[0]
        self.short_name = tree.name     # the Python name: ember.<ns>.<short_name>
        self.namespace = namespace      # None, or "linalg", "fft", "special"
        self.name = f"{namespace}.{tree.name}" if namespace else tree.name
        self.forward = forward
        self.keeps = _takes_keyword(forward, "keep")    # see NOTE [Kept values]
        self.kept_recipes = ()                          # see kept_as
        self.signature = signature
        self._args = tree.args
        names = [a.arg for a in tree.args.args]
        if isinstance(inputs, int):
            inputs = tuple(names[:inputs])
        self.input_names = tuple(n.rstrip("*") for n in inputs)
        defaults = dict(zip(names[len(names) - len(tree.args.defaults):], tree.args.defaults))
        defaults.update((a.arg, d) for a, d in zip(tree.args.kwonlyargs, tree.args.kw_defaults)
                        if d is not None)
        self.optional_inputs = frozenset(        # tensor inputs that default to None
            i for i, n in enumerate(self.input_names)
            if isinstance(defaults.get(n), ast.Constant) and defaults[n].value is None)
        self.seq_inputs = tuple(i for i, n in enumerate(inputs) if n.endswith("*"))
        self.returns_input = None       # see returns_input_when
        # what the dispatcher must look at before anything else: sequence inputs, or a call
        # that may return its input itself
        self.unusual_inputs = bool(self.seq_inputs)
        all_names = names + [a.arg for a in tree.args.kwonlyargs]
        if tree.args.vararg:
            all_names.insert(len(names), tree.args.vararg.arg)
        self.param_names = tuple(n for n in all_names if n not in self.input_names)
        self.promote = promote
        # PyTorch's kernel (or a function choosing it) refusing uint16/32/64 operands of an op
        # without a dtype policy (ops/_barebones.py); None for the others
        self.unsigned_kernel = REFUSED.get(self.name) if promote is None else None
        self.upcast = upcast
        self.view = view
        self.supports_out = out
        self.out_dtype_error = None     # set for ops whose out= must have the result's dtype
        self.out_dtype_check = None     # or a check of out's dtype (see ops/_out_dtypes.py)
        self.saves_inputs = saves_inputs
        self.scalars = scalars
        self.checked_scalars = checked_scalars
        self.namedtuple = namedtuple
        self.differentiable = differentiable
        self.method_varargs = method_varargs
        self.vjp = None
        self.composed = None            # see composed_when_recording
        self.autocast = None            # {device type: policy} from ember/amp/_policy.py
        self.dtype_cache = {}           # operand signature -> compute_dtype(...) result
        self.inplace_forward = None
        self.needs_output = False
        # a multi-view op whose outputs PyTorch makes one by one (tensor_split slices), so
        # that each may be modified in place; split's and unbind's may not
        self.independent_views = False
        self.saved_outputs = None       # indices of the outputs the derivative reads; None: all
        self.differentiable_outputs = None  # see op(); None: every floating output
        self.needs_mask = False
        # the keywords the derivative takes beyond ``out``: None, "needs", or "kept" (with
        # ``needs`` too where it names it): one test per backward (see OpNode._vjp)
        self.vjp_keywords = None
        self.refused_grads = None       # ((input index, name, kernel), ...): see refuse_grad
        self.forward_ad_refusal = None  # a kernel name, or fn: see refuse_forward_ad
        self.not_implemented_kernel = None  # see not_implemented
        self.record_check = None        # fn(op, flat, params) run as a call records
        self.unrecorded_check = None    # see check_unrecorded (and refuse_forward_ad)
        self.own_unrecorded_check = None
        self.integral_results_refused = False   # see refuse_integral_results
        self.complex_grad_refused = False       # see refuse_complex_grad
        self.overlap_check = check_no_partial_overlap  # see refuse_aliased_inputs
        # an in-place forward that refuses an expanded self itself, after its own checks
        self.checks_internal_overlap = False    # (set by inplace_variant: scatter.in_place)
        self.unrounded = frozenset()    # see keep_scalars_unrounded
        self.dtype_params = ()          # see params_in_dtype
        self.input_readers = None       # per input, the inputs whose gradients read it
        self.copied_inputs = ()         # ((positions, when, copy, kept), ...): copies_inputs
        self.written_inputs = ()        # see writes_inputs
        self.dropped_inputs = None      # see nondifferentiable (None: every input has an edge)
        self.number_groups = ()         # see number_overload
        self.conditional_drops = ()     # see nondifferentiable_when
        self.transposed_inputs = ()     # see reads_transposed
        self._node_base = OpNode        # the class of its nodes' classes
        self.n_diff_inputs = len(self.input_names)
        # PyTorch names backward nodes after the kernel: GeluBackward0, LinalgInvExBackward0
        node_name = self.short_name if namespace == "nn.functional" else self.name
        self.node_class = type(grad_fn_name or _grad_fn_name(node_name.replace(".", "_")),
                               (OpNode,),
                               {"__slots__": (), "op": self})
        self.node_names = None          # inputs -> node name, for ops PyTorch names by case
        # reductions that compute in out's dtype (see ops/_out_compute.py); None for most
        self.out_prepare = OUT_PREPARE.get(self.name) if out else None
        self.function = generate(self, "function")
        self.method_name = (self.short_name if method is True else method) or None
        self.inplace = inplace
        REGISTRY[self.name] = self

    def __repr__(self):
        return f"<op {self.signature}>"

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    def derivative(self, fn=None, *, outputs=None):
        """Register the op's derivative (see the module docstring); returns it.

        ``outputs``: for an op with several outputs whose derivative reads only some of them
        from ``out=``, their indices (negative ones count from the end). Only those are kept
        for backward (the others reach the derivative as None), so changing the others in
        place before backward is allowed, as in PyTorch (``relu_`` after ``batch_norm``: the
        mean and invstd are kept, not ``y``). Or ``fn(flat inputs, params)`` returning them
        per call (attention's math kernel keeps its weights, not its result).
        Use as ``@op.derivative(outputs=(1,))``. A keyword-only ``kept`` parameter receives
        what the forward kept (NOTE [Kept values])."""
        if fn is None:
            return lambda f: self.derivative(f, outputs=outputs)
        import inspect
        params = inspect.signature(fn).parameters
        self.needs_output = "out" in params and params["out"].kind is params["out"].KEYWORD_ONLY
        self.saved_outputs = None if outputs is None else \
            outputs if callable(outputs) else frozenset(outputs)
        self.needs_mask = "needs" in params and params["needs"].kind is params["needs"].KEYWORD_ONLY
        if self.needs_mask and self.seq_inputs:
            raise TypeError(f"{self.name}: 'needs' is one flag per input, and sequence inputs "
                            f"have none")
        kept = "kept" in params and params["kept"].kind is params["kept"].KEYWORD_ONLY
        self.vjp_keywords = "kept" if kept else "needs" if self.needs_mask else None
        self.vjp = fn
        return fn

    def refuse_grad(self, argument, kernel, forward=False):
        """Refuse a call whose tensor input ``argument`` requires grad, when the call is
        recorded, with PyTorch's error naming ``kernel``: a kernel name, or ``fn(flat inputs)``
        returning one, or None where the call is differentiable in ``argument``
        (cross_entropy's weight is, with probability targets). ``forward``: PyTorch's
        forward formula takes the argument, so a forward-mode transform's tangent passes
        (see ``grad_refused``)."""
        assert not self.seq_inputs
        entry = (self.input_names.index(argument), argument, kernel, forward)
        self.refused_grads = (self.refused_grads or ()) + (entry,)
        self.record_check = record_checks

    def refuse_forward_ad(self, kernel):
        """Refuse forward-mode AD through a call, as PyTorch does for kernels without a
        forward derivative: a dual operand (``forward_ad``), or an input reached from those
        of ``func.jvp``, ``jacfwd``, ``linearize`` or ``hessian``, raises its
        NotImplementedError naming ``kernel``: a kernel name, or ``fn(flat inputs, params)``
        returning one, or None where the call has a forward derivative (a CPU attention call
        that PyTorch's math kernel takes). Returns ``kernel`` (a decorator, for a function)."""
        self.forward_ad_refusal = kernel
        self.record_check = record_checks
        # under no_grad too: PyTorch's forward AD ignores grad mode
        self.unrecorded_check = functools.partial(unrecorded_checks, self)
        return kernel

    def not_implemented(self, kernel):
        """Declare that PyTorch has no derivative for the op, computed by its aten kernel
        ``kernel``: a recorded call gets PyTorch's node NotImplemented, which refuses backward,
        forward-mode AD refuses it, and an ``out=`` call records that node too
        (ops/_not_implemented.py)."""
        from ember.ops._not_implemented import raise_not_implemented, record_not_implemented
        self.not_implemented_kernel = kernel
        self.saves_inputs = False
        self.name_nodes("NotImplemented")       # (an in-place call's node)
        self.vjp = raise_not_implemented(kernel)
        self.composed = functools.partial(record_not_implemented, self)
        self.refuse_forward_ad(f"aten::{kernel}")

    def check_unrecorded(self, fn):
        """Run ``fn(flat inputs, params)`` for a call that has an input requiring grad but
        records no graph (under ``no_grad`` or ``inference_mode``): PyTorch's kernel choice
        reads ``requires_grad`` whatever the grad mode (scaled_dot_product_attention's CPU
        flash kernel takes no mask that requires grad), and its refusals with it. A recorded
        call runs no such check (``named_by`` and ``refuse_grad`` see it). Returns ``fn``."""
        self.own_unrecorded_check = fn
        self.unrecorded_check = functools.partial(unrecorded_checks, self)
        return fn

    def refuse_complex_grad(self, result_of=None):
        """Refuse a recorded call whose differentiable input (so its result) is complex, with
        PyTorch's error for kernels whose derivative is real only (embedding, nan_to_num; a
        forward-mode tangent and an in-place call pass, as in PyTorch). ``result_of``: the
        index of the input whose dtype the result takes (select_scatter's ``input``), when
        the result, not an input, decides: refused when that input is complex and any input
        requires grad."""
        self.complex_grad_refused = True if result_of is None else (result_of,)
        self.record_check = record_checks

    def refuse_integral_results(self):
        """Refuse a recorded call whose result is not differentiable (``dtype=`` made it
        integral: ``x.sum(dtype=ember.int64)`` of a tensor that requires grad), with PyTorch's
        error, rather than return a result the gradient silently stops at."""
        self.integral_results_refused = True

    def refuse_aliased_inputs(self):
        """Refuse an input sharing any memory with the tensor written (in place or ``out=``),
        not only a partial overlap, with PyTorch's error: ``x.scatter_(0, i, x)``."""
        self.overlap_check = check_no_overlap

    def keep_scalars_unrounded(self, position, zero_dim=True):
        """Beside 16-bit floats, read a number (and, with ``zero_dim``, a 0-dim tensor) at
        input ``position`` in float32, as PyTorch's CPU kernels of mul and div read their
        second operand, rather than round it to the 16-bit dtype first as its other ops do
        (NOTE [Scalars beside 16-bit floats] in _dispatch.py)."""
        kinds = ("number", "zero_dim") if zero_dim else ("number",)
        self.unrounded |= {(position, kind) for kind in kinds}

    def params_in_dtype(self, *names):
        """These Number parameters are converted to the op's dtype, as PyTorch converts
        them: beside 16-bit floats (computed in float32) they are rounded to that dtype and
        must fit it (``hardtanh(half, max_val=70000.)`` raises its overflow error)."""
        self.dtype_params = tuple(self.param_names.index(n) for n in names)

    def writes_inputs(self, *positions):
        """Declare the inputs this op's forward updates in place (batch norm's running
        statistics), so that a second run of it (forward AD) is given copies of them."""
        self.written_inputs = positions

    def leave_uncast(self, *names):
        """Hand these tensor inputs to the forward in their own dtype rather than cast to the
        compute dtype with the others: where's bool condition (NumPy selects by a bool mask
        faster than by a float one, and the cast costs a copy)."""
        self.uncast = frozenset(self.input_names.index(n) for n in names)

    def nondifferentiable(self, *names):
        """Declare the tensor inputs that are not differentiable by definition (indices,
        masks, targets, running statistics): as in PyTorch, the backward node lists no edge
        for them in ``next_functions`` (not even ``(None, 0)``) and returns no gradient."""
        dropped = frozenset(self.input_names.index(n) for n in names)
        self.dropped_inputs = dropped | (self.dropped_inputs or frozenset())
        self._edge_mask = tuple(i not in self.dropped_inputs
                                for i in range(len(self.input_names)))

    def number_overload(self, *names):
        """Declare inputs that PyTorch takes as a Scalar in an overload of its own when none
        of them is a tensor (``x.pow(2)``, ``x.clamp(0, 1)``): that overload's node lists no
        edge for them, where a tensor (even one needing no gradient) gets ``(None, 0)``."""
        assert not self.seq_inputs
        self.number_groups += (tuple(self.input_names.index(n) for n in names),)
        if self.dropped_inputs is None:
            self.nondifferentiable()

    def nondifferentiable_when(self, test, *names):
        """As ``nondifferentiable``, in the calls where ``test(flat inputs)`` holds
        (cross_entropy's target and weight, with class-index targets). ``test`` runs when the
        call is recorded and again at backward, on the inputs as the node saved them (tensors
        or ``InputMeta``): it may read only what cannot change in between (None, shapes,
        dtypes), never ``requires_grad``."""
        assert not self.seq_inputs
        self.conditional_drops += ((test, tuple(self.input_names.index(n) for n in names)),)
        if self.dropped_inputs is None:
            self.nondifferentiable()

    def kept_edges(self, items, flat, lengths):
        """``items`` (one per flat input: edges, gradients) less those of the inputs that
        have no edge in this call (see ``nondifferentiable``, ``nondifferentiable_when`` and
        ``number_overload``)."""
        mask = self._edge_mask
        for group in self.number_groups:
            for i in group:
                if _is_tensor(flat[i]):
                    break
            else:                       # every input of the group is a number
                if mask is self._edge_mask:
                    mask = list(mask)
                for i in group:
                    mask[i] = False
        for test, dropped in self.conditional_drops:
            if test(flat):
                if mask is self._edge_mask:
                    mask = list(mask)
                for i in dropped:
                    mask[i] = False
        if mask is self._edge_mask and not self.dropped_inputs:
            return items                # (a number overload taken with tensors)
        if lengths is not None:         # sequence inputs: one flag per tensor in them
            mask = [keep for keep, n in zip(mask, lengths)
                    for _ in range(1 if n is None else n)]
        return list(itertools.compress(items, mask))

    def reads_inputs(self, *readers):
        """Declare, per input, the inputs whose gradients read its values (``mul``: a's
        gradient reads b and b's reads a, so ``(1,), (0,)``). An input no gradient of this
        call reads is not checked for in-place changes at backward, as PyTorch does not save
        it: ``y = h * 2; h.relu_()`` may still backpropagate through ``y``. ``"others"``:
        every input is read by all the other inputs' gradients (einsum's operands). Or one
        function ``fn(flat inputs, params)`` returning them per call (a circular pad reads
        nothing, a reflecting one its input)."""
        assert readers == ("others",) or not self.seq_inputs
        self.input_readers = readers[0] if len(readers) == 1 and callable(readers[0]) \
            else readers

    def copies_inputs(self, *positions, when=None):
        """Declare inputs that PyTorch's composite saves values computed from, not the inputs
        themselves (``ndtr`` saves its scaled input, ``msort`` the sort's indices): a
        recorded call (where ``when(flat inputs, params)`` holds, if given) saves a private
        copy of each that a gradient reads, made with ``clone`` so that double backward
        still reaches the input, and writing the input in place before backward is allowed,
        as in PyTorch. The copy costs what PyTorch's intermediates cost it (a forward that
        kept what the gradients read instead leaves the input unread: NOTE [Kept values])."""
        assert not self.seq_inputs
        self.copied_inputs += ((positions, when, True),)

    def aliases_inputs(self, *positions, when=None):
        """Declare inputs that PyTorch saves through an alias with a version counter of its
        own (``kron``'s ``_unsafe_view`` of each operand): a write into one before backward
        raises nothing, and backward reads the values written (through the alias's own node,
        made as the call records: double backward does not see the write's). ``when``: as
        for ``copies_inputs``."""
        assert not self.seq_inputs
        self.copied_inputs += ((positions, when, False),)

    def kept_as(self, index, name, position=0):
        """Declare that the forward's kept value ``index`` (NOTE [Kept values]) is the
        registered op ``name`` applied to input ``position`` (up to a constant that its
        derivative ignores): the recorder gives it that op's node on the input, so that a
        derivative built of it reaches the input in double backward (cross_entropy's
        ``exp(input - shift)``, recorded as exp's: the shift cancels where it is used)."""
        self.kept_recipes += ((index, name, position),)

    def reads_transposed(self, *positions):
        """Declare the inputs PyTorch's kernel reads through ``t()`` (``linear``'s weight: an
        addmm of ``weight.t()``): a recorded call's node routes such an input's edge through a
        node of the registered ``t`` op (TBackward0), made when the graph is first walked (see
        ``RoutedOpNode``), and the derivative returns the gradient of ``t(input)`` for it,
        which that node transposes back."""
        self.transposed_inputs = positions
        self._node_base = RoutedOpNode
        self.node_class = type(self.node_class.__name__, (RoutedOpNode,),
                               {"__slots__": (), "op": self})
        if self.node_names is not None:
            self._node_classes.clear()

    def returns_input_when(self, test):
        """Declare the calls that return their first input itself, as PyTorch's do (a
        ``flatten`` of one dim, the ``conj`` of a real tensor): ``test(input, params)``, for a
        plain tensor input (or a Parameter, or a subclass under its default
        ``__torch_function__``) and no ``out=``, says whether this call does. It runs before
        anything else of the dispatch (only for such ops), and must return False rather than
        raise for arguments the op refuses, so that the op raises its own error. The tensor
        returned records nothing: a leaf stays a leaf. Returns ``test``."""
        self.returns_input = test
        self.unusual_inputs = True
        return test

    def name_nodes(self, name):
        """Give the op's backward nodes the name PyTorch's have (that of the kernel PyTorch
        computes the op with: ``selu``'s is EluBackward0)."""
        self.node_class = type(name, (self._node_base,), {"__slots__": (), "op": self})

    def composed_when_recording(self, fn):
        """Record the op's graph as PyTorch's composition of other ops: a call that records
        a graph runs ``fn(inputs, params)``, built from registered ops, in the forward's stead
        (``linear`` is an addmm of the weight's ``t()``), so that its nodes are PyTorch's.
        ``fn`` returns NotImplemented for the calls it leaves to the op itself. Calls that
        record nothing keep the fused forward, and forward-mode AD the op's own derivative.
        Returns ``fn``."""
        self.composed = fn
        return fn

    def fused(self, *args):
        """Call the op (its inputs, then all its parameters, positionally) with its own
        forward and node, even where ``composed_when_recording`` would compose the call: the
        kernels a composition is made of (fft's r2c transform of a resized signal)."""
        n = len(self.input_names)
        return call(self, args[:n], args[n:], RAW_OUTPUTS)

    def named_by(self, fn):
        """Name an op's backward nodes per call: ``fn(flat inputs, params, outputs)``
        returns the name PyTorch's node would have (``linear`` is AddmmBackward0 on a matrix
        with a bias, MmBackward0 without; ``sum`` over dims is SumBackward1); returns
        ``fn``."""
        self.node_names = fn
        self._node_classes = {}
        return fn

    def node_class_for(self, flat, params, outputs, kept=None):
        """The backward node class of a call (see ``named_by``)."""
        name = self.node_names(flat, params, outputs) if kept is None else \
            self.node_names(flat, params, outputs, kept=kept)
        cls = self._node_classes.get(name)
        if cls is None:
            cls = self._node_classes[name] = type(name, (self._node_base,),
                                                  {"__slots__": (), "op": self})
        return cls

    def inplace_variant(self, fn):
        """Register a forward ``fn(xp, dst, *arrays, *params)`` that writes into ``dst``."""
        self.inplace_forward = fn
        self.checks_internal_overlap = getattr(fn, "checks_internal_overlap", False)
        return fn

    # structure of sequence inputs (cat's ``tensors``): flat lists for the dispatcher
    def flatten_inputs(self, inputs):
        if len(inputs) == 1 and self.seq_inputs == (0,):       # (cat's, stack's)
            x = inputs[0]
            if isinstance(x, Tensor):
                raise TypeError(f"{self.name}(): argument '{self.input_names[0]}' must be "
                                f"tuple of Tensors, not Tensor")
            flat = list(x)                                  # (a generator has no len)
            return flat, (len(flat),)
        flat = []
        for i, x in enumerate(inputs):
            if i in self.seq_inputs:
                if isinstance(x, Tensor):
                    raise TypeError(f"{self.name}(): argument '{self.input_names[i]}' must be "
                                    f"tuple of Tensors, not Tensor")
                flat.extend(x)
            else:
                flat.append(x)
        # (a tuple of numbers: the collector untracks it, where a list stays tracked per node)
        return flat, tuple([len(x) if i in self.seq_inputs else None
                            for i, x in enumerate(inputs)])

    def structure(self, flat, lengths):
        if lengths is None:
            return flat
        if len(lengths) == 1 and lengths[0] is not None:       # (one sequence)
            return [list(flat[:lengths[0]])]
        out, pos = [], 0
        for n in lengths:
            if n is None:
                out.append(flat[pos])
                pos += 1
            else:
                out.append(list(flat[pos:pos + n]))
                pos += n
        return out

    def structure_inputs(self, node_inputs):
        flat, lengths = node_inputs
        return self.structure(flat, lengths)

    def flatten_grads(self, grads):
        if not self.seq_inputs:
            return grads
        flat = []
        for i, g in enumerate(grads):
            if i in self.seq_inputs:
                flat.extend(g)
            else:
                flat.append(g)
        return flat


def op(signature, *, inputs=1, promote=None, upcast=None, method=True, inplace=False,
       view=False, out=None, saves_inputs=True, grad_fn_name=None, scalars=None,
       method_varargs=None, namedtuple=None, differentiable=True, checked_scalars=False,
       namespace=None, differentiable_outputs=None, pointwise=False):
    """Register an op from its PyTorch signature and its forward on backend arrays.

    inputs: how many leading parameters (or which names) are tensors; a name ending in
        ``*`` is a sequence of tensors (``cat(tensors*)``).
    promote: a dtype Policy from ops/_promotion.py, or None to pass dtypes through.
    upcast: compute 16-bit and 8-bit floats in float32 (default: when promote is set).
    method / inplace: generate ``Tensor.<name>`` / ``Tensor.<name>_``.
    view: True if the output is always a view of input 0, "maybe" if only sometimes.
    out: accept ``out=`` (default: when promote is set).
    saves_inputs: False when the derivative needs only the inputs' shapes and dtypes.
    scalars: allow Python numbers for tensor inputs (default: several inputs and promote).
    method_varargs: parameter the method takes as ``*args`` (``x.view(2, 3)``).
    namedtuple: a named-tuple type for multiple outputs (``max(dim=...)``).
    checked_scalars: Python ints that do not fit a narrow integer dtype raise (clamp bounds)
        instead of wrapping (add); or ``fn(position, value, dtype)`` making the 0-d array
        per input (pow checks its exponent, and wraps its base).
    namespace: the op lives in ``ember.<namespace>`` ("linalg", "fft", "special") rather
        than at the top level; its registry name is "<namespace>.<name>". Such ops get no
        method unless ``method`` names one.
    differentiable_outputs: indices of the outputs PyTorch makes differentiable, when not
        every floating one (layer norm's statistics are not): the others get no grad_fn,
        node hooks do not see their slots, and the derivative gets None for them (the
        derivative's own view of them, ``out=``, still has the node, for double backward).
    pointwise: an elementwise op, its result laid out as PyTorch's TensorIterator lays it
        out after the tensor inputs' strides; ``NUMBERS_ASIDE`` where its number inputs are
        no operands there (ops/_pointwise_layout.py).
    """
    def register(forward):
        o = Op(forward, signature,
               inputs=inputs, promote=promote,
               upcast=(promote is not None) if upcast is None else upcast,
               method=(False if namespace and method is True else method),
               inplace=inplace, view=view,
               out=(promote is not None and not view) if out is None else out,
               saves_inputs=saves_inputs, grad_fn_name=grad_fn_name,
               scalars=(promote is not None) if scalars is None else scalars,
               method_varargs=method_varargs, namedtuple=namedtuple,
               differentiable=differentiable, checked_scalars=checked_scalars,
               namespace=namespace)
        o.differentiable_outputs = differentiable_outputs
        if pointwise:
            o.pointwise = pointwise
            if len(o.input_names) > 1:
                o.laid_operands = len(o.input_names)
            elif not view:              # (a view keeps its base's strides)
                o.laid_operands = 1
        return o
    return register


def _takes_keyword(fn, name):
    """Whether function ``fn`` has a keyword-only parameter ``name`` (read off its code: no
    ``inspect`` for each of the ops registered at import)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    start = code.co_argcount           # (positional-only ones included)
    return name in code.co_varnames[start:start + code.co_kwonlyargcount]


def _is_tensor(x):
    """Whether a flat input of a call (or as its node saved it) was a tensor, not a number."""
    t = type(x)
    if t is Tensor or t is InputMeta:
        return True
    return x is not None and t not in _NUMBERS and not isinstance(x, Number)


_NUMBERS = (int, float, bool, complex)


def _grad_fn_name(name):
    # PyTorch's codegen title-cases each part: a letter after a digit is upper (Log1PBackward0)
    return "".join(part.title() for part in name.strip("_").split("_")) + "Backward0"


def attach_methods():
    """Give Tensor a method (and in-place method) for every registered op that wants one."""
    for o in REGISTRY.values():
        if o.method_name and not hasattr(Tensor, o.method_name):
            setattr(Tensor, o.method_name, generate(o, "method"))
        name = (o.method_name or o.short_name) + "_"
        if o.inplace and not hasattr(Tensor, name):
            setattr(Tensor, name, generate(o, "inplace"))
