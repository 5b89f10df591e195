"""The transforms that act on whole events: onto the simplex (``SoftmaxTransform``,
``StickBreakingTransform``), onto triangular and positive-definite matrices, and the ones that
join other transforms along a dimension (``CatTransform``, ``StackTransform``)."""

import math

import ember
import ember.nn.functional as F
from ember.distributions import constraints
from ember.distributions.utils import tril_matrix_to_vec, vec_to_tril_matrix
from ember.distributions.transforms import (Transform, _clipped_sigmoid, _sum_rightmost,
                                            _too_few_dims)

__all__ = ["CorrCholeskyTransform", "SoftmaxTransform", "StickBreakingTransform",
           "LowerCholeskyTransform", "PositiveDefiniteTransform", "CatTransform",
           "StackTransform"]


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length D(D-1)/2 to Cholesky factors of D x D correlation
    matrices (lower triangular, positive diagonal, unit-norm rows).

    With r = tanh(x) placed row by row in the strict lower triangle, row i of L is built by
    stick-breaking on its squared norm: L_ij = r_ij sqrt(1 - sum_{k<j} L_ik^2) for j < i, and
    L_ii = sqrt(1 - sum_{k<i} L_ik^2). The Jacobian of r -> L is triangular with diagonal
    sqrt(1 - sum_{k<j} L_ik^2); that of tanh is 1 - r^2.
    """

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def __eq__(self, other):
        return isinstance(other, CorrCholeskyTransform)

    def _call(self, x):
        x = x.tanh()        # (an integer x's is float: its eps is the float's)
        eps = ember.finfo(x.dtype).eps
        r = vec_to_tril_matrix(x.clamp(min=-1 + eps, max=1 - eps), diag=-1)
        # 1 - sum_{k<j} L_ik^2 = prod_{k<j} (1 - r_ik^2): cumulative product of sqrt(1 - r^2)
        remaining = (1 - r * r).sqrt().cumprod(-1)
        remaining = F.pad(remaining[..., :-1], [1, 0], value=1.0)
        eye = ember.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return (r + eye) * remaining

    @staticmethod
    def _remaining(y):
        """1 - sum_{k<j} y_ik^2, for every entry (i, j)."""
        return F.pad(1 - (y * y).cumsum(-1)[..., :-1], [1, 0], value=1.0)

    def _inverse(self, y):
        r = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(self._remaining(y), -1).sqrt()
        return (r.log1p() - (-r).log1p()) / 2                 # atanh(r)

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        stick_breaking = 0.5 * tril_matrix_to_vec(self._remaining(y), diag=-1).log().sum(-1)
        tanh = 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x)).sum(-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        _too_few_dims(shape, 1)
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return shape[:-1] + (d, d)

    def inverse_shape(self, shape):
        _too_few_dims(shape, 2)
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return shape[:-2] + (d * (d - 1) // 2,)


class SoftmaxTransform(Transform):
    """y = softmax(x) over the last dimension; not injective (x + c gives the same y), so
    the "inverse" is log(y)."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    def _call(self, x):
        # (max, not amax: its errors for an empty or a complex x are PyTorch's)
        probs = (x - x.max(-1, keepdim=True).values).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        _too_few_dims(shape, 1)
        return shape

    def inverse_shape(self, shape):
        _too_few_dims(shape, 1)
        return shape


class StickBreakingTransform(Transform):
    """R^K to the K-simplex in R^(K+1) by stick-breaking: z_k = sigmoid(x_k - log(K - k))
    is the fraction taken from what is left, y_k = z_k prod_{j<k} (1 - z_j), and the last
    entry is what remains. The offsets send x = 0 to the uniform vector.

    The Jacobian is triangular with diagonal dy_k/dx_k = y_k (1 - z_k)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other):
        return isinstance(other, StickBreakingTransform)

    @staticmethod
    def _log_offset(n, like):
        """log(K - k) for k = 0 .. n - 1 when there are K = n entries to break off."""
        dtype = like.dtype
        if dtype.is_complex:
            dtype = dtype.to_real()
        elif not dtype.is_floating_point:   # (counted in int64: a bool or integer x)
            dtype = ember.int64
        return ember.arange(n, 0, -1, dtype=dtype, device=like.device).log()

    def _call(self, x):
        z = _clipped_sigmoid(x - self._log_offset(x.shape[-1], x))
        left = (1 - z).cumprod(-1)
        return F.pad(z, [0, 1], value=1.0) * F.pad(left, [1, 0], value=1.0)

    def _inverse(self, y):
        head = y[..., :-1]
        rest = (1 - head.cumsum(-1)).clamp(min=ember.finfo(y.dtype).tiny)  # left after y_k
        # z_k = y_k / (y_k + rest_k), so logit(z_k) = log y_k - log rest_k
        return head.log() - rest.log() + self._log_offset(head.shape[-1], y)

    def log_abs_det_jacobian(self, x, y):
        shifted = x - self._log_offset(x.shape[-1], x)
        # log(1 - z_k) = log sigmoid(-shifted) = logsigmoid(shifted) - shifted
        return (y[..., :-1].log() + F.logsigmoid(shifted) - shifted).sum(-1)

    def forward_shape(self, shape):
        _too_few_dims(shape, 1)
        return shape[:-1] + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        _too_few_dims(shape, 1)
        return shape[:-1] + (shape[-1] - 1,)


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower triangular ones with positive diagonal: keep
    the strict lower triangle and exponentiate the diagonal (not bijective)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones: L L^T of the
    LowerCholeskyTransform's L (not bijective)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    def _call(self, x):
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(ember.linalg.cholesky(y))


def _check_tseq(tseq):
    """Raise unless every element of ``tseq`` is a Transform."""
    if not all(isinstance(t, Transform) for t in tseq):
        raise AssertionError("All elements of tseq must be Transform instances")


def _check_dim(dim, x):
    """Raise unless ``dim`` indexes a dimension of ``x``."""
    if not -x.dim() <= dim < x.dim():
        raise AssertionError(f"dim {dim} out of range for tensor with {x.dim()} dimensions")


class CatTransform(Transform):
    """Apply ``tseq[i]`` to the i-th piece (of size ``lengths[i]``, default 1) along ``dim``
    and concatenate the results, like ``ember.cat``."""

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        _check_tseq(tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match transforms "
                                 f"({len(self.transforms)})")
        self.dim = dim

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        """The size of ``dim`` the inputs must have."""
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _pieces(self, x, name="x"):
        """``x`` split along ``dim`` into the pieces of ``lengths``."""
        _check_dim(self.dim, x)
        if x.size(self.dim) != self.length:
            raise AssertionError(f"{name}.size({self.dim}) = {x.size(self.dim)} must equal "
                                 f"length {self.length}")
        return x.split(self.lengths, self.dim)

    def _call(self, x):
        pieces = self._pieces(x)
        return ember.cat([t(p) for t, p in zip(self.transforms, pieces)], dim=self.dim)

    def _inverse(self, y):
        pieces = self._pieces(y, "y")
        return ember.cat([t.inv(p) for t, p in zip(self.transforms, pieces)], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        logdets = []
        for t, xp, yp in zip(self.transforms, self._pieces(x), self._pieces(y, "y")):
            logdet = t.log_abs_det_jacobian(xp, yp)
            logdets.append(_sum_rightmost(logdet, self.event_dim - t.event_dim))
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim += self.event_dim
        if dim < 0:                         # ``dim`` is a batch dimension: keep the pieces
            return ember.cat(logdets, dim=dim)
        return sum(logdets)                 # ``dim`` lies inside the event: add them up

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Apply ``tseq[i]`` to the i-th slice along ``dim`` and stack the results, like
    ``ember.stack``."""

    def __init__(self, tseq, dim=0, cache_size=0):
        _check_tseq(tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, x, name="x"):
        """The slices of ``x`` along ``dim``, one per transform."""
        _check_dim(self.dim, x)
        if x.size(self.dim) != len(self.transforms):
            raise AssertionError(f"{name}.size({self.dim}) = {x.size(self.dim)} must equal "
                                 f"len(transforms) {len(self.transforms)}")
        return x.unbind(self.dim)

    def _call(self, x):
        return ember.stack([t(s) for t, s in zip(self.transforms, self._slices(x))],
                           dim=self.dim)

    def _inverse(self, y):
        return ember.stack([t.inv(s) for t, s in zip(self.transforms, self._slices(y, "y"))],
                           dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        logdets = [t.log_abs_det_jacobian(xs, ys)
                   for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y, "y"))]
        return ember.stack(logdets, dim=self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)
