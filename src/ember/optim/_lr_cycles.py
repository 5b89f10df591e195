"""Cyclical schedules that also cycle momentum: CyclicLR and OneCycleLR."""

import math
import types

from ember.optim.lr_scheduler import LRScheduler, _set_lr
from ember.optim.optimizer import Optimizer

__all__ = ["CyclicLR", "OneCycleLR"]

_MOMENTUM_ERROR = "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"


def _per_group(optimizer, name, value):
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has {n}.")
        return list(value)
    return [value] * n


def _set_momentum(group, momentum, use_beta1):
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


def _uses_beta1(optimizer):
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(_MOMENTUM_ERROR)
    return "betas" in optimizer.defaults


class CyclicLR(LRScheduler):
    """lr cycles between base_lr and max_lr (triangular, triangular2, exp_range or a
    custom scale_fn); momentum cycles inversely between max and base momentum."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        base_lrs = _per_group(optimizer, "base_lr", base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_lr(group, lr)
        self.max_lrs = _per_group(optimizer, "max_lr", max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _uses_beta1(optimizer)
            self.base_momentums = _per_group(optimizer, "base_momentum", base_momentum)
            self.max_momentums = _per_group(optimizer, "max_momentum", max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(self.max_momentums, self.base_momentums,
                                            optimizer.param_groups):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x):
        """The amplitude factor for cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        self._check_get_lr_call()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        fraction = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (high - base) * fraction * scale
               for base, high in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            momenta = [high - (high - low) * fraction * scale
                       for low, high in zip(self.base_momentums, self.max_momentums)]
            # strict, as PyTorch's: a group added since construction raises ValueError
            # once the groups the schedule knows have their momentum
            for group, momentum in zip(self.optimizer.param_groups, momenta, strict=True):
                _set_momentum(group, momentum, self.use_beta1)
        return lrs

    def state_dict(self):
        """Like the base; a custom scale function is kept as its attributes (None for
        plain functions), as PyTorch does."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = (None if fn is None or isinstance(fn, types.FunctionType)
                                     else dict(fn.__dict__))
        return state

    def load_state_dict(self, state_dict):
        """Restore the position; a custom scale function object gets its attributes back."""
        state_dict = dict(state_dict)
        attrs = state_dict.pop("_scale_fn_custom", None)
        self.__dict__.update(state_dict)
        if attrs is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(attrs)


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr warms up from max_lr / div_factor to max_lr over pct_start of
    the steps, then anneals to initial_lr / final_div_factor (three phases optionally);
    momentum moves the other way."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError("Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        if not 0 <= pct_start <= 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        n = self.total_steps
        if three_phase:
            self._schedule_phases = [
                _phase(float(pct_start * n) - 1, "initial_lr", "max_lr",
                       "max_momentum", "base_momentum"),
                _phase(float(2 * pct_start * n) - 2, "max_lr", "initial_lr",
                       "base_momentum", "max_momentum"),
                _phase(n - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
        else:
            self._schedule_phases = [
                _phase(float(pct_start * n) - 1, "initial_lr", "max_lr",
                       "max_momentum", "base_momentum"),
                _phase(n - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
        max_lrs = _per_group(optimizer, "max_lr", max_lr)
        if last_epoch == -1:
            for high, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = high / div_factor
                group["max_lr"] = high
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _uses_beta1(optimizer)
            highs = _per_group(optimizer, "max_momentum", max_momentum)
            lows = _per_group(optimizer, "base_momentum", base_momentum)
            if last_epoch == -1:
                for high, low, group in zip(highs, lows, optimizer.param_groups):
                    _set_momentum(group, high, self.use_beta1)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        self._check_get_lr_call()
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]],
                                            pct))
                    if self.cycle_momentum:
                        _set_momentum(group, self._anneal(group[phase["start_momentum"]],
                                                          group[phase["end_momentum"]], pct),
                                      self.use_beta1)
                    break
                start = phase["end_step"]
        return lrs


def _phase(end_step, start_lr, end_lr, start_momentum, end_momentum):
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}
