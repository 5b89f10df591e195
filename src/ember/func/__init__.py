"""ember.func: composable function transforms (``torch.func``).

grad, vjp, jvp, vmap, jacrev, jacfwd, hessian and linearize nest with each other and work
on pytrees; see NOTE [Batched tensors] (func/_batched.py) and NOTE [Transforms on the
tape] (func/_autodiff.py) for how.
"""

from ember.func._autodiff import grad, grad_and_value, jvp, linearize, vjp
from ember.func._jacobians import hessian, jacfwd, jacrev
from ember.func._misc import debug_unwrap, functionalize, replace_all_batch_norm_modules_
from ember.func._module import functional_call, stack_module_state
from ember.func._rearrange import rearrange
from ember.func._vmap import vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd",
           "hessian", "vmap", "functional_call", "stack_module_state", "rearrange",
           "functionalize", "replace_all_batch_norm_modules_", "debug_unwrap"]
