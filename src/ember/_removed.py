"""Functions PyTorch removed in 1.9 (``torch.solve``, ``lstsq``, ``eig``, ``symeig``,
``matrix_rank``): calling one raises PyTorch's error, which names the ``torch.linalg``
function to use instead, rather than an AttributeError."""

from ember._tensor import Tensor

__all__ = ["solve", "lstsq", "eig", "symeig", "matrix_rank"]

_REMOVED = "This function was deprecated since version 1.9 and is now removed."
# PyTorch's texts, after _REMOVED (a space, or a newline for matrix_rank)
_INSTEAD = {
    "solve": " `ember.solve` is deprecated in favor of `ember.linalg.solve`. `ember.linalg.solve` "
             "has its arguments reversed and does not return the LU factorization.\n\nTo get "
             "the LU factorization see `ember.lu`, which can be used with `ember.lu_solve` or "
             "`ember.lu_unpack`.\nX = ember.solve(B, A).solution should be replaced with:\n"
             "X = ember.linalg.solve(A, B)",
    "lstsq": " `ember.lstsq` is deprecated in favor of `ember.linalg.lstsq`.\n"
             "`ember.linalg.lstsq` has reversed arguments and does not return the QR "
             "decomposition in the returned tuple (although it returns other information about "
             "the problem).\n\nTo get the QR decomposition consider using `ember.linalg.qr`."
             "\n\nThe returned solution in `ember.lstsq` stored the residuals of the solution "
             "in the last m - n columns of the returned value whenever m > n. In "
             "ember.linalg.lstsq, the residuals are in the field 'residuals' of the returned "
             "named tuple.\n\nThe unpacking of the solution, as in\nX, _ = ember.lstsq(B, A)"
             ".solution[:A.size(1)]\nshould be replaced with:\n"
             "X = ember.linalg.lstsq(A, B).solution",
    "eig": " `ember.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather "
           "than real tensors mimicking complex tensors.\n\nL, _ = ember.eig(A) should be "
           "replaced with:\nL_complex = ember.linalg.eigvals(A)\n\nand\n\nL, V = "
           "ember.eig(A, eigenvectors=True) should be replaced with:\nL_complex, V_complex = "
           "ember.linalg.eig(A)",
    "symeig": " The default behavior has changed from using the upper triangular portion of the "
              "matrix by default to using the lower triangular portion.\n\nL, _ = "
              "ember.symeig(A, upper=upper) should be replaced with:\nL = "
              "ember.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = "
              "ember.symeig(A, eigenvectors=True) should be replaced with:\nL, V = "
              "ember.linalg.eigh(A, UPLO='U' if upper else 'L')",
    "matrix_rank": "\nPlease use the `ember.linalg.matrix_rank` function instead. The "
                   "parameter 'symmetric' was renamed in `ember.linalg.matrix_rank()` to "
                   "'hermitian'.",
}


def _raise(name):
    raise RuntimeError(_REMOVED + _INSTEAD[name])


# PyTorch's signatures of the removed functions and methods (a call that does not bind to
# them is a TypeError, as there)
def solve(input, A, *, out=None):
    """Removed from PyTorch in 1.9: raises its error, naming the replacement."""
    _raise("solve")


def lstsq(input, A, *, out=None):
    """Removed from PyTorch in 1.9: raises its error, naming the replacement."""
    _raise("lstsq")


def eig(self, eigenvectors=False, *, e=None, v=None):
    """Removed from PyTorch in 1.9: raises its error, naming the replacement."""
    _raise("eig")


def symeig(input, eigenvectors=False, upper=True, *, out=None):
    """Removed from PyTorch in 1.9: raises its error, naming the replacement."""
    _raise("symeig")


def matrix_rank(input, tol=None, symmetric=False, *, out=None):
    """Removed from PyTorch in 1.9: raises its error, naming the replacement."""
    _raise("matrix_rank")


def _solve_method(self, other):
    _raise("solve")


def _lstsq_method(self, other):
    _raise("lstsq")


def _eig_method(self, eigenvectors=False):
    _raise("eig")


def _symeig_method(self, eigenvectors=False):
    _raise("symeig")


for _name, _method in (("solve", _solve_method), ("lstsq", _lstsq_method),
                       ("eig", _eig_method), ("symeig", _symeig_method)):
    _method.__name__ = _method.__qualname__ = _name
    _method.__doc__ = "Removed from PyTorch in 1.9: raises its error, naming the replacement."
    setattr(Tensor, _name, _method)


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
