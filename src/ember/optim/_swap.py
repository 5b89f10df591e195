"""``swap_in_optimizer_params_and_state``: run an optimizer for a while on other parameters
and state (``torch.optim.swap_in_optimizer_params_and_state``)."""

import contextlib
from collections import defaultdict

__all__ = ["swap_in_optimizer_params_and_state"]

_NAME = "swap_in_optimizer_params_and_state"


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters, swapin_optim_state):
    """Within the context, ``optimizer`` works on the tensors of ``swapin_parameters`` (in
    the order of its own parameters) with the state and group options of the
    state_dict-shaped ``swapin_optim_state`` (its state tensors shared, so in-place updates
    reach them); its own parameters, state and groups come back on exit."""
    if not optimizer.state:
        raise RuntimeError(f"{_NAME} requires initialized optimizer state.")
    state, groups = _checked_parts(optimizer, swapin_optim_state)
    params = list(swapin_parameters.values())
    if len(params) < sum(len(g["params"]) for g in optimizer.param_groups):
        raise RuntimeError(f"{_NAME} requires the explicit parameter state to match "
                           "optimizer.param_groups ordering.")
    saved_state = optimizer.state
    saved_groups = [dict(group) for group in optimizer.param_groups]
    swapped = defaultdict(dict)
    position = 0
    for group, theirs in zip(optimizer.param_groups, groups):
        ours = params[position:position + len(group["params"])]
        position += len(ours)
        for p, packed_id in zip(ours, theirs["params"]):
            swapped[p] = dict(state.get(packed_id, {}))
        group.update((k, v) for k, v in theirs.items() if k != "params")
        group["params"] = ours
    optimizer.state = swapped
    try:
        yield
    finally:
        optimizer.state = saved_state
        for group, saved in zip(optimizer.param_groups, saved_groups):
            group.clear()
            group.update(saved)


def _checked_parts(optimizer, swapin_optim_state):
    """``(state, param_groups)`` of ``swapin_optim_state``, or PyTorch's error for what does
    not fit ``optimizer``."""
    if not isinstance(swapin_optim_state, dict):
        raise RuntimeError(f"{_NAME} requires a DCP-style optimizer state_dict.")
    state = swapin_optim_state.get("state")
    if not isinstance(state, dict):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be a dict mapping "
                           "packed parameter ids to per-param state dicts, got "
                           f"{type(state).__name__}.")
    groups = swapin_optim_state.get("param_groups")
    if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['param_groups'] to be a list "
                           f"of param-group dicts, got {type(groups).__name__}.")
    if len(groups) != len(optimizer.param_groups):
        raise RuntimeError("swapin_optim_state has a different number of parameter groups "
                           "than the live optimizer.")
    for i, (ours, theirs) in enumerate(zip(optimizer.param_groups, groups)):
        if len(ours["params"]) != len(theirs["params"]):
            raise RuntimeError(f"swapin_optim_state param group {i} has a different number of "
                               "params than the live optimizer param group.")
    packed_ids = {pid for g in groups for pid in g["params"]}
    extra = [key for key in state if key not in packed_ids]
    if extra:
        raise RuntimeError(f"{_NAME} requires swapin_optim_state['state'] to be keyed only by "
                           "packed parameter ids from param_groups[*]['params']; got extra "
                           f"keys {extra}.")
    if not all(isinstance(entry, dict) for entry in state.values()):
        raise RuntimeError(f"{_NAME} requires per-parameter optimizer state entries to be "
                           "dictionaries.")
    return state, groups
