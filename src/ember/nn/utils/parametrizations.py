"""Parametrizations built on ``parametrize``: weight_norm, spectral_norm and orthogonal
(_orthogonal.py)."""

from ember._tensor import Tensor
from ember.autograd.grad_mode import no_grad
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize
from ember.nn.utils._orthogonal import orthogonal

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


def norm_except_dim(v, dim):
    """The 2-norm of ``v`` over every dim but ``dim`` (kept as size-1 dims); dim=-1: all."""
    from ember import norm_except_dim as norm
    return norm(v, 2, dim)


def unit_vector(x, eps):
    """``x`` divided by its 2-norm (at least ``eps``)."""
    from ember import linalg
    return x / linalg.vector_norm(x).clamp(min=eps)


def weight_matrix(weight, dim):
    """``weight`` as a matrix whose rows run along ``dim``: the matrix whose spectral norm
    spectral normalization estimates."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape(weight.shape[0], -1)      # (a 1-D weight: one column)


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        from ember.ops.weight_norm import _weight_norm
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (originals ``original0`` = g,
    ``original1`` = v), the norm taken over every dim but ``dim``."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def compat(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
               error_msgs):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)
    module._register_load_state_dict_pre_hook(compat)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._reshape_weight_to_matrix(weight)
            h, w = mat.shape
            self.register_buffer("_u", unit_vector(mat.new_empty(h).normal_(0, 1), eps))
            self.register_buffer("_v", unit_vector(mat.new_empty(w).normal_(0, 1), eps))
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        return weight_matrix(weight, self.dim)

    @no_grad()
    def _power_method(self, mat, n):
        # out= writes as PyTorch's (a transform refuses in-place writes into captures)
        from ember.nn.functional import normalize
        for _ in range(n):
            normalize(mat.mv(self._v), dim=0, eps=self.eps, out=self._u)
            normalize(mat.conj().t().mv(self._u), dim=0, eps=self.eps, out=self._v)

    def forward(self, weight):
        if weight.ndim == 1:
            return unit_vector(weight, self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        return weight / u.vdot(mat.mv(v))

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrize ``module.<name>`` as ``W / sigma(W)``, the spectral norm estimated by
    power iteration (one step per training-mode access)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
