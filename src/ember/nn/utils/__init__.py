"""ember.nn.utils: gradient clipping, parameter vectors, parametrizations, fusion,
functional_call, RNN packing."""

from ember.nn.utils import parametrizations, parametrize, stateless  # noqa: F401
from ember.nn.utils.clip_grad import (clip_grad_norm, clip_grad_norm_,  # noqa: F401
                                      clip_grad_value_, clip_grads_with_norm_, get_total_norm)
from ember.nn.utils.convert_parameters import (parameters_to_vector,  # noqa: F401
                                               vector_to_parameters)
from ember.nn.utils.fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights,  # noqa: F401
                                   fuse_linear_bn_eval, fuse_linear_bn_weights)
from ember.nn.utils.memory_format import (convert_conv2d_weight_memory_format,  # noqa: F401
                                          convert_conv3d_weight_memory_format)
from ember.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from ember.nn.utils.weight_norm import remove_weight_norm, weight_norm  # noqa: F401



def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` with its parameters and buffers left uninitialized:
    built on the meta device, then given memory on ``device`` (cpu by default)."""
    from ember.nn.modules.module import Module
    if not issubclass(module_cls, Module):     # (a non-class raises TypeError, as in torch)
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in module_cls.__init__.__code__.co_varnames:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    final = kwargs.pop("device", "cpu")
    return module_cls(*args, device="meta", **kwargs).to_empty(device=final)


from ember.nn.utils import rnn  # noqa: F401,E402
from ember.nn.utils import init  # noqa: F401,E402  (torch.nn.utils.init.skip_init)
