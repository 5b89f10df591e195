"""Hand-written public functions (``ember.cat``, ``F.dropout``) offered to ``__torch_function__``
as themselves, as PyTorch offers them: a handler sees ``func is torch.cat`` with the call's own
arguments, not the registry ops the function is written with.

NOTE [Guards of hand-written functions]: each such public name is replaced by a guard that
scans the arguments (one level into lists and tuples) for a type other than Tensor and the
plain Python scalars; only then does it look for a ``__torch_function__`` to offer the call
to. A plain call pays one Python frame and a few type tests. That frame is registered in
``_warn.HIDDEN``: a warning raised inside the function at the user's line passes
``stacklevel=_warn.user_level(n)``, which steps over it. Ember's own overriding types (sparse,
batched and dual tensors) keep receiving the registry ops the function is written with.
Torch function modes are routed apart (_switch.py), so the guard does not look at them.
"""

import functools
import sys

from ember._dtype import dtype as _dtype_type
from ember._tensor import Tensor
from ember._warn import HIDDEN
from ember.overrides._protocol import _offer_in_turn, _overloaded

__all__ = ["install_guards", "GUARDED"]

# the hand-written functions PyTorch lists as overridable, by namespace (the registry's ops are
# offered already)
GUARDED = {
    "": """cat concat concatenate stack hstack vstack dstack column_stack row_stack max min median
        nanmedian einsum meshgrid broadcast_tensors cdist tensordot chain_matmul block_diag
        cartesian_prod atleast_1d atleast_2d atleast_3d zeros_like ones_like full_like
        empty_like tile ravel rot90 fliplr flipud swapaxes cosine_similarity pairwise_distance
        hsplit vsplit dsplit unravel_index equal allclose dropout batch_norm layer_norm
        group_norm instance_norm adjoint alias_copy alpha_dropout as_strided_copy
        as_strided_scatter bernoulli bilinear binary_cross_entropy_with_logits binomial cholesky
        combinations corrcoef cosine_embedding_loss cov detach detach_copy diagflat
        diagonal_copy expand_copy feature_alpha_dropout feature_dropout float_power
        frobenius_norm get_device gradient grid_sampler grid_sampler_2d grid_sampler_3d gru
        gru_cell hinge_embedding_loss is_complex is_conj is_floating_point is_inference is_neg
        is_nonzero is_same_size is_signed istft kl_div lobpcg lstm lstm_cell lu_solve lu_unpack
        margin_ranking_loss max_pool1d max_pool2d max_pool3d multinomial narrow_copy
        native_dropout norm_except_dim nuclear_norm numel pdist permute_copy
        poisson poisson_nll_loss qr resolve_conj resolve_neg rms_norm rnn_relu rnn_relu_cell
        rnn_tanh rnn_tanh_cell rrelu select_copy select_scatter slice_copy slice_scatter
        split_copy split_with_sizes split_with_sizes_copy hspmm smm sspaddmm squeeze_copy stft svd
        sym_float sym_int sym_ite sym_max sym_min sym_not sym_sum t_copy transpose_copy
        triangular_solve triplet_margin_loss unbind_copy unfold_copy unsqueeze_copy
        view_as_complex_copy view_as_real_copy view_copy""",
    "nn.functional": """dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout
        normalize interpolate softmax log_softmax softmin relu relu6 leaky_relu elu selu celu
        silu mish hardtanh softsign tanhshrink threshold gumbel_softmax layer_norm batch_norm
        group_norm instance_norm rms_norm embedding max_pool1d max_pool2d max_pool3d
        adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d mse_loss l1_loss
        smooth_l1_loss huber_loss kl_div cosine_similarity pairwise_distance grid_sample
        affine_grid local_response_norm binary_cross_entropy_with_logits bilinear
        cosine_embedding_loss ctc_loss embedding_bag fractional_max_pool2d
        fractional_max_pool2d_with_indices fractional_max_pool3d
        fractional_max_pool3d_with_indices gaussian_nll_loss hinge_embedding_loss
        linear_cross_entropy lp_pool1d lp_pool2d lp_pool3d margin_ranking_loss max_unpool1d
        max_unpool2d max_unpool3d multi_head_attention_forward multi_margin_loss
        multilabel_margin_loss multilabel_soft_margin_loss pdist poisson_nll_loss rrelu
        soft_margin_loss triplet_margin_loss triplet_margin_with_distance_loss""",
}
# functions PyTorch writes in C++: "Multiple dispatch failed" when no handler takes the call
# (its Python functions say "no implementation found")
_NATIVE = {"": set(GUARDED[""].split()) - set("""einsum meshgrid broadcast_tensors cdist tensordot
               chain_matmul block_diag cartesian_prod atleast_1d atleast_2d atleast_3d
               unravel_index lobpcg stft sym_float sym_int sym_ite sym_max sym_min sym_not
               sym_sum""".split()),
           "nn.functional": {"cosine_similarity", "pairwise_distance", "bilinear", "pdist"}}

_PLAIN = frozenset((Tensor, int, float, bool, complex, str, type(None), _dtype_type))


def install_guards():
    """Replace each function of GUARDED, in every namespace that holds it, by its guard."""
    global _PLAIN
    import ember
    from ember._memory_format import memory_format
    from ember.nn.parameter import Parameter
    from ember.overrides._catalog import namespace_object
    # Parameter's __torch_function__ is the disabled one; the others have none, and a failed
    # hasattr on every call would cost as much as the rest of the scan
    _PLAIN = _PLAIN | {Parameter, ember.device, ember.Size, type(ember.strided), memory_format,
                       slice, type(Ellipsis)}
    made = {}
    for namespace in ("nn.functional", ""):
        owner = vars(namespace_object(namespace))
        for name in GUARDED[namespace].split():
            original = owner.get(name)
            if original is None or getattr(original, "_ember_guarded", False):
                continue
            native = name in _NATIVE[namespace]
            if (original, native) not in made:      # (torch.rrelu is native, F.rrelu is not)
                made[original, native] = _guard(
                    original, "ember." + namespace if namespace else "ember", native)
            owner[name] = made[original, native]
    _install_method_guards()
    extra = sys.modules.get("ember.functional")      # torch.functional.einsum is torch.einsum
    if extra is not None:
        owner = vars(extra)
        guards = {original: guard for (original, _), guard in made.items()}
        owner.update((name, guards[v]) for name, v in list(owner.items())
                     if callable(v) and not isinstance(v, type) and v in guards)


def _guard(original, module, native):
    """``original`` behind a check that offers calls with an overriding argument to
    ``__torch_function__`` (see NOTE [Guards of hand-written functions])."""
    @functools.wraps(original)
    def public(*args, **kwargs):
        for a in args:
            if type(a) not in _PLAIN and _may_override(a):
                return _offer(public, original, native, args, kwargs)
        if kwargs:
            for a in kwargs.values():
                if type(a) not in _PLAIN and _may_override(a):
                    return _offer(public, original, native, args, kwargs)
        return original(*args, **kwargs)
    public.__module__ = module
    public._ember_guarded = True
    HIDDEN.add(public.__code__)
    return public


def _may_override(value):
    cls = type(value)
    if cls is list or cls is tuple:
        for v in value:             # (a loop: a generator would cost more than the scan)
            if type(v) not in _PLAIN and hasattr(type(v), "__torch_function__"):
                return True
        return False
    return hasattr(cls, "__torch_function__")


def _offer(public, original, native, args, kwargs):
    flat = []
    for x in (*args, *kwargs.values()):
        flat.extend(x if isinstance(x, (list, tuple)) else (x,))
    overloaded = _overloaded(flat)
    if not overloaded or any(_wants_registry_ops(type(v), original) for v in overloaded):
        return original(*args, **kwargs)
    return _offer_in_turn(public, overloaded, tuple(type(v) for v in overloaded), args, kwargs,
                          native)


def _wants_registry_ops(cls, original):
    """Whether ``cls`` (one of ember's own overriding types) takes the registry ops
    ``original`` is written with rather than ``original`` itself, which it takes only when
    its ``_takes_functions`` names it."""
    return (getattr(cls, "_takes_registry_calls", False)
            and original.__name__ not in getattr(cls, "_takes_functions", ()))


# hand-written Tensor methods that take other tensors: a subclass as ``self`` is offered them by
# _subclass_entries.py; one among the other arguments (``x.view_as(sub)``), by these guards
GUARDED_METHODS = """expand_as type_as view_as reshape_as to equal allclose is_same_size
    is_set_to __setitem__"""


def _install_method_guards():
    for name in GUARDED_METHODS.split():
        original = vars(Tensor)[name]
        if not getattr(original, "_ember_guarded", False):
            setattr(Tensor, name, _method_guard(original))


def _method_guard(original):
    """``original`` (a Tensor method) behind a check of its arguments after ``self``."""
    @functools.wraps(original)
    def method(self, *args, **kwargs):
        for a in args:
            if type(a) not in _PLAIN and _may_override(a):
                return _offer(method, original, True, (self, *args), kwargs)
        if kwargs:
            for a in kwargs.values():
                if type(a) not in _PLAIN and _may_override(a):
                    return _offer(method, original, True, (self, *args), kwargs)
        return original(self, *args, **kwargs)
    method._ember_guarded = True
    HIDDEN.add(method.__code__)
    return method
