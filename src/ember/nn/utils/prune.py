"""Pruning (``torch.nn.utils.prune``): pruning ``module.<name>`` moves the parameter to
``<name>_orig``, keeps a 0/1 buffer ``<name>_mask``, and makes ``module.<name>`` a plain tensor
``<name>_orig * <name>_mask``, recomputed before every forward by the pruning method itself,
registered as a forward pre-hook. Successive prunings of one tensor combine in a
``PruningContainer``; ``remove`` makes the pruning permanent."""

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import ember
from ember.nn.utils.convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class BasePruningMethod(ABC):
    """Base class of pruning methods: a subclass defines ``compute_mask``; an instance bound to
    a tensor name is the forward pre-hook that re-applies the mask."""

    _tensor_name: str

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for ``t``, given the mask it already has (``default_mask``)."""

    def apply_mask(self, module):
        """The pruned tensor ``<name>_orig * <name>_mask`` of ``module``."""
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)`` (combined with earlier prunings
        of it), ranking entries by ``importance_scores`` (default: the tensor itself)."""
        method = _composite_method(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is not None:
            assert importance_scores.shape == orig.shape, (
                f"importance_scores should have the same shape as parameter {name} of "
                f"{module}, got {importance_scores.shape} vs {orig.shape}")
        else:
            importance_scores = orig
        if not isinstance(method, PruningContainer):
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ember.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone(
                memory_format=ember.contiguous_format)
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            # A first pruning that failed leaves the parameter where it was; as in PyTorch, a
            # failed re-pruning leaves the old hook off.
            if not isinstance(method, PruningContainer):
                module.register_parameter(name, module._parameters.pop(name + "_orig"))
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times the mask this method computes for it (no module involved)."""
        if importance_scores is not None:
            assert importance_scores.shape == t.shape, (
                f"importance_scores should have the same shape as tensor t, got "
                f"{importance_scores.shape} vs {t.shape}")
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else ember.ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: ``module.<name>`` becomes the parameter (the same object
        as ``<name>_orig``) holding the pruned values; ``_orig`` and ``_mask`` go away."""
        name = self._tensor_name
        weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


def _composite_method(cls, module, name, *args, **kwargs):
    """``cls(*args, **kwargs)`` bound to ``name``, put in a container after the method already
    pruning ``module.<name>`` (whose hook is taken off: the result replaces it)."""
    old = [(key, hook) for key, hook in module._forward_pre_hooks.items()
           if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    assert len(old) <= 1, (f"Avoid adding multiple pruning hooks to the same tensor {name} of "
                           f"module {module}. Use a PruningContainer.")
    for key, _ in old:
        del module._forward_pre_hooks[key]
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if old:
        container = old[0][1]
        if not isinstance(container, PruningContainer):
            container = PruningContainer(container)
        container.add_pruning_method(method)
        method = container
    return method


class PruningContainer(BasePruningMethod):
    """The successive pruning methods applied to one tensor; its mask is the last method's,
    computed on the entries (or channels) the earlier ones kept."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Append ``method`` (which must act on this container's tensor)."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """``default_mask`` with the last method's mask written over the part still unpruned:
        the kept entries (unstructured), the kept channels (structured) or all (global)."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            slc = default_mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to '
                                     'have the attribute `dim` defined.')
            ndim = t.dim()
            dim = method.dim + ndim if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {ndim}")
            kept = default_mask.sum(dim=[d for d in range(ndim) if d != dim]) != 0
            if dim >= ndim:             # (PyTorch's slice list has no such entry)
                raise IndexError("list assignment index out of range")
            slc = tuple(kept if d == dim else slice(None) for d in range(ndim))
        elif kind == "global":
            slc = (slice(None),) * t.dim()
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        partial = method.compute_mask(t[slc], default_mask=default_mask[slc])
        mask[slc] = partial.to(dtype=mask.dtype)
        return mask


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        """The mask unchanged."""
        return default_mask

    @classmethod
    def apply(cls, module, name):
        """Reparametrize ``module.<name>`` with an all-ones mask."""
        return super().apply(module, name)


class _Unstructured(BasePruningMethod):
    """Prunes ``amount`` entries (a count, or a fraction of the tensor): those ``_scores``
    ranks lowest."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        """``default_mask`` with the ``amount`` lowest-scored entries zeroed."""
        nprune = _count_to_prune(self.amount, t.nelement())
        mask = default_mask.clone(memory_format=ember.contiguous_format)
        if nprune != 0:
            mask.view(-1)[_topk_indices(self._scores(t).reshape(-1), nprune, largest=False)] = 0
        return mask


class RandomUnstructured(_Unstructured):
    """Prunes ``amount`` entries (a count, or a fraction of the tensor) chosen at random."""

    @staticmethod
    def _scores(t):
        return ember.rand_like(t)

    @classmethod
    def apply(cls, module, name, amount):
        """Prune ``amount`` random entries of ``module.<name>``."""
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes the ``amount`` entries (a count, or a fraction) of smallest absolute value."""

    @staticmethod
    def _scores(t):
        return ember.abs(t)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        """Prune the ``amount`` smallest-magnitude entries of ``module.<name>``."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Prunes ``amount`` whole channels along ``dim`` (a count, or a fraction): all but those
    ``_kept`` chooses."""

    PRUNING_TYPE = "structured"

    def compute_mask(self, t, default_mask):
        """``default_mask`` with the pruned channels along ``dim`` zeroed."""
        size = _channels(t, self.dim)
        nprune = _count_to_prune(self.amount, size)
        keep = self._kept(t, size, nprune)
        if nprune == 0:
            return default_mask
        mask = _channel_mask(t, self.dim, keep)
        mask *= default_mask.to(dtype=mask.dtype)
        return mask


class RandomStructured(_Structured):
    """Prunes ``amount`` whole channels along ``dim`` (a count, or a fraction), at random."""

    def __init__(self, amount, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    @staticmethod
    def _kept(t, size, nprune):
        if nprune == 0:
            return None
        prob = ember.rand(size, device=t.device)
        return prob > ember.kthvalue(prob, k=nprune).values

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        """Prune ``amount`` random channels of ``module.<name>`` along ``dim``."""
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the ``amount`` channels along ``dim`` (a count, or a fraction) of smallest
    ``n``-norm (``n`` as the ``p`` of ``ember.norm``)."""

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def _kept(self, t, size, nprune):
        # the norm comes first even when nothing is pruned: a bad ``n`` raises, as in PyTorch
        dim = self.dim % t.dim()
        norm = ember.norm(t, p=self.n, dim=[d for d in range(t.dim()) if d != dim])
        return _topk_indices(norm, size - nprune, largest=True)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest norm."""
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given ``mask`` is zero."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        """``default_mask`` times the given mask."""
        assert default_mask.shape == self.mask.shape, (
            f"default_mask shape {default_mask.shape} must match self.mask shape "
            f"{self.mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        """Prune ``module.<name>`` where ``mask`` is zero."""
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Reparametrize ``module.<name>`` as pruned, with an all-ones mask; returns ``module``."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune ``amount`` random entries of ``module.<name>``; returns ``module``."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` of smallest magnitude (or smallest
    ``importance_scores``); returns ``module``."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``; returns
    ``module``."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` of smallest ``n``-norm
    (of ``importance_scores`` when given); returns ``module``."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the ``(module, name)`` pairs of ``parameters`` together, as one tensor, with the
    unstructured ``pruning_method(**kwargs)``; scores from ``importance_scores`` (a dict keyed
    by the pairs) where given."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    parameters = list(parameters)
    scores = parameters_to_vector([importance_scores.get((module, name), getattr(module, name))
                                   for module, name in parameters])
    default_mask = parameters_to_vector([
        getattr(module, name + "_mask", ember.ones_like(getattr(module, name)))
        for module, name in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        custom_from_mask(module, name, final_mask[start:start + param.numel()].view_as(param))
        start += param.numel()


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` where ``mask`` is zero; returns ``module``."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent (see ``BasePruningMethod.remove``);
    returns ``module``."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     f"can be removed")


def is_pruned(module):
    """Whether ``module`` or any of its submodules has a pruning hook."""
    return any(isinstance(hook, BasePruningMethod) for _, sub in module.named_modules()
               for hook in sub._forward_pre_hooks.values())


# ----- helpers ---------------------------------------------------------------------------------

def _check_amount(amount):
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral)
            and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         f"non-negative integer")


def _count_to_prune(amount, size):
    """How many of ``size`` entries (or channels) ``amount`` prunes: itself when an int, else
    that fraction of ``size``, rounded; more than ``size`` raises PyTorch's ValueError."""
    nprune = amount if isinstance(amount, numbers.Integral) else round(amount * size)
    if nprune > size:
        raise ValueError(f"amount={nprune} should be smaller than the number of parameters to "
                         f"prune={size}")
    return nprune


def _channels(t, dim):
    """The number of channels of ``t`` along ``dim``, for structured pruning."""
    if t.dim() <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {t.shape} with {t.dim()} dims")
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")
    return t.shape[dim]


def _channel_mask(t, dim, keep):
    """A mask shaped like ``t``: ones on the channels ``keep`` (indices or bools) along
    ``dim``, zeros elsewhere."""
    mask = ember.zeros_like(t)
    mask[tuple(keep if d == dim % t.dim() else slice(None) for d in range(t.dim()))] = 1
    return mask


def _topk_indices(values, k, largest):
    """Indices of the ``k`` largest (smallest) entries of 1-D ``values``. Of equal entries at
    the cut, ember's topk takes the lowest indices; PyTorch's CPU topk leaves that choice to
    its C++ selection algorithm, so which of several tied weights is pruned may differ."""
    if isinstance(k, bool):
        raise TypeError("topk(): argument 'k' must be int, not bool")
    return ember.topk(values, k, largest=largest).indices
