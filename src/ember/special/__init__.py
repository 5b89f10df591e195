"""ember.special: special functions (``torch.special``). The ops live in ember/ops/; this
module gathers those registered with ``namespace="special"`` and PyTorch's names for
top-level ops."""

from ember import _dtype
from ember import ops as _ops

globals().update(_ops.namespace_functions("special"))

# torch.special names of ops that live at the top level (ember.ops registers each once)
_TOP = _ops.public_functions()
_SAME_NAME = ("digamma", "erf", "erfc", "erfinv", "exp2", "expm1", "i0", "log1p",
              "log_softmax", "logit", "logsumexp", "polygamma", "sinc", "softmax",
              "xlogy")
_RENAMED = {"expit": "sigmoid", "gammaln": "lgamma", "psi": "digamma",
            "multigammaln": "mvlgamma", "gammainc": "igamma", "gammaincc": "igammac"}
globals().update({name: _TOP[name] for name in _SAME_NAME})
globals().update({name: _TOP[target] for name, target in _RENAMED.items()})
_round = _TOP["round"]
del _TOP


def round(input, *, decimals=0, out=None):  # noqa: A001 (PyTorch's name)
    """``ember.round`` for floating-point tensors: torch.special.round has no kernel for
    bool or integer ones (ember.round copies those)."""
    from ember._tensor import Tensor
    if isinstance(input, Tensor) and input.dtype.category < _dtype.FLOATING:
        kernel = "round_vml_cpu" if decimals == 0 else "round_cpu"
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{input.dtype._torch_name}'")
    return _round(input, decimals=decimals, out=out)
