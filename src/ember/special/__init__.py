"""ember.special: special functions (``torch.special``). The ops live in ember/ops/; this
module gathers those registered with ``namespace="special"`` and PyTorch's names for
top-level ops."""

from ember import ops as _ops

globals().update(_ops.namespace_functions("special"))

# torch.special names of ops that live at the top level (ember.ops registers each once)
_TOP = _ops.public_functions()
_SAME_NAME = ("digamma", "erf", "erfc", "erfinv", "exp2", "expm1", "i0", "log1p",
              "log_softmax", "logit", "logsumexp", "polygamma", "sinc", "softmax",
              "xlogy")
_RENAMED = {"expit": "sigmoid", "gammaln": "lgamma", "psi": "digamma",
            "multigammaln": "mvlgamma", "gammainc": "igamma", "gammaincc": "igammac"}
# each its own entry point, whose TypeErrors name it ``special_<name>()`` as PyTorch's do
globals().update({name: _ops._alias_entry(f"special_{name}", _TOP[name], "function")
                  for name in _SAME_NAME})
globals().update({name: _ops._alias_entry(f"special_{name}", _TOP[target], "function")
                  for name, target in _RENAMED.items()})
_round = _TOP["round"]
del _TOP


def round(input, *, decimals=0, out=None):  # noqa: A001 (PyTorch's name)
    """``ember.round`` with ``decimals`` always given: no kernel for bool or integer tensors
    (ember.round copies those when decimals is not given)."""
    return _round(input, decimals=decimals, out=out)


round = _ops._renaming("special_round", round)  # noqa: A001 - its TypeErrors name special_round
