"""Weight averaging: AveragedModel (SWA and EMA), SWALR and update_bn
(``torch.optim.swa_utils``)."""

import copy
import itertools
import math

import ember
from ember.nn.modules.module import Module
from ember.optim.lr_scheduler import LRScheduler, _copy, _lr

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if not 0.0 <= decay <= 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         f"[0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place exponential moving average over lists of tensors."""
    _check_decay(decay)
    def ema_update(ema_params, current_params, num_averaged):
        # as PyTorch, the first tensor picks the update for the list (AveragedModel passes
        # lists of one dtype): lerp for floats, else the average truncated back
        with ember.no_grad():
            if ema_params[0].is_floating_point() or ema_params[0].is_complex():
                ember._foreach_lerp_(ema_params, current_params, 1 - decay)
                return
            for ema, current in zip(ema_params, current_params):
                ema.copy_(ema * decay + current * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """An in-place running mean over lists of tensors."""
    def swa_update(averaged_params, current_params, num_averaged):
        # as PyTorch, the first tensor picks the update for the list: a lerp by 1 / (n + 1)
        # (a float32 tensor when n is one), else the mean of integers, which foreach refuses
        with ember.no_grad():
            first = averaged_params[0]
            if first.is_floating_point() or first.is_complex():
                ember._foreach_lerp_(averaged_params, current_params, 1 / (num_averaged + 1))
                return
            diffs = ember._foreach_sub(current_params, averaged_params)
            if isinstance(num_averaged, ember.Tensor):
                raise RuntimeError(_INTEGER_ADDCDIV)        # PyTorch's foreach addcdiv's
            ember._foreach_add_(averaged_params, diffs, alpha=1 / (num_averaged + 1))
    return swa_update


_INTEGER_ADDCDIV = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
    "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
    "be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
    "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
    "addcdiv behavior is just the latter implementation: (input + value * tensor1 / "
    "tensor2), for all dtypes.")


def get_ema_avg_fn(decay=0.999):
    """``decay * ema + (1 - decay) * current`` for one tensor."""
    _check_decay(decay)
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """The running mean update for one tensor."""
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters (and buffers with ``use_buffers``) average the
    model's over calls of ``update_parameters``: SWA by default, EMA with
    ``multi_avg_fn=get_ema_multi_avg_fn(decay)``."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", ember.tensor(0, dtype=ember.long, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """Call the averaged copy."""
        return self.module(*args, **kwargs)

    def _tensors(self, model):
        if self.use_buffers:
            return list(itertools.chain(model.parameters(), model.buffers()))
        return list(model.parameters())

    def update_parameters(self, model):
        """Fold ``model``'s current values into the average."""
        mine = [t.detach() for t in self._tensors(self.module)]
        theirs = [t.detach().to(m.device) for t, m in zip(self._tensors(model), mine)]
        n = self.n_averaged
        with ember.no_grad():
            if n.item() == 0:
                for avg, current in zip(mine, theirs):
                    avg.copy_(current)
            elif self.multi_avg_fn is not None:
                # one call per device and dtype, the last-seen group first, as PyTorch's
                groups = {}
                for avg, current in zip(mine, theirs):
                    group = groups.setdefault((avg.device, avg.dtype), ([], []))
                    group[0].append(avg)
                    group[1].append(current)
                for (device, _), (avgs, currents) in reversed(groups.items()):
                    self.multi_avg_fn(avgs, currents, n.to(device))
            else:       # an integer buffer gets the running mean truncated, as on CPU
                avg_fn = self.avg_fn or get_swa_avg_fn()
                for avg, current in zip(mine, theirs):
                    avg.copy_(avg_fn(avg, current, n))
            if not self.use_buffers:
                for avg, current in zip(self.module.buffers(), model.buffers()):
                    avg.detach().copy_(current.detach().to(avg.device))
            n.add_(1)


class SWALR(LRScheduler):
    """Anneal each group's lr to its ``swa_lr`` over ``anneal_epochs`` (cosine or linear),
    then hold it."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        groups = optimizer.param_groups
        swa_lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(groups)
        if len(swa_lrs) != len(groups):
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups. "
                             f"swa_lr has {len(swa_lrs)} values, param_groups has "
                             f"{len(groups)}.")
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = _copy(lr)         # (a tensor cloned per group, as PyTorch's)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self._set_anneal_func(anneal_strategy)
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = _cos_anneal if anneal_strategy == "cos" else _linear_anneal

    def state_dict(self):
        """Everything but the optimizer and the annealing function (its name stays)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        """Restore the position and the annealing function named in ``state_dict``."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)

    def get_lr(self):
        self._check_get_lr_call()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        alpha = self.anneal_func(max(0, min(1, step / span)))
        out = []
        within_step = self.__dict__.get("_get_lr_called_within_step")  # (only sets the lrs)
        for group in self.optimizer.param_groups:
            swa = group["swa_lr"]
            # a tensor swa_lr: the tensor lr itself, promoting with it as PyTorch's
            lr = group["lr"] if isinstance(swa, ember.Tensor) else _lr(group)
            start = swa if prev_alpha == 1 else (lr - prev_alpha * swa) / (1 - prev_alpha)
            lr = swa * alpha + start * (1 - alpha)
            # from a tensor lr a tensor of its dtype, as PyTorch's; from swa_lr alone as it is
            if prev_alpha != 1 and isinstance(group["lr"], ember.Tensor) \
                    and not isinstance(lr, ember.Tensor) and not within_step:
                lr = group["lr"].new_tensor(lr)
            out.append(lr)
        return out


def _cos_anneal(t):
    return (1 - math.cos(math.pi * t)) / 2


def _linear_anneal(t):
    return t


@ember.no_grad()
def update_bn(loader, model, device=None):
    """Recompute every batch-norm layer's running statistics with one pass over ``loader``
    (cumulative averages, as after SWA); instance norms keep theirs, as PyTorch's."""
    from ember.nn.modules.batchnorm import _BatchNorm
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)
