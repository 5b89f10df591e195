"""functional_call and stack_module_state: modules as functions of their state (ensembling)."""

from collections import Counter
from collections.abc import Sequence

from ember.nn.utils import stateless

__all__ = ["functional_call", "stack_module_state"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module`` with its parameters and buffers replaced by the given dict(s)
    (``torch.func.functional_call``); other entries keep the module's own tensors. A tensor
    the call rebinds (``self.n = self.n + 1``) is written back into a single dict given."""
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, Sequence):
        if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                             "dictionaries")
        counts = Counter(key for d in parameter_and_buffer_dicts for key in d)
        repeated = [key for key, n in counts.items() if n > 1]
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             f"functional call is ambiguous")
        merged = {key: value for d in parameter_and_buffer_dicts for key, value in d.items()}
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a list/tuple "
                         f"of dicts, but got {type(parameter_and_buffer_dicts)}")
    return stateless._functional_call(module, merged, args, kwargs, tie_weights=tie_weights,
                                      strict=strict)


def stack_module_state(models):
    """``(params, buffers)``: each parameter and buffer of ``models`` (a sequence, as
    torch's: it takes ``len``) stacked along a new dim 0, for ``vmap(functional_call)`` over an
    ensemble; a stacked tensor is a new leaf requiring grad where every model's does."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    return _stacked(models, "named_parameters"), _stacked(models, "named_buffers")


def _stacked(models, table):
    import ember
    tables = [dict(getattr(m, table)()) for m in models]
    out = {}
    for name in tables[0]:
        parts = [t[name] for t in tables]
        wanted = [p.requires_grad for p in parts]
        if any(wanted) and not all(wanted):
            raise RuntimeError(f"Expected {name} from each model to have the same "
                               f".requires_grad")
        out[name] = ember.stack([p.detach() for p in parts]).requires_grad_(all(wanted))
    return out
