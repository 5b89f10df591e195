"""Functions PyTorch removed in 1.9 (``torch.solve``, ``lstsq``, ``eig``, ``symeig``,
``matrix_rank``): calling one raises PyTorch's error, which names the ``torch.linalg``
function to use instead, rather than an AttributeError."""

from ember._tensor import Tensor

__all__ = ["solve", "lstsq", "eig", "symeig", "matrix_rank"]

_REMOVED = "This function was deprecated since version 1.9 and is now removed."
_INSTEAD = {
    "solve": "`ember.solve` is deprecated in favor of `ember.linalg.solve`, whose arguments "
             "are reversed: X = ember.solve(B, A).solution becomes X = ember.linalg.solve(A, "
             "B).",
    "lstsq": "`ember.lstsq` is deprecated in favor of `ember.linalg.lstsq`, whose arguments "
             "are reversed: X = ember.lstsq(B, A).solution[:A.size(1)] becomes "
             "X = ember.linalg.lstsq(A, B).solution.",
    "eig": "`ember.linalg.eig` returns complex tensors: use ember.linalg.eigvals(A) for the "
           "eigenvalues, ember.linalg.eig(A) for both.",
    "symeig": "Use ember.linalg.eigvalsh(A, UPLO='U' if upper else 'L') for the eigenvalues, "
              "ember.linalg.eigh(A, UPLO=...) for both (the default is now the lower "
              "triangle).",
    "matrix_rank": "Please use the `ember.linalg.matrix_rank` function instead. The parameter "
                   "'symmetric' was renamed in `ember.linalg.matrix_rank()` to 'hermitian'.",
}


def _removed(name):
    def removed(*args, **kwargs):
        raise RuntimeError(f"{_REMOVED} {_INSTEAD[name]}")
    removed.__name__ = name
    removed.__doc__ = "Removed from PyTorch in 1.9: raises its error, naming the replacement."
    return removed


solve, lstsq, eig, symeig, matrix_rank = (_removed(n) for n in __all__)

for _name in ("solve", "lstsq", "eig", "symeig"):
    setattr(Tensor, _name, globals()[_name])


_REINFORCE = """reinforce() was removed.
Use ember.distributions instead.
See https://pytorch.org/docs/main/distributions.html

Instead of:

probs = policy_network(state)
action = probs.multinomial()
next_state, reward = env.step(action)
action.reinforce(reward)
action.backward()

Use:

probs = policy_network(state)
# NOTE: categorical is equivalent to what used to be called multinomial
m = ember.distributions.Categorical(probs)
action = m.sample()
next_state, reward = env.step(action)
loss = -m.log_prob(action) * reward
loss.backward()
"""


def _reinforce(self, reward):
    """Removed from PyTorch: raises its error, which shows the distributions-based rewrite."""
    raise RuntimeError(_REINFORCE)


def _volatile(self):
    """Removed from PyTorch: always False, with a UserWarning."""
    import warnings
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                  stacklevel=2)
    return False


Tensor.reinforce = _reinforce
Tensor.volatile = property(_volatile)
