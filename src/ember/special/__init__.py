"""ember.special: special functions (``torch.special``). The ops live in ember/ops/; this
module gathers those registered with ``namespace="special"`` and PyTorch's names for
top-level ops."""

from ember import ops as _ops

globals().update(_ops.namespace_functions("special"))

# torch.special names of ops that live at the top level (ember.ops registers each once)
_TOP = _ops.public_functions()
_SAME_NAME = ("digamma", "erf", "erfc", "erfinv", "exp2", "expm1", "i0", "log1p",
              "log_softmax", "logit", "logsumexp", "polygamma", "round", "sinc", "softmax",
              "xlogy")
_RENAMED = {"expit": "sigmoid", "gammaln": "lgamma", "psi": "digamma",
            "multigammaln": "mvlgamma", "gammainc": "igamma", "gammaincc": "igammac"}
globals().update({name: _TOP[name] for name in _SAME_NAME})
globals().update({name: _TOP[target] for name, target in _RENAMED.items()})
del _TOP
