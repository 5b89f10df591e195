"""Which public functions take part in ``__torch_function__``: torch.overrides' helpers."""

import collections
import functools
import inspect

__all__ = ["get_ignored_functions", "get_overridable_functions", "get_testing_overrides",
           "resolve_name", "is_tensor_method_or_property", "NAMESPACES", "namespace_object",
           "unseen_by_modes"]

NAMESPACES = ("", "nn.functional", "linalg", "fft", "special", "Tensor")

# PyTorch's get_ignored_functions() (public functions __torch_function__ never takes), as
# far as ember has them, plus ember's functions PyTorch lists nowhere (set_default_dtype)
_IGNORED = {
    "": """arange are_deterministic_algorithms_enabled as_strided as_tensor asarray
        autocast_decrement_nesting autocast_increment_nesting bartlett_window blackman_window
        broadcast_shapes can_cast clear_autocast_cache compile cond empty empty_permuted
        empty_strided eye from_dlpack from_file from_numpy frombuffer full get_autocast_cpu_dtype
        get_autocast_dtype get_autocast_gpu_dtype get_default_device get_default_dtype
        get_deterministic_debug_mode get_device_module get_float32_matmul_precision
        get_num_interop_threads get_num_threads get_printoptions get_rng_state hamming_window
        hann_window init_num_threads initial_seed is_anomaly_check_nan_enabled is_anomaly_enabled
        is_autocast_available is_autocast_cache_enabled is_autocast_cpu_enabled is_autocast_enabled
        is_deterministic_algorithms_warn_only_enabled is_grad_enabled is_inference_mode_enabled
        is_storage is_tensor is_warn_always_enabled kaiser_window linspace load logspace manual_seed
        normal ones promote_types rand rand_like randint randint_like randn randn_like randperm
        range result_type save scalar_tensor seed set_anomaly_enabled set_autocast_cache_enabled
        set_autocast_cpu_dtype set_autocast_cpu_enabled set_autocast_dtype set_autocast_enabled
        set_autocast_gpu_dtype set_default_device set_default_dtype set_default_tensor_type
        set_deterministic_debug_mode set_float32_matmul_precision set_flush_denormal
        set_num_interop_threads set_num_threads set_printoptions set_rng_state set_warn_always
        sparse_compressed_tensor tensor to_dlpack tril_indices triu_indices typename
        use_deterministic_algorithms vander vmap while_loop zeros""",
    "nn.functional": "hardsigmoid hardswish sigmoid tanh upsample upsample_bilinear "
                     "upsample_nearest",
    "fft": "fftfreq rfftfreq",
    "Tensor": "__hash__ __init_subclass__ __iter__ __new__ __torch_function__ as_subclass new "
              "new_empty new_empty_strided new_full new_ones new_tensor new_zeros stride "
              "unflatten",
}
# the ignored functions that torch function modes see all the same (factories and the like)
_MODES_SEE = {
    "": """arange as_strided as_tensor asarray bartlett_window blackman_window can_cast empty
        empty_permuted empty_strided eye from_file full hamming_window hann_window kaiser_window
        linspace logspace normal ones promote_types rand rand_like randint randint_like randn
        randn_like randperm result_type scalar_tensor sparse_compressed_tensor tensor tril_indices
        triu_indices typename vander zeros""",
    "nn.functional": "hardsigmoid hardswish sigmoid tanh",
    "fft": "fftfreq rfftfreq",
    "Tensor": "new new_empty new_empty_strided new_full new_ones new_tensor new_zeros stride "
              "unflatten",
}


def namespace_object(namespace):
    """The module (or Tensor) a namespace name of NAMESPACES stands for."""
    import importlib

    import ember
    if namespace == "Tensor":
        return ember.Tensor
    return importlib.import_module(f"ember.{namespace}" if namespace else "ember")


def unseen_by_modes(namespace):
    """Names in ``namespace`` that torch function modes do not see."""
    return set(_IGNORED.get(namespace, "").split()) - set(_MODES_SEE.get(namespace, "").split())


def _original(func):
    from ember.overrides._switch import original_of
    return original_of(func)


def get_ignored_functions():
    """Public functions that cannot be overridden by ``__torch_function__``."""
    found = set()
    for namespace, names in _IGNORED.items():
        owner = namespace_object(namespace)
        found.update(_original(getattr(owner, n)) for n in names.split() if n in vars(owner))
    return found


def get_default_nowrap_functions():
    """The Tensor property getters whose results the default ``__torch_function__`` hands
    back as they are, not re-classed into the subclass (``_base``, ``grad``, ``_grad``)."""
    from ember._tensor import Tensor
    return {Tensor._base.__get__, Tensor.grad.__get__, Tensor._grad.__get__}


def get_overridable_functions():
    """``{namespace: [function]}`` of the functions ``__torch_function__`` can override (a
    Tensor property's getter is listed under the property, as in PyTorch)."""
    table = collections.defaultdict(list)
    for owner, _, func in _overridable():
        table[owner].append(func)
    return table


def get_testing_overrides():
    """``{function: lambda}``: a dummy with the function's signature, returning -1."""
    return {func: _dummy(func) for _, _, func in _overridable()}


def resolve_name(f):
    """The qualified name (``ember.Tensor.add``) of an overridable function, else None."""
    return _names().get(_original(f))


def is_tensor_method_or_property(func):
    """Whether ``func`` is a Tensor method or a Tensor property's getter."""
    if getattr(func, "__name__", None) == "__get__":
        return True
    import ember
    return any(_original(v) is _original(func) for v in vars(ember.Tensor).values())


def _overridable():
    """(namespace, qualified name, function) of every overridable function."""
    found = []
    for namespace in NAMESPACES:
        owner = namespace_object(namespace)
        ignored = set(_IGNORED.get(namespace, "").split())
        prefix = "ember." + (namespace + "." if namespace else "")
        for name, value in vars(owner).items():
            if name in ignored or name.startswith("_") and not (
                    namespace == "Tensor" and name.endswith("__")):
                continue
            if isinstance(value, property):
                value = getattr(value, "original", value)     # (a mode's stand-in)
                found.append((value, f"{prefix}{name}.__get__", value.__get__))
            elif callable(value) and not isinstance(value, (type, staticmethod, classmethod,
                                                            type(inspect))):
                found.append((owner, prefix + name, _original(value)))
    return found


@functools.cache
def _names():
    names = {}
    for _, name, func in _overridable():
        names.setdefault(func, name)
    return names


def _dummy(func):
    """A lambda with ``func``'s signature that returns -1."""
    if getattr(func, "__name__", None) == "__get__":
        return lambda self: -1
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return lambda *args, **kwargs: -1
    parts, defaults, kind = [], {}, None
    for p in parameters:
        if kind is p.POSITIONAL_ONLY and p.kind is not p.POSITIONAL_ONLY:
            parts.append("/")
        if p.kind is p.KEYWORD_ONLY and kind not in (p.VAR_POSITIONAL, p.KEYWORD_ONLY):
            parts.append("*")
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        if p.default is not p.empty:
            defaults[f"_d{len(defaults)}"] = p.default
            text += f"=_d{len(defaults) - 1}"
        parts.append(text)
        kind = p.kind
    if kind is inspect.Parameter.POSITIONAL_ONLY:
        parts.append("/")
    return eval(f"lambda {', '.join(parts)}: -1", defaults)
