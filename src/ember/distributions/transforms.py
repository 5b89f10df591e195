"""Transforms: invertible (or at least computable) maps between constrained spaces, with the
log absolute determinant of their Jacobian, to build TransformedDistribution and to map
unconstrained parameters onto constraints (``biject_to``/``transform_to``).

A transform acts on events of ``domain.event_dim`` dimensions; its
``log_abs_det_jacobian(x, y)`` has the shape of ``x`` with those event dimensions summed away.
"""

import math
import numbers
import weakref

import ember
import ember.nn.functional as F
from ember.distributions import constraints
from ember.distributions.utils import broadcast_all, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform",
    "TanhTransform", "SoftmaxTransform", "StackTransform", "StickBreakingTransform",
    "Transform", "identity_transform",
]


def _sum_rightmost(value, dim):
    """Sum the rightmost ``dim`` dimensions of ``value`` (a number is returned as it is)."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:value.dim() - dim] + (-1,)).sum(-1)


def _clipped_sigmoid(x):
    """sigmoid(x) clamped into [tiny, 1 - eps] of the dtype, so that logs of it stay finite."""
    finfo = ember.finfo(x.dtype)
    return ember.sigmoid(x).clamp(min=finfo.tiny, max=1.0 - finfo.eps)


def _too_few_dims(shape, ndims):
    """Raise unless ``shape`` has at least ``ndims`` dimensions."""
    if len(shape) < ndims:
        raise ValueError("Too few dimensions on input")


class Transform:
    """An invertible map y = f(x) with a computable log|det df/dx|.

    ``cache_size=1`` remembers the latest pair (x, y), so that ``inv(y)`` of a just-computed
    ``y`` (or ``f(x)`` of a just-inverted ``x``) returns the original object itself.
    Subclasses define ``domain``, ``codomain``, ``_call``, ``_inverse`` and
    ``log_abs_det_jacobian``; ``bijective`` and ``sign`` where they hold.
    """

    bijective = False
    domain: constraints.Constraint
    codomain: constraints.Constraint

    def __init__(self, cache_size=0):
        if cache_size == 1:
            self._cached_x_y = None, None
        elif cache_size != 0:
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv = None
        super().__init__()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_inv"] = None                # a weak reference cannot be pickled
        return state

    @property
    def event_dim(self):
        """The number of event dimensions, when domain and codomain agree on it."""
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        """The inverse transform; held weakly, so that transform and inverse are no cycle."""
        inverse = self._inv() if self._inv is not None else None
        if inverse is None:
            inverse = _InverseTransform(self)
            self._inv = weakref.ref(inverse)
        return inverse

    @property
    def sign(self):
        """The sign of the derivative, for a monotone scalar transform."""
        raise NotImplementedError

    def with_cache(self, cache_size=1):
        """This transform with the given cache size (itself when it already has it)."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    def __call__(self, x):
        """y = f(x), from the cache when ``x`` is the latest input or output seen."""
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        """x = f^-1(y), from the cache when ``y`` is the latest output or input seen."""
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        """log|det dy/dx| per event, given the input ``x`` and output ``y``."""
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__ + "()"

    def forward_shape(self, shape):
        """The output shape for an input of ``shape``."""
        return shape

    def inverse_shape(self, shape):
        """The input shape for an output of ``shape``."""
        return shape


class _InverseTransform(Transform):
    """The inverse of a transform, sharing its cache."""

    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform               # a strong reference: the forward transform

    @property
    def domain(self):
        return self._inv.codomain

    @property
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size=1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    def __repr__(self):
        return f"{self.__class__.__name__}({self._inv!r})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """The composition of ``parts``, applied first to last; with no parts, the identity."""

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    def _event_dims(self):
        """The event dims of the input and output: the parts' event dims, widened so that
        every part sees at least its own event dims."""
        dim = 0
        for part in self.parts:             # the input rank each part needs, traced forward
            dim = max(dim, part.domain.event_dim)
            dim += part.codomain.event_dim - part.domain.event_dim
        out_dim = dim
        for part in reversed(self.parts):   # back to the input
            dim += part.domain.event_dim - part.codomain.event_dim
        return dim, out_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        in_dim = self._event_dims()[0]
        if in_dim > domain.event_dim:
            domain = constraints.independent(domain, in_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        out_dim = self._event_dims()[1]
        if out_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, out_dim - codomain.event_dim)
        return codomain

    @property
    def bijective(self):
        return all(part.bijective for part in self.parts)

    @property
    def sign(self):
        sign = 1
        for part in self.parts:
            sign = sign * part.sign
        return sign

    @property
    def inv(self):
        inverse = self._inv() if self._inv is not None else None
        if inverse is None:
            inverse = ComposeTransform([part.inv for part in reversed(self.parts)])
            self._inv = weakref.ref(inverse)
            inverse._inv = weakref.ref(self)
        return inverse

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return ember.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        total = 0
        event_dim = self.domain.event_dim
        for part, x_in, y_out in zip(self.parts, xs[:-1], xs[1:]):
            term = part.log_abs_det_jacobian(x_in, y_out)
            total = total + _sum_rightmost(term, event_dim - part.domain.event_dim)
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return total

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self):
        inner = ",\n    ".join(repr(part) for part in self.parts)
        return f"{self.__class__.__name__}(\n    {inner}\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """``base_transform`` with ``reinterpreted_batch_ndims`` more rightmost dimensions
    counted as the event: its log-det is summed over them."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims,
                                    cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(self.base_transform.domain,
                                       self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(self.base_transform.codomain,
                                       self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        result = self.base_transform.log_abs_det_jacobian(x, y)
        return _sum_rightmost(result, self.reinterpreted_batch_ndims)

    def __repr__(self):
        return (f"{self.__class__.__name__}({self.base_transform!r}, "
                f"{self.reinterpreted_batch_ndims})")

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshape the rightmost ``in_shape`` dimensions to ``out_shape`` (a volume-preserving
    map: its log-det is zero)."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = ember.Size(in_shape)
        self.out_shape = ember.Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch_shape = x.shape[:x.dim() - len(self.in_shape)]
        return x.reshape(batch_shape + self.out_shape)

    def _inverse(self, y):
        batch_shape = y.shape[:y.dim() - len(self.out_shape)]
        return y.reshape(batch_shape + self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(x.shape[:x.dim() - len(self.in_shape)])

    @staticmethod
    def _swap_tail(shape, old, new):
        """``shape`` with its trailing ``old`` replaced by ``new``."""
        _too_few_dims(shape, len(old))
        cut = len(shape) - len(old)
        if shape[cut:] != old:
            raise ValueError(f"Shape mismatch: expected {shape[cut:]} but got {old}")
        return shape[:cut] + new

    def forward_shape(self, shape):
        return self._swap_tail(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap_tail(shape, self.out_shape, self.in_shape)


class ExpTransform(Transform):
    """y = exp(x)."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """y = x ** exponent, on the positive reals."""

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        return bool(self.exponent.eq(other.exponent).all())

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        # d/dx x^a = a x^(a-1) = a y / x
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return ember.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape):
        return ember.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


class SigmoidTransform(Transform):
    """y = sigmoid(x) = 1 / (1 + exp(-x))."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        finfo = ember.finfo(y.dtype)
        y = y.clamp(min=finfo.tiny, max=1.0 - finfo.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        # sigmoid' = sigmoid(x) sigmoid(-x); log sigmoid(x) = -softplus(-x)
        return -F.softplus(-x) - F.softplus(x)


class SoftplusTransform(Transform):
    """y = softplus(x) = log(1 + exp(x))."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        # x = log(exp(y) - 1) = y + log(1 - exp(-y))
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        # softplus' = sigmoid(x), and log sigmoid(x) = -softplus(-x)
        return -F.softplus(-x)


class TanhTransform(Transform):
    """y = tanh(x); the inverse is atanh, not clamped at +-1."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return ember.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) = log(4 e^{-2x} / (1 + e^{-2x})^2) = 2 (log 2 - x - softplus(-2x))
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class AbsTransform(Transform):
    """y = |x|; not injective, so its "inverse" returns the nonnegative root."""

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale * x, elementwise; ``event_dim`` says how many rightmost dimensions
    form one event (their log-dets are summed)."""

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    @staticmethod
    def _same(a, b):
        """Whether two numbers or tensors are equal everywhere."""
        if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
            return a == b
        return bool((a == b).all())

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        return self._same(self.loc, other.loc) and self._same(self.scale, other.scale)

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            scale = float(self.scale)
            return 1 if scale > 0 else -1 if scale < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = x.shape
        if isinstance(self.scale, numbers.Real):
            result = ember.full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self.event_dim:
            result = result.reshape(result.shape[:result.dim() - self.event_dim] + (-1,))
            result = result.sum(-1)
            shape = shape[:len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return ember.broadcast_shapes(shape, getattr(self.loc, "shape", ()),
                                      getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape):
        return ember.broadcast_shapes(shape, getattr(self.loc, "shape", ()),
                                      getattr(self.scale, "shape", ()))


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
        eps = ember.finfo(x.dtype).eps
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        # 1 - sum_{k<j} L_ik^2 = prod_{k<j} (1 - r_ik^2): cumulative product of sqrt(1 - r^2)
        remaining = (1 - r * r).sqrt().cumprod(-1)
        remaining = F.pad(remaining[..., :-1], [1, 0], value=1.0)
        eye = ember.eye(r.shape[-1], dtype=x.dtype, device=x.device)
        return (r + eye) * remaining

    @staticmethod
    def _remaining(y):
        """1 - sum_{k<j} y_ik^2, for every entry (i, j)."""
        return F.pad(1 - (y * y).cumsum(-1)[..., :-1], [1, 0], value=1.0)

    def _inverse(self, y):
        r = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(self._remaining(y), -1).sqrt()
        return 0.5 * (r.log1p() - (-r).log1p())               # atanh(r)

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
        probs = (x - x.amax(-1, keepdim=True)).exp()
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
        return ember.arange(n, 0, -1, dtype=like.dtype, device=like.device).log()

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

    def _pieces(self, x):
        """``x`` split along ``dim`` into the pieces of ``lengths``."""
        _check_dim(self.dim, x)
        if x.size(self.dim) != self.length:
            raise AssertionError(f"x.size({self.dim}) = {x.size(self.dim)} must equal "
                                 f"length {self.length}")
        return x.split(self.lengths, self.dim)

    def _call(self, x):
        pieces = self._pieces(x)
        return ember.cat([t(p) for t, p in zip(self.transforms, pieces)], dim=self.dim)

    def _inverse(self, y):
        pieces = self._pieces(y)
        return ember.cat([t.inv(p) for t, p in zip(self.transforms, pieces)], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        logdets = []
        for t, xp, yp in zip(self.transforms, self._pieces(x), self._pieces(y)):
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

    def _slices(self, x):
        """The slices of ``x`` along ``dim``, one per transform."""
        _check_dim(self.dim, x)
        if x.size(self.dim) != len(self.transforms):
            raise AssertionError(f"x.size({self.dim}) = {x.size(self.dim)} must equal "
                                 f"len(transforms) {len(self.transforms)}")
        return x.unbind(self.dim)

    def _call(self, x):
        return ember.stack([t(s) for t, s in zip(self.transforms, self._slices(x))],
                           dim=self.dim)

    def _inverse(self, y):
        return ember.stack([t.inv(s) for t, s in zip(self.transforms, self._slices(y))],
                           dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        logdets = [t.log_abs_det_jacobian(xs, ys)
                   for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y))]
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


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), onto the unit interval; its log-det is the log density."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return type(self)(self.distribution, cache_size=cache_size)
