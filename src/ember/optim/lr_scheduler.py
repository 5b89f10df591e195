"""Learning-rate schedules (``torch.optim.lr_scheduler``).

A scheduler sets ``group["lr"]`` of its optimizer's groups at each ``step()``. Most are
written twice, as PyTorch documents them: ``get_lr`` in chainable form (from the current
lr, so schedulers compose) and ``_get_closed_form_lr`` (from the base lr and the epoch),
which a ``step(epoch)`` call (also of a user's subclass defining it) and the tests use.
"""

import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter

from ember._tensor import Tensor
from ember.optim.optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
           "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR", "ReduceLROnPlateau",
           "SequentialLR", "ChainedScheduler"]

_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
    "later, you should call them in the opposite order: `optimizer.step()` before "
    "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first "
    "value of the learning rate schedule. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")
_OVERRIDDEN_WARNING = (
    "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
    "initialization. Please, make sure to call `optimizer.step()` before "
    "`lr_scheduler.step()`. See more details at "
    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate")
_EPOCH_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the "
    "new chainable form, where available. Please open an issue if you are unable to "
    "replicate your use case: https://github.com/pytorch/pytorch/issues/new/choose.")
EPOCH_DEPRECATION_WARNING = _EPOCH_WARNING      # (PyTorch's name; custom schedulers warn it)


def _set_lr(group, lr):
    if isinstance(group["lr"], Tensor):
        group["lr"].fill_(lr)
    else:
        group["lr"] = lr


def _lr(group):
    """The group's lr as a schedule computes from it: a float32 or float64 tensor's as a NumPy
    scalar of its dtype, so that each operation rounds to it as PyTorch's arithmetic on the
    tensor does (``lr * 0.9`` of a float32 lr is float32 times float32(0.9)) and the result
    is no Python float (``_chained`` tells them so); a 16-bit one's as a copy of the tensor
    (PyTorch computes it in float32 with the Python number unrounded, which NumPy's 16-bit
    scalars do not)."""
    return _lr_value(group["lr"])


def _lr_value(lr):
    if not isinstance(lr, Tensor):
        return lr
    if lr.dtype.is_floating_point:
        return lr.dtype.np.type(lr.item()) if lr.dtype.itemsize >= 4 else lr.clone()
    return lr.item()


def _last_lrs(optimizer):
    """The groups' lrs as ``get_last_lr()`` gives them: a tensor lr as a copy of it."""
    return [g["lr"].clone() if isinstance(g["lr"], Tensor) else g["lr"]
            for g in optimizer.param_groups]


class LRScheduler:
    """Base class: holds the optimizer, ``base_lrs`` and ``last_epoch``; ``step()``
    advances the epoch and writes ``get_lr()`` into the groups."""

    _get_lr_called_within_step = False      # (set by step() on the instance)

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                initial = group["lr"]
                group.setdefault("initial_lr",
                                 initial.clone() if isinstance(initial, Tensor) else initial)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming scheduler with last_epoch >= 0.\nThis typically happens "
                        "when:\n1. You're trying to resume training from a checkpoint but "
                        "haven't properly loaded the optimizer state\n2. You're using "
                        "last_epoch >= 0 for a fresh training run (not recommended)")
        self.base_lrs = [_copy(group["initial_lr"]) for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        _track_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        self.step()
        self._is_initial = False

    def state_dict(self):
        """Everything but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore the schedule's position from ``state_dict``."""
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The learning rates this scheduler set last, one per group."""
        return self._last_lr

    def get_lr(self):
        """The learning rates for the current epoch (chainable form)."""
        raise NotImplementedError

    def _check_get_lr_call(self):
        if not self.__dict__.get("_get_lr_called_within_step", False):
            warnings.warn("To get the last learning rate computed by the scheduler, please "
                          "use `get_last_lr()`.", UserWarning, stacklevel=3)

    def step(self, epoch=None):
        """Advance one epoch (or jump to ``epoch``, deprecated) and set the groups' lrs."""
        if self._step_count == 1:
            if not getattr(self.optimizer.step, "_wrapped_by_lr_sched", False):
                warnings.warn(_OVERRIDDEN_WARNING, UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(_ORDER_WARNING, UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        """Advance one epoch (or jump to ``epoch``) and set the groups' lrs, uncounted:
        SequentialLR restarts a scheduler at its milestone with ``_update_lr(0)``."""
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                values = (self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr")
                          else self.get_lr())
        finally:
            self._get_lr_called_within_step = False
        # strict, as PyTorch's: a group added after the scheduler raises ValueError where the
        # values come from base_lrs (closed forms, LambdaLR, restarts, cycles)
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            old = group["lr"]           # (_set_lr inlined: the per-step path)
            if isinstance(old, Tensor):
                old.fill_(lr)
            else:
                group["lr"] = lr
        self._last_lr = _last_lrs(self.optimizer)

    def _current(self):
        lrs = [group["lr"] for group in self.optimizer.param_groups]
        for lr in lrs:
            if lr.__class__ is not float:
                return [_lr_value(lr) for lr in lrs]
        return lrs

    def _chained(self, values):
        """Chainable ``values`` as PyTorch's ``get_lr`` gives them: one computed from a tensor
        lr as a tensor of its dtype and device (the value, rounded as computed, unchanged).
        Within ``step()``, which only writes them into the groups, and where Python floats
        (which come only from float lrs, see ``_lr``) they return at once, as computed."""
        if self._get_lr_called_within_step:
            return values
        for value in values:
            if value.__class__ is not float:
                break
        else:
            return values
        for i, group in enumerate(self.optimizer.param_groups):
            lr = group["lr"]
            if isinstance(lr, Tensor) and not isinstance(values[i], Tensor):
                values[i] = lr.new_tensor(values[i])
        return values


class _LRScheduler(LRScheduler):
    """The old name of ``LRScheduler``, still subclassed by older code."""


def _copy(lr):
    """An lr as PyTorch keeps it in ``base_lrs``: a tensor cloned, a number as is."""
    return lr.clone() if isinstance(lr, Tensor) else lr


def _value(x):
    return x.item() if isinstance(x, Tensor) else x


def _track_optimizer_steps(optimizer):
    """Wrap ``optimizer.step`` once so schedulers can tell whether it ran before them."""
    if getattr(optimizer.step, "_wrapped_by_lr_sched", False):
        return
    step = optimizer.step.__func__
    ref = weakref.ref(optimizer)

    def wrapper(*args, **kwargs):
        opt = ref()
        opt._opt_called = True
        return step(opt, *args, **kwargs)
    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper
    optimizer._opt_called = False


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch), one function per group or one for all."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _per_group(optimizer, lr_lambda, "lr_lambdas")
        super().__init__(optimizer, last_epoch)

    def state_dict(self):
        """Like the base, with callable objects' attributes instead of the functions."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        """Restore the position; callable objects get their attributes back."""
        state_dict = dict(state_dict)
        lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, attrs in zip(self.lr_lambdas, lambdas):
            if attrs is not None:
                fn.__dict__.update(attrs)

    def get_lr(self):
        self._check_get_lr_call()
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]


def _per_group(optimizer, value, name):
    n = len(optimizer.param_groups)
    if not isinstance(value, (list, tuple)):
        return [value] * n
    if len(value) != n:
        raise ValueError(f"Expected {n} {name}, but got {len(value)}")
    return list(value)


class MultiplicativeLR(LRScheduler):
    """lr *= lr_lambda(epoch) at each step after the first."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _per_group(optimizer, lr_lambda, "lr_lambdas")
        for fn in self.lr_lambdas:      # (checked here, unlike LambdaLR's, as PyTorch does)
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    state_dict = LambdaLR.state_dict
    load_state_dict = LambdaLR.load_state_dict

    def get_lr(self):
        self._check_get_lr_call()
        if not self._is_initial:
            return self._chained([lr * fn(self.last_epoch) for fn, lr
                                  in zip(self.lr_lambdas, self._current(), strict=True)])
        return self._chained(self._current())


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._check_get_lr_call()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._chained(self._current())
        return self._chained([lr * self.gamma for lr in self._current()])

    def _get_closed_form_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones reached)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._check_get_lr_call()
        if self.last_epoch not in self.milestones:
            return self._chained(self._current())
        factor = self.gamma ** self.milestones[self.last_epoch]
        return self._chained([lr * factor for lr in self._current()])

    def _get_closed_form_lr(self):
        reached = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** reached for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = base_lr * factor until total_iters, then base_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._check_get_lr_call()
        if self.last_epoch == 0:
            return self._chained([lr * self.factor for lr in self._current()])
        if self.last_epoch != self.total_iters:
            return self._chained(self._current())
        return self._chained([lr * (1.0 / self.factor) for lr in self._current()])

    def _get_closed_form_lr(self):
        done = self.last_epoch >= self.total_iters
        return [base * (self.factor + done * (1 - self.factor)) for base in self.base_lrs]


class LinearLR(LRScheduler):
    """lr moves linearly from base_lr * start_factor to base_lr * end_factor over
    total_iters steps."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._check_get_lr_call()
        if self.last_epoch == 0:
            return self._chained([lr * self.start_factor for lr in self._current()])
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._chained(self._current())
        span = self.end_factor - self.start_factor
        factor = 1.0 + span / (self.total_iters * self.start_factor
                               + (self.last_epoch - 1) * span)
        return self._chained([lr * factor for lr in self._current()])

    def _get_closed_form_lr(self):
        # (the float span times the epoch, then divided: PyTorch's rounding, and its "float
        # division by zero" when total_iters is 0)
        span = self.end_factor - self.start_factor
        reached = min(self.total_iters, self.last_epoch)
        return [base * (self.start_factor + span * reached / self.total_iters)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._check_get_lr_call()
        if self._is_initial:
            return self._chained(self._current())
        return self._chained([lr * self.gamma for lr in self._current()])

    def _get_closed_form_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._check_get_lr_call()
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._chained(self._current())
        factor = ((1.0 - self.last_epoch / self.total_iters)
                  / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return self._chained([lr * factor for lr in self._current()])

    def _get_closed_form_lr(self):
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (1.0 - frac) ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._check_get_lr_call()
        t, T, lo = self.last_epoch, self.T_max, self.eta_min  # noqa: N806
        if self._is_initial:
            return self._chained(self._current())
        if self._step_count == 1 and t > 0:
            return [lo + (base - lo) * (1 + math.cos(t * math.pi / T)) / 2
                    for base in self.base_lrs]
        if (t - 1 - T) % (2 * T) == 0:
            return self._chained([lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                                  for base, lr in zip(self.base_lrs, self._current(), strict=True)])
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return self._chained([ratio * (lr - lo) + lo for lr in self._current()])

    def _get_closed_form_lr(self):
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every T_i epochs (T_0, then times T_mult)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):  # noqa: N803
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        self._check_get_lr_call()
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base in self.base_lrs]

    def step(self, epoch=None):
        """Advance one step (fractional ``epoch`` values are allowed)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        # PyTorch's restarts step neither counts calls (_step_count stays 0) nor warns
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            _set_lr(group, lr)
        self._last_lr = _last_lrs(self.optimizer)


class ReduceLROnPlateau(LRScheduler):
    """Multiply lr by ``factor`` when a metric has stopped improving for ``patience``
    epochs; ``step(metric)`` takes the metric."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        self.factor = factor
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got "
                                 f"{len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _last_lrs(self.optimizer)
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        """Whether metric ``a`` improves on ``best`` by more than the threshold."""
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if rel else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if rel else best + self.threshold)

    def step(self, metrics, epoch=None):
        """Record this epoch's metric and reduce the lr if it has plateaued."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _last_lrs(self.optimizer)

    def _reduce_lr(self):
        """Multiply each group's lr by ``factor``, not below its min_lr; a group added since
        construction gets the scalar min_lr (a per-group list cannot say)."""
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), "
                    "usually due to a new param group being added to the optimizer. Please "
                    "modify the `min_lrs` field to match the length of the `optimizer` param "
                    "groups.")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old = _value(group["lr"])       # (a Python float, as PyTorch's float(lr))
            new = max(old * self.factor, min_lr)
            if old - new > self.eps:
                _set_lr(group, new)

    def load_state_dict(self, state_dict):
        """Restore the plateau detector's state; its worst value follows the loaded mode
        (checked, with the threshold mode, as at construction)."""
        self.__dict__.update(state_dict)
        if self.mode not in ("min", "max"):
            raise ValueError("mode " + self.mode + " is unknown!")
        if self.threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + self.threshold_mode + " is unknown!")
        self.mode_worse = math.inf if self.mode == "min" else -math.inf


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at each of ``milestones``."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        name = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{name} expects at least one scheduler, but got no scheduler.")
        for i, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise TypeError(f"{name} at index {i} should have `optimizer` as its "
                                "attribute.")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(f"{name} does not support `ReduceLROnPlateau` scheduler as it "
                                 "requires additional kwargs to be specified when calling "
                                 f"`step`, but got one at index {i} in the given schedulers "
                                 "sequence.")
            if optimizer is not scheduler.optimizer:
                raise ValueError(f"{name} expects all schedulers to belong to the same "
                                 f"optimizer, but got scheduler {type(scheduler).__name__} at "
                                 f"index {i} has {scheduler.optimizer}, which is different "
                                 f"from {type(optimizer).__name__}.")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to "
                             "be one more than the number of milestone points, but got number "
                             f"of schedulers {len(schedulers)} and the number of milestones to "
                             f"be equal to {len(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            _set_lr(group, _value(group["initial_lr"]))
        self.recursive_undo()
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched=None):
        """Undo the step each scheduler (``sched``'s, by default this one's) took when
        constructed, going into the schedulers that hold schedulers."""
        sched = self if sched is None else sched
        if hasattr(sched, "_schedulers"):
            for inner in sched._schedulers:
                self.recursive_undo(inner)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self):
        """Step the scheduler in charge of this epoch (restarting it at its milestone)."""
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        """Its own position and each scheduler's state."""
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        """Restore its position and each scheduler's state."""
        state_dict = dict(state_dict)
        inner = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for scheduler, state in zip(self._schedulers, inner):
            scheduler.load_state_dict(state)


class ChainedScheduler(LRScheduler):
    """Step every scheduler in ``schedulers`` at each step (their factors compose)."""

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be "
                             "chained, but got no scheduler.")
        for i, scheduler in enumerate(schedulers):
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(f"{type(self).__name__} does not support `ReduceLROnPlateau` "
                                 "scheduler as it requires additional kwargs to be specified "
                                 "when calling `step`, but got one at index "
                                 f"{i} in the given schedulers sequence.")
        optimizer = optimizer or schedulers[0].optimizer
        for i, scheduler in enumerate(schedulers):
            if scheduler.optimizer is not optimizer:
                raise ValueError(f"{type(self).__name__} expects all schedulers to belong to "
                                 f"the same optimizer, but got scheduler "
                                 f"{type(scheduler).__name__} at index {i} has "
                                 f"{scheduler.optimizer}, which is different from "
                                 f"{type(optimizer).__name__}.")
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = _last_lrs(self.optimizer)

    def step(self):
        """Step each scheduler in order."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _last_lrs(self.optimizer)

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict


from ember.optim._lr_cycles import CyclicLR, OneCycleLR  # noqa: E402
