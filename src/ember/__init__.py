"""ember: the PyTorch programming model on NumPy (CPU) and CuPy (CUDA).

``import ember as torch`` and write PyTorch. This module only re-exports.
"""

import math as _math

from ember import _dtype
from ember._dtype import (bfloat16, can_cast, complex64, complex128, dtype, finfo, float8_e4m3fn,
                          float8_e5m2, float16, float32, float64, get_default_dtype, iinfo,
                          int8, int16, int32, int64, promote_types, set_default_dtype, uint8,
                          uint16, uint32, uint64)
from ember._dtype import bool_ as bool  # noqa: A001  (torch.bool)
from ember._device import device, get_default_device, set_default_device
from ember._tensor import Size, Tensor, name_methods as _name_methods
from ember._creation import *  # noqa: F401,F403
from ember._windows import *  # noqa: F401,F403  (hann_window, ..., kaiser_window)
from ember._ranges import *  # noqa: F401,F403
from ember._ranges import deprecated_range as range  # noqa: A001  (torch.range)
from ember._legacy_types import *  # noqa: F401,F403  (FloatTensor, ..., set_default_tensor_type)
from ember._memory_format import *  # noqa: F401,F403  (channels_last, ...)
from ember._random import *  # noqa: F401,F403
from ember._deterministic import *  # noqa: F401,F403
from ember.autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                      is_inference_mode_enabled, no_grad, set_grad_enabled)
from ember import ops as _ops
from ember import autograd, backend, cuda  # noqa: F401
from ember.cuda import AcceleratorError, OutOfMemoryError  # noqa: F401  (torch.*Error)
from ember.backend.cpu_kernels import get_num_threads, set_num_threads
from ember.ops import return_types  # noqa: F401
from ember import fft, linalg, special  # noqa: F401  (after the ops are registered)
from ember import signal  # noqa: F401
from ember._lobpcg import lobpcg  # noqa: F401
from ember import nn, optim, utils  # noqa: F401
from ember.utils.dlpack import to_dlpack
from ember import func  # noqa: F401
from ember import compiler, distributions, profiler  # noqa: F401
from ember.compiler import compile  # noqa: F401,A004  (runs eagerly)
from ember.func import vmap  # noqa: F401
from ember import amp  # noqa: F401
from ember import accelerator, backends, cpu, mps, xpu  # noqa: F401
from ember._streams import Event, Stream  # noqa: F401
from ember import random, testing  # noqa: F401
from ember.random import thread_safe_generator  # noqa: F401,E402
from ember.backends import get_float32_matmul_precision, set_float32_matmul_precision
from ember.amp.autocast_mode import (autocast, get_autocast_dtype, is_autocast_available,
                                     is_autocast_enabled, set_autocast_dtype,
                                     set_autocast_enabled)
from ember.amp._legacy import *  # noqa: F401,F403  (get_autocast_gpu_dtype, ...)
from ember.serialization import *  # noqa: F401,F403  (save, load)
from ember._api import *  # noqa: F401,F403  (is_tensor, numel, typename, ...)
from ember._tensor_lists import *  # noqa: F401,F403  (_foreach_add_, _foreach_lerp_, ...)
from ember._control_flow import cond, while_loop  # noqa: F401
from ember.amp import GradScaler  # noqa: F401  (torch.GradScaler)
from ember import multiprocessing, quasirandom, version  # noqa: F401
from ember._storage import TypedStorage, UntypedStorage, from_file  # noqa: F401
from ember import storage  # noqa: F401
from ember._legacy_storages import *  # noqa: F401,F403  (FloatStorage, LongStorage, ...)
from ember import _storage_buffer  # noqa: F401  (the storages' from_buffer)
from ember import masked, nested, sparse  # noqa: F401
from ember.sparse import (sparse_compressed_tensor, sparse_coo_tensor,  # noqa: F401
                          sparse_csr_tensor, spmm)
from ember.sparse._hybrid_products import hspmm, smm, sspaddmm  # noqa: F401
from ember.sparse._compressed import (sparse_bsc_tensor, sparse_bsr_tensor,  # noqa: F401
                                      sparse_csc_tensor, ccol_indices_copy, col_indices_copy,
                                      crow_indices_copy, indices_copy, row_indices_copy,
                                      values_copy)
from ember._symbolic import *  # noqa: F401,F403  (sym_int, sym_max, ..., SymInt)
from ember.overrides import (DisableTorchFunction,  # noqa: F401
                             DisableTorchFunctionSubclass)
from ember._removed import *  # noqa: F401,F403  (solve, eig, ...: raise, naming linalg's)
from ember.nn.modules.rnn import gru_cell, lstm_cell, rnn_relu_cell, rnn_tanh_cell  # noqa: F401
from ember.nn.modules.rnn_functions import gru, lstm, rnn_relu, rnn_tanh  # noqa: F401

from ember._api import _assert, layout  # noqa: F401
from ember._memory_format import memory_format

# classes show as PyTorch's do (<class 'torch.Tensor'>, typename gives torch.Size), and pickle
# by these names
for _cls in (Tensor, Size, dtype, device, finfo, iinfo, layout, memory_format):
    _cls.__module__ = "ember"
_name_methods()

# the constants of the torch namespace
pi, e, inf, nan, newaxis = _math.pi, _math.e, _math.inf, _math.nan, None
math = _math  # torch's namespace holds the math module too (Dreamer ports call torch.math.log)

# PyTorch's other names for dtypes
float = float32  # noqa: A001
double = float64
half = float16
cfloat = complex64
cdouble = complex128
long = int64
int = int32  # noqa: A001
short = int16

globals().update(_ops.public_functions())
from ember import functional  # noqa: E402,F401  (torch.functional; needs the functions above)

# hand-written public functions offer their calls to __torch_function__ first
from ember.overrides._guards import install_guards as _install_guards  # noqa: E402
_install_guards()

from ember.torch_version import TorchVersion as _TorchVersion  # noqa: E402

__version__ = _TorchVersion("0.1.0")


# torch._dynamo, torch._inductor, torch.jit, torch.hub (and torch._tensor_str, whose
# printoptions some programs use), torch.distributed load on first use
_LAZY = ("_dynamo", "_inductor", "library", "jit", "hub", "_tensor_str", "distributed", "_C",
         "_utils", "onnx")


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return importlib.import_module(f"ember.{name}")
    raise AttributeError(f"module 'ember' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))     # the lazy names too, as PyTorch lists them
