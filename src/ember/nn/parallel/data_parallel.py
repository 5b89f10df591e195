"""Data parallelism in one process (``torch.nn.DataParallel``): each forward splits the
batch over the GPUs, runs the module on each piece and joins the outputs on one GPU.

The module lives on the first GPU. The other GPUs run it with copies of its parameters and
buffers made for that forward (``.to``, which autograd follows), so the backward sums every
piece's gradient into the parameters themselves. As in PyTorch, in-place updates a forward
makes to buffers (batch-norm statistics) survive only from the first GPU. The pieces run one
after another from Python; each GPU's kernels are queued without waiting for the others.
"""

import ember
from ember.nn.modules.module import Module
from ember.nn.parallel.scatter_gather import gather, scatter_kwargs
from ember.nn.utils.stateless import _functional_call as functional_call

__all__ = ["DataParallel", "data_parallel"]


def _index(dev):
    """A GPU index from an int or a device."""
    if isinstance(dev, int):
        return dev
    dev = ember.device(dev)
    return dev.index if dev.index is not None else ember.cuda.current_device()


def _run_pieces(module, devices, inputs, kwargs, dim):
    """``module`` on each GPU's piece of the arguments: the pieces' outputs."""
    pieces, kw_pieces = scatter_kwargs(inputs, kwargs, devices, dim)
    if not pieces:                                 # no arguments: run on the first GPU
        pieces, kw_pieces = ((),), ({},)
    outputs = [module(*pieces[0], **kw_pieces[0])]
    if len(pieces) > 1:
        state = dict(module.named_parameters())
        state.update(module.named_buffers())
        for piece, kw, index in zip(pieces[1:], kw_pieces[1:], devices[1:]):
            device = ember.device("cuda", index)
            with ember.cuda.device(index):
                copies = {name: t.to(device) for name, t in state.items()}
                outputs.append(functional_call(module, copies, piece, kw))
    return outputs


class DataParallel(Module):
    """Run ``module`` with each batch split along ``dim`` over ``device_ids`` (all GPUs by
    default), gathering outputs on ``output_device``; without CUDA, the module itself."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.dim = dim
        if not ember.cuda.is_available():
            self.device_ids, self.output_device, self.src_device_obj = [], None, None
            return
        if device_ids is None:
            device_ids = list(range(ember.cuda.device_count()))
        self.device_ids = [_index(d) for d in device_ids]
        if not self.device_ids:
            raise ValueError("DataParallel expects at least one device in device_ids")
        self.output_device = _index(self.device_ids[0] if output_device is None
                                    else output_device)
        self.src_device_obj = ember.device("cuda", self.device_ids[0])
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        """The module's output for the whole batch, computed piece by piece on the GPUs."""
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        for t in (*self.module.parameters(), *self.module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(f"module must have its parameters and buffers on device "
                                   f"{self.src_device_obj} (device_ids[0]) but found one of "
                                   f"them on device: {t.device}")
        outputs = _run_pieces(self.module, self.device_ids, inputs, kwargs, self.dim)
        if len(outputs) == 1 and len(self.device_ids) == 1:
            return outputs[0]
        return gather(outputs, self.output_device, self.dim)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """``DataParallel(module, device_ids, output_device, dim)(*inputs, **module_kwargs)``
    without keeping the wrapper."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    wrapper = DataParallel(module, device_ids, output_device, dim)
    return wrapper(*inputs, **(module_kwargs or {}))
