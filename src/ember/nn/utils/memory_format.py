"""Convolution weights in another memory format (``nn.utils.convert_conv2d_weight_memory_format``
and its 3-D twin): only the convolutions' weights change layout, the rest of the model not."""

from ember import no_grad
from ember.nn.modules.conv import Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, kinds):
    if isinstance(module, kinds):
        with no_grad():
            laid = module.weight.detach().clone(memory_format=memory_format)
            module.weight.data = laid
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Lay out the weight of every Conv2d and ConvTranspose2d in ``module`` in
    ``memory_format`` (``ember.channels_last``), in place; returns ``module``."""
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module, memory_format):
    """Lay out the weight of every Conv3d and ConvTranspose3d in ``module`` in
    ``memory_format`` (``ember.channels_last_3d``), in place; returns ``module``."""
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
