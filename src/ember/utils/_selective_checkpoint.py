"""Selective activation checkpointing's API (``torch.utils.checkpoint``'s
``create_selective_checkpoint_contexts``, ``CheckpointPolicy``).

PyTorch's contexts intercept each op of the checkpointed forward, ask the policy whether to
save its output or recompute it, and replay saved outputs during recomputation. ember's
contexts accept the same policies but recompute every op: the gradients are the same, only
the memory/compute trade-off is that of a plain non-reentrant checkpoint."""

import contextlib
import enum

__all__ = ["CheckpointPolicy", "SelectiveCheckpointContext",
           "create_selective_checkpoint_contexts", "SAC_IGNORED_OPS"]

SAC_IGNORED_OPS = set()         # ops PyTorch never caches; ember caches none


class CheckpointPolicy(enum.Enum):
    """What a selective-checkpoint policy decides for one op's output."""

    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


class SelectiveCheckpointContext:
    """The context a policy function receives: whether the op runs in the recomputation."""

    def __init__(self, *, is_recompute, op_output=None):
        self.is_recompute = is_recompute
        self.op_output = op_output


def create_selective_checkpoint_contexts(policy_fn_or_list, allow_cache_entry_mutation=False):
    """The ``(forward, recompute)`` context managers for ``checkpoint(context_fn=...)``, from
    a policy function or a list of ops to save (ember recomputes every op; see the module
    docstring)."""
    if isinstance(policy_fn_or_list, list):
        for op in policy_fn_or_list:
            if not callable(op):
                raise ValueError(f"Expected op in `op_list` to be an OpOverload but got: {op} "
                                 f"of type {type(op)}. ")
    elif not callable(policy_fn_or_list):
        raise TypeError("policy_fn_or_list must be either a function or a list of ops.")
    return contextlib.nullcontext(), contextlib.nullcontext()
