"""L-BFGS with an optional strong-Wolfe line search (``torch.optim.LBFGS``)."""

from ember._tensor import Tensor, _make
from ember.autograd.grad_mode import no_grad
from ember.backend import xp_of
from ember.optim._checks import check_lr
from ember.optim._state import nested_param, real, value
from ember.ops._registry import device_mismatch
from ember.optim.optimizer import Optimizer, closure_loss

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    """Limited-memory BFGS over all parameters flattened into one vector.

    Each ``step(closure)`` runs up to ``max_iter`` iterations: a search direction from the
    two-loop recursion over the last ``history_size`` curvature pairs, then a fixed step
    (``lr``, the first one scaled by 1 / |g|_1) or a strong-Wolfe line search. The closure
    must recompute the loss and gradients; it is called several times.
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ----- the parameters as one flat vector ----------------------------------------------

    def _flat_grad(self):
        if len({p.device for p in self._params}) > 1:
            device_mismatch(self._params)           # as PyTorch's concatenation refuses them
        for p in self._params:
            if not isinstance(p, Tensor) and nested_param(p):
                from ember.nested._strided_optim import refuse_flat
                refuse_flat(p)
        xp = xp_of(self._params[0]._data)
        return xp.concatenate([     # complex parameters count as pairs of reals
            real(_grad_array(p, xp)).reshape(-1) for p in self._params])

    def _add_to_params(self, t, d):
        offset = 0
        for p in self._params:
            x = real(p._data)
            n = x.size
            x[...] = _fused_add(x, t, d[offset:offset + n].reshape(x.shape))
            p._bump_version()
            offset += n

    def _values(self):
        return [p._data.copy() for p in self._params]

    def _restore(self, values):
        for p, v in zip(self._params, values):
            p._data[...] = v
            p._bump_version()

    def _evaluate_along(self, closure, x, t, d):
        self._add_to_params(t, d)
        loss = float(closure_loss(closure))
        flat_grad = self._flat_grad()
        self._restore(x)
        return loss, flat_grad

    # ----- the step ------------------------------------------------------------------------

    @no_grad()
    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations; returns the closure's first loss."""
        if len(self.param_groups) != 1:     # (a group added after construction)
            raise AssertionError(
                f"Expected exactly one param_group, but got {len(self.param_groups)}")
        group = self.param_groups[0]
        lr = value(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = closure_loss(closure)
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if abs(flat_grad).max() <= tol_grad:
            return orig_loss

        memory = _Memory.load(state)
        d, t = memory.d, value(state.get("t"))
        prev_flat_grad, prev_loss = memory.prev_flat_grad, state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                memory.clear()
            else:
                memory.update(flat_grad - prev_flat_grad, d * t, history_size)
                d = memory.direction(flat_grad)
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:        # PyTorch's min(1, 1 / |g|_1) keeps its 0-dim
                inv = 1.0 / abs(flat_grad).sum()    # tensor, of the gradient's dtype, when
                t = (inv if inv < 1.0 else 1.0) * lr  # below 1
            else:
                t = lr
            # NOTE [LBFGS scalars]: PyTorch's dot products here are 0-dim tensors, and so is
            # all arithmetic with them (in the gradient's dtype, float32 say): they stay
            # backend scalars (NumPy's promote as 0-dim tensors do), never Python floats
            gtd = flat_grad @ d
            if gtd > -tol_change:
                break
            if group["line_search_fn"] not in (None, "strong_wolfe"):     # checked here, as
                raise RuntimeError("only 'strong_wolfe' is supported")   # PyTorch does
            ls_evals = 0
            if group["line_search_fn"] == "strong_wolfe":
                x0 = self._values()
                loss, flat_grad, t, ls_evals = _strong_wolfe(     # within max_eval
                    lambda step: self._evaluate_along(closure, x0, step, d), t, d, loss,
                    flat_grad, gtd, max_ls=max_eval - evals)
                self._add_to_params(t, d)
                converged = abs(flat_grad).max() <= tol_grad
            else:
                self._add_to_params(t, d)
                converged = False
                if n_iter != max_iter:
                    loss = float(closure_loss(closure))
                    flat_grad = self._flat_grad()
                    converged = abs(flat_grad).max() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if (n_iter == max_iter or evals >= max_eval or converged
                    or abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change):
                break

        memory.d, memory.prev_flat_grad = d, prev_flat_grad
        if isinstance(group["lr"], Tensor) and t is not None:   # PyTorch's t is then lr's kind
            t = group["lr"].detach().new_tensor(t)
        memory.save(state, history_size, t)
        state["prev_loss"] = prev_loss
        return orig_loss


class _Memory:
    """The curvature pairs (y, s), 1 / y.s, the diagonal scale, the last direction and the
    last gradient; stored in the state as tensors, in PyTorch's keys."""

    def __init__(self, dirs, steps, ro, h_diag, d, prev_flat_grad):
        self.dirs, self.steps, self.ro, self.h_diag = dirs, steps, ro, h_diag
        self.d, self.prev_flat_grad = d, prev_flat_grad
        self.alphas = None              # the two-loop recursion's last coefficients

    @classmethod
    def load(cls, state):
        def arr(t):
            return None if t is None else t._data
        h_diag = state.get("H_diag")
        return cls([arr(t) for t in state.get("old_dirs") or []],
                   [arr(t) for t in state.get("old_stps") or []],
                   [_scalar_of(r) for r in state.get("ro") or []],
                   1 if h_diag is None else _scalar_of(h_diag),
                   arr(state.get("d")), arr(state.get("prev_flat_grad")))

    def save(self, state, history_size, t):
        """Store the memory and step length ``t`` in PyTorch's keys and order (all None
        when no iteration ran: ``max_iter=0``)."""
        if self.d is None:
            state.update(dict.fromkeys(("d", "t", "old_dirs", "old_stps", "ro", "H_diag",
                                        "prev_flat_grad")))
            return
        if self.alphas is not None:     # PyTorch's "al": one slot per pair it can keep
            state["al"] = ([_make(_scalar(self.d, a)) for a in self.alphas]
                           + [None] * (history_size - len(self.alphas)))
        state["d"] = _make(self.d)
        state["t"] = _stored(self.d, t)
        state["old_dirs"] = [_make(a) for a in self.dirs]
        state["old_stps"] = [_make(a) for a in self.steps]
        state["ro"] = [_make(_scalar(self.d, r)) for r in self.ro]
        state["H_diag"] = _stored(self.d, self.h_diag)
        state["prev_flat_grad"] = _make(self.prev_flat_grad)

    def clear(self):
        self.dirs, self.steps, self.ro, self.h_diag = [], [], [], 1

    def update(self, y, s, history_size):
        """Add the pair (y, s) when it has positive curvature."""
        ys = y @ s                      # (see NOTE [LBFGS scalars])
        if ys > 1e-10:
            if len(self.dirs) == history_size:
                del self.dirs[0], self.steps[0], self.ro[0]
            self.dirs.append(y)
            self.steps.append(s)
            self.ro.append(1.0 / ys)
            self.h_diag = ys / (y @ y)

    def direction(self, flat_grad):
        """The two-loop recursion: an approximation of -H^-1 g."""
        alphas = [0.0] * len(self.dirs)
        # (PyTorch's updates here are fused multiply-adds; emulated through float64 they made
        # this loop ~3x slower on large models, for bits that match only on tiny vectors)
        q = -flat_grad
        for i in range(len(self.dirs) - 1, -1, -1):
            alphas[i] = (self.steps[i] @ q) * self.ro[i]
            q = q - alphas[i] * self.dirs[i]
        r = q * self.h_diag
        for i in range(len(self.dirs)):
            beta = (self.dirs[i] @ r) * self.ro[i]
            r = r + (alphas[i] - beta) * self.steps[i]
        self.alphas = alphas
        return r


def _scalar(like, number):
    return xp_of(like).asarray(number, dtype=like.dtype)


def _fused_add(x, alpha, y):
    """``x + alpha * y`` rounded once, as PyTorch's ``add(y, alpha=)`` (a fused multiply-add
    on CPU); exact through float64 for arrays of at most 24-bit significands."""
    if x.dtype.itemsize > 4 or x.dtype.kind != "f":
        return x + alpha * y
    wide = x.astype("float64") + float(alpha) * y.astype("float64")
    return wide.astype(x.dtype)


def _stored(like, number):
    """A step length or H_diag as PyTorch's state keeps it: a Python number as it is, a
    backend scalar as a 0-dim tensor (NumPy's float64 scalars are Python floats too)."""
    if isinstance(number, Tensor) or type(number) in (int, float):
        return number
    return _make(_scalar(like, number))


def _scalar_of(h_diag):
    """A stored ro or H_diag back as the scalar it was: a 0-dim tensor's backend scalar."""
    return h_diag._data[()] if isinstance(h_diag, Tensor) else h_diag


def _cubic_minimum(x1, f1, g1, x2, f2, g2, sqrt, bounds=None):
    """The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), kept in bounds."""
    lo, hi = bounds if bounds is not None else sorted((x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = sqrt(d2_square)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step t satisfying the strong Wolfe conditions along d: bracket, then zoom with
    cubic interpolation. Returns (loss, flat gradient, t, evaluations)."""
    sqrt = xp_of(d).sqrt                # backend scalars, see NOTE [LBFGS scalars]
    d_norm = abs(d).max()
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = g_new @ d
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd     # PyTorch's int 0 (kept as t)
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        too_far = f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev)
        if not too_far and abs(gtd_new) <= -c2 * gtd:
            bracket = [[t, f_new, g_new, gtd_new]]
            done = True
            break
        if too_far or gtd_new >= 0:
            bracket = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        lo_step, hi_step = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, sqrt,
                                      (lo_step, hi_step))
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new @ d
        ls_iter += 1
    if ls_iter == max_ls:
        bracket = [[0, f, g, gtd], [t, f_new, g_new, gtd_new]]

    # zoom: shrink the bracket until a point satisfies the conditions
    insufficient_progress = False
    low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    while not done and ls_iter < max_ls:
        (a, fa, _, ga), (b, fb, _, gb) = bracket
        if abs(b - a) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(a, fa, ga, b, fb, gb, sqrt)
        top, bottom = max(a, b), min(a, b)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:
            if insufficient_progress or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new @ d
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = [t, f_new, g_new, gtd_new]
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = [t, f_new, g_new, gtd_new]
    t, f_new, g_new, _ = bracket[low]
    return f_new, g_new, t, evals


def _grad_array(p, xp):
    """The backend array of ``p``'s gradient: zeros when it has none, a sparse one made
    dense (as PyTorch's LBFGS flattens it)."""
    grad = p._grad
    if grad is None:
        return xp.zeros_like(p._data)
    return (grad.to_dense() if grad.is_sparse else grad)._data
