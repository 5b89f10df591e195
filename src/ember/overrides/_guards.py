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

# the most used hand-written functions, by namespace (the registry's ops are offered already)
GUARDED = {
    "": """cat concat concatenate stack hstack vstack dstack column_stack row_stack max min median
        nanmedian einsum meshgrid broadcast_tensors cdist tensordot chain_matmul block_diag
        cartesian_prod atleast_1d atleast_2d atleast_3d zeros_like ones_like full_like
        empty_like tile ravel rot90 fliplr flipud swapaxes cosine_similarity pairwise_distance
        hsplit vsplit dsplit unravel_index equal allclose dropout batch_norm layer_norm
        group_norm instance_norm""",
    "nn.functional": """dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout
        normalize interpolate softmax log_softmax softmin relu relu6 leaky_relu elu selu celu
        silu mish hardtanh softsign tanhshrink threshold gumbel_softmax layer_norm batch_norm
        group_norm instance_norm rms_norm embedding max_pool1d max_pool2d max_pool3d
        adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d mse_loss l1_loss
        smooth_l1_loss huber_loss kl_div cosine_similarity pairwise_distance grid_sample
        affine_grid local_response_norm binary_cross_entropy_with_logits""",
}
# functions PyTorch writes in C++: "Multiple dispatch failed" when no handler takes the call
# (its Python functions say "no implementation found")
_NATIVE = {"": set(GUARDED[""].split()) - set("""einsum meshgrid broadcast_tensors cdist tensordot
               chain_matmul block_diag cartesian_prod atleast_1d atleast_2d atleast_3d
               unravel_index""".split()),
           "nn.functional": {"cosine_similarity", "pairwise_distance"}}

_PLAIN = frozenset((Tensor, int, float, bool, complex, str, type(None), _dtype_type))


def install_guards():
    """Replace each function of GUARDED, in every namespace that holds it, by its guard."""
    from ember.overrides._catalog import namespace_object
    made = {}
    for namespace in ("nn.functional", ""):
        owner = vars(namespace_object(namespace))
        for name in GUARDED[namespace].split():
            original = owner.get(name)
            if original is None or getattr(original, "_ember_guarded", False):
                continue
            if original not in made:
                made[original] = _guard(original, "ember." + namespace if namespace else "ember",
                                        name in _NATIVE[namespace])
            owner[name] = made[original]
    extra = sys.modules.get("ember.functional")      # torch.functional.einsum is torch.einsum
    if extra is not None:
        owner = vars(extra)
        owner.update((name, made[v]) for name, v in list(owner.items())
                     if callable(v) and not isinstance(v, type) and v in made)


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
    if not overloaded or any(getattr(type(v), "_takes_registry_calls", False)
                             for v in overloaded):
        return original(*args, **kwargs)
    return _offer_in_turn(public, overloaded, tuple(type(v) for v in overloaded), args, kwargs,
                          native)
