"""A stand-in for CuPy built on NumPy, to run the CUDA tests on a machine without a GPU.

``EMBER_FAKE_CUDA=1 pytest tests/gpu`` installs it (tests/gpu/conftest.py). Its arrays are
a NumPy subclass that, like CuPy's, refuse to meet NumPy arrays in a function or ufunc, and
its ufuncs return 0-d arrays rather than scalars, so code that lets host arrays reach device
code fails here as it would on a GPU. It has two GPUs: an array belongs to the GPU current
when it was made, and a kernel refuses arrays of another GPU, as CuPy's do without peer
access. It checks ember's device plumbing (transfers, creation,
sampling, dispatch across devices, the ember.cuda API); numerics, CuPy's own gaps and speed
need the real GPU.
"""

import collections
import contextlib
import inspect
import sys
import time
import traceback
import types
import weakref

import ml_dtypes
import numpy as np
import scipy.fft
import scipy.special

TOTAL = 256 * 2 ** 20                   # the fake GPU's memory: small, to test out-of-memory


DEVICES = 2                             # fake GPUs: two, so code for cuda:1 runs too


class _Pointer:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id


class _Device:
    """cupy.cuda.Device."""

    def __init__(self, device=None):
        self.id = _STATE["device"] if device is None else int(getattr(device, "id", device))
        self._prev = []
        self.compute_capability = "90"

    def use(self):
        _STATE["device"] = self.id

    def synchronize(self):
        pass

    @property
    def mem_info(self):
        return TOTAL - _POOL.used, TOTAL

    def __enter__(self):
        self._prev.append(_STATE["device"])
        self.use()
        return self

    def __exit__(self, *exc):
        _STATE["device"] = self._prev.pop()


class ndarray(np.ndarray):
    """A device array: NumPy's, but it will not mix with host arrays, nor (as CuPy's between
    GPUs without peer access) meet a kernel on a GPU other than its own."""

    def __array_finalize__(self, obj):
        # a view lives where its base does; fresh memory on the current GPU
        self._device_id = getattr(obj, "_device_id", _STATE["device"])

    @property
    def device(self):
        return _Device(self._device_id)

    @property
    def data(self):
        return _Pointer(self.__array_interface__["data"][0], self._device_id)

    def copy(self, order="C"):          # CuPy copies into the current GPU, from any GPU
        out = _device(np.array(self.view(np.ndarray), order=order))
        return out

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        _refuse_elsewhere(self, "astype")
        return super().astype(dtype, order=order, copy=copy)

    @property
    def __cuda_array_interface__(self):
        return self.__array_interface__

    def __dlpack_device__(self):        # kDLCUDA (its capsule, NumPy's, says host memory)
        return 2, self._device_id

    def set(self, arr, stream=None):
        self.view(np.ndarray)[...] = arr

    # reading values on the host waits for the GPU: host_traffic() counts each read (this,
    # and the conversions _reading wraps below)
    def get(self, stream=None, order="C", out=None, blocking=True):
        _note("read")
        host = np.array(self.view(np.ndarray), order=order)
        if out is None:
            return host
        out[...] = host
        return out

    # CuPy wraps out-of-range entries of integer-array indices around, where NumPy raises
    def take(self, indices, axis=None, out=None):
        return super().take(_plain(indices), axis=axis, out=out, mode="wrap")

    def __setitem__(self, key, value):
        _refuse_elsewhere((self, key, value), "__setitem__")
        super().__setitem__(_wrapped_key(self.shape, key), value)

    def __getitem__(self, key):
        key = _wrapped_key(self.shape, key)
        item = super().__getitem__(key)     # CuPy: an element is a 0-d array, not a scalar
        return _device(item) if isinstance(item, np.generic) else item

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out", ())
        _refuse_host(inputs + tuple(out), f"{ufunc.__name__}")
        _refuse_elsewhere(inputs + tuple(out), f"{ufunc.__name__}")
        if out:
            kwargs["out"] = tuple(_plain(o) for o in out)
        if method == "at":
            _Ufunc(ufunc).at        # refused for the ufuncs CuPy has no ``at`` for
            inputs = (inputs[0], _wrapped_key(inputs[0].shape, inputs[1])) + inputs[2:]
        if ufunc is np.matmul and all(getattr(x, "dtype", None) in _HALF for x in inputs):
            # cuBLAS multiplies 16-bit floats in float32 and rounds once (NumPy's float16
            # product rounds every partial sum; its bfloat16 one returns float32)
            a, b = (_plain(x).astype(np.float32) for x in inputs)
            result = np.matmul(a, b).astype(inputs[0].dtype)
            if not out:
                return _device(result)
            out[0][...] = result
            return out[0]
        result = getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)
        if out:
            return out[0] if len(out) == 1 else out
        return _device(result)

    def __array_function__(self, func, types, args, kwargs):
        _refuse_host((args, kwargs), func.__name__)
        _refuse_elsewhere((args, kwargs), func.__name__)
        return _device(func(*_plain(args), **_plain(kwargs)))


_HALF = {np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)}


def _wrapped_key(shape, key):
    """``key`` with its integer-array parts taken modulo their dims' sizes, as CuPy's
    indexing (and ``take``, ``scatter_add``, ``ufunc.at``) treats out-of-range entries."""
    parts = key if type(key) is tuple else (key,)
    if not any(isinstance(p, np.ndarray) and p.dtype.kind in "iu" for p in parts):
        return key

    def width(p):                       # the dims a key part consumes
        if p is None or p is Ellipsis:
            return 0
        return p.ndim if isinstance(p, np.ndarray) and p.dtype == bool else 1
    dim, wrapped = 0, []
    for p in parts:
        if p is Ellipsis:
            dim += len(shape) - sum(map(width, parts))
        elif isinstance(p, np.ndarray) and p.dtype.kind in "iu" and shape[dim]:
            p = _modulo(p, shape[dim])
        dim += width(p)
        wrapped.append(p)
    return tuple(wrapped) if type(key) is tuple else wrapped[0]


def _modulo(index, size):
    wrapped = np.mod(_plain(index), size)
    return _device(wrapped) if isinstance(index, ndarray) else wrapped


def _reading(name):
    numpy_method = getattr(np.ndarray, name)

    def read(self, *args):
        _note("read")
        return numpy_method(self, *args)
    return read


for _name in ("__bool__", "__int__", "__float__", "__index__", "item", "tolist"):
    setattr(ndarray, _name, _reading(_name))


def _refuse_host(values, name):
    """CuPy's TypeError for a NumPy array among a device function's arguments."""
    if isinstance(values, (list, tuple)):
        for v in values:
            _refuse_host(v, name)
    elif isinstance(values, dict):
        _refuse_host(list(values.values()), name)
    elif type(values) is np.ndarray:
        raise TypeError(f"Unsupported type {type(values)} (fake CuPy: a host array reached "
                        f"{name})")


def _refuse_elsewhere(values, name):
    """CuPy's error for an array of another GPU in a kernel (without peer access)."""
    if isinstance(values, (list, tuple)):
        for v in values:
            _refuse_elsewhere(v, name)
    elif isinstance(values, dict):
        _refuse_elsewhere(list(values.values()), name)
    elif isinstance(values, ndarray) and values._device_id != _STATE["device"]:
        raise ValueError(f"The device where the array resides ({values._device_id}) is "
                         f"different from the current device ({_STATE['device']}). Peer "
                         f"access is unavailable between these devices. (fake CuPy: {name})")


def _plain(x):
    if isinstance(x, ndarray):
        return x.view(np.ndarray)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_plain(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _device(x):
    """Results as device arrays (scalars as 0-d arrays, as CuPy returns them)."""
    if isinstance(x, ndarray):
        return x
    if isinstance(x, np.ndarray):
        fresh = x.flags.owndata
        out = x.view(ndarray)
        if fresh:
            out._mem = _STATE["allocator"](x.nbytes)
        else:                           # a view of device memory stays on its device
            base = x.base
            while base is not None and not isinstance(base, ndarray):
                base = getattr(base, "base", None)
            if base is not None:
                out._device_id = base._device_id
        return out
    if isinstance(x, np.generic):
        return _device(np.asarray(x))
    if isinstance(x, tuple):            # NumPy's named results are CuPy's plain tuples
        return tuple(_device(v) for v in x)
    if isinstance(x, list):
        return [_device(v) for v in x]
    return x


# the ufunc methods CuPy implements, and for which ufuncs (cupy/_core/_kernel.pyx: reduce and
# accumulate only for add and multiply, reduceat for add, at for the scatter ops)
_UFUNC_METHODS = {"reduce": {"add", "multiply"}, "accumulate": {"add", "multiply"},
                  "reduceat": {"add"},
                  "at": {"add", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or",
                         "bitwise_xor"}}


class _Ufunc:
    """A NumPy ufunc (calls dispatch to the device arrays' __array_ufunc__) whose methods
    fail where CuPy's do: ``xp.maximum.accumulate`` raises NotImplementedError on CuPy."""

    def __init__(self, ufunc):
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        return self._ufunc(*args, **kwargs)

    def __getattr__(self, name):
        if self.__name__ not in _UFUNC_METHODS.get(name, (self.__name__,)):
            raise NotImplementedError(f"`cupy_{self.__name__}.{name}` is not supported yet "
                                      f"(fake CuPy)")
        method = getattr(self._ufunc, name)
        if name != "at":
            return method

        def at(a, indices, *b):
            return method(a, _wrapped_key(a.shape, indices), *b)
        return at


# keyword arguments of CuPy functions whose NumPy namesakes take more (NumPy's extras, such
# as as_strided's writeable=, are TypeErrors on CuPy)
_CUPY_KEYWORDS = {"cupy.lib.stride_tricks.as_strided": {"x", "shape", "strides"},
                  "cupy.indices": {"dimensions", "dtype"},
                  "cupy.linalg.cholesky": {"a"}}


class _Namespace(types.ModuleType):
    """A module whose functions take and return device arrays (NumPy's underneath)."""

    def __init__(self, name, host):
        super().__init__(name)
        self._host = host

    def __getattr__(self, name):
        attr = getattr(self._host, name)
        if isinstance(attr, np.ufunc):
            wrapped = _Ufunc(attr)
            setattr(self, name, wrapped)
            return wrapped
        if isinstance(attr, (type, types.ModuleType)) or not callable(attr):
            return attr                 # dtypes, constants

        known = _CUPY_KEYWORDS.get(f"{self.__name__}.{name}")

        def call(*args, **kwargs):
            _refuse_host((args, kwargs), name)
            extra = known is not None and set(kwargs) - known
            if extra:
                raise TypeError(f"{name}() got an unexpected keyword argument "
                                f"'{extra.pop()}' (fake CuPy: CuPy's {name} has no such "
                                f"argument)")
            if name == "take":
                kwargs["mode"] = "wrap"
            elif name in ("take_along_axis", "put_along_axis"):
                a, index, at = args[0], args[1], 2 if name == "take_along_axis" else 3
                axis = kwargs.get("axis", args[at] if len(args) > at else None)
                if axis is not None and a.shape[axis]:
                    args = (a, _modulo(index, a.shape[axis])) + tuple(args[2:])
            result = _device(attr(*_plain(args), **_plain(kwargs)))
            if name == "broadcast_to" and args[0].flags.writeable:
                result.flags.writeable = True   # CuPy's broadcast views are writable
            return result
        call.__name__ = name
        return call


# --- cupy.linalg and cupyx.errstate ----------------------------------------------------------

# CuPy 14's cupy.linalg: its functions and their parameters (NumPy's have more: `upper=`,
# `hermitian=`, `driver=`, ...), and those that take one matrix, not a batch
_LINALG = {
    "cholesky": "a", "cond": "x, p=None", "cross": "x1, x2, /, *, axis=-1", "det": "a",
    "eig": "a", "eigh": "a, UPLO='L'", "eigvals": "a", "eigvalsh": "a, UPLO='L'", "inv": "a",
    "lstsq": "a, b, rcond=None", "matmul": "x1, x2, /", "matrix_power": "M, n",
    "matrix_rank": "M, tol=None", "matrix_transpose": "x, /",
    "norm": "x, ord=None, axis=None, keepdims=False", "pinv": "a, rcond=1e-15",
    "qr": "a, mode='reduced'", "slogdet": "a", "solve": "a, b",
    "svd": "a, full_matrices=True, compute_uv=True", "tensorinv": "a, ind=2",
    "tensorsolve": "a, b, axes=None"}
_ONE_MATRIX = {"lstsq"}
_ERRSTATE = {"linalg": "ignore"}


def _linalg_function(name):
    """cupy.linalg.<name>: CuPy's parameters, and (unless cupyx.errstate(linalg='raise'))
    no LinAlgError: like cuSOLVER's unchecked status, a failure gives NaNs."""
    signature = inspect.signature(eval(f"lambda {_LINALG[name]}: None"))
    host = getattr(np.linalg, name)

    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        args = bound.args
        _refuse_host((args, bound.kwargs), name)
        if name in _ONE_MATRIX and args[0].ndim != 2:
            raise np.linalg.LinAlgError(f"{args[0].ndim}-dimensional array given. Array "
                                        f"must be two-dimensional")
        try:
            return _device(host(*_plain(args), **_plain(bound.kwargs)))
        except np.linalg.LinAlgError:
            if _ERRSTATE["linalg"] == "raise":
                raise
        square = np.broadcast_to(np.eye(args[0].shape[-1], dtype=args[0].dtype), args[0].shape)
        unit = host(square, *_plain(args[1:]), **_plain(bound.kwargs))
        nan = _device(unit if isinstance(unit, tuple) else (unit,))
        nan = tuple(v * np.nan if v.dtype.kind in "fc" else v for v in nan)
        return nan if isinstance(unit, tuple) else nan[0]
    call.__name__ = name
    return call


def errstate(*, divide=None, over=None, under=None, invalid=None, linalg=None):
    """cupyx.errstate (only `linalg` does anything, as in CuPy)."""
    @contextlib.contextmanager
    def state():
        old = dict(_ERRSTATE)
        if linalg is not None:
            _ERRSTATE["linalg"] = linalg
        try:
            yield
        finally:
            _ERRSTATE.update(old)
    return state()


def _upload_order(host, order):
    """The layout CuPy gives a copy of host data: for order K, A or None, C order, or F order
    when the host array is F- but not C-contiguous (cupy/_core/core.pyx, _array_default),
    so a permuted or strided NumPy array arrives C-contiguous."""
    if order is None or order in "KAka":
        flags = getattr(host, "flags", None)
        return "F" if flags is not None and flags.f_contiguous and not flags.c_contiguous \
            else "C"
    return order


def _pinned(a):
    """Whether a host array views memory from ``alloc_pinned_memory``."""
    owner = a
    while owner is not None:
        if isinstance(owner, PinnedMemoryPointer):
            return True
        owner = owner.obj if isinstance(owner, memoryview) else getattr(owner, "base", None)
    return False


def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    if isinstance(a, ndarray):
        return a if dtype is None or a.dtype == dtype else a.astype(dtype)
    if blocking or not _pinned(a):      # from pinned memory, CUDA copies without waiting
        _note("upload")
    return _device(np.array(a, dtype=dtype, order=_upload_order(a, order), copy=True))


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    if not isinstance(obj, ndarray):
        _note("upload")
        order = _upload_order(obj, order)
    return _device(np.array(_plain(obj), dtype=dtype, order=order, copy=True, ndmin=ndmin))


# --- host traffic -----------------------------------------------------------------------------

_TRAFFIC = []               # the Counters of the host_traffic() blocks open now


class _HostProducer:
    def __init__(self, producer):
        self.producer = producer

    def __dlpack__(self, **kwargs):
        return self.producer.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return 1, 0


def from_dlpack(producer):
    """CuPy's: an array sharing a GPU producer's memory (here, the host memory behind it)."""
    out = np.from_dlpack(_HostProducer(producer)).view(ndarray)
    out._device_id = producer.__dlpack_device__()[1]
    return out


@contextlib.contextmanager
def host_traffic():
    """A Counter of the reads of device values and the uploads of host data made inside the
    block, keyed by kind and the calling source line: on a GPU each one waits for the
    device (an upload from pageable memory too), stalling the queue of kernels."""
    counts = collections.Counter()
    _TRAFFIC.append(counts)
    try:
        yield counts
    finally:
        _TRAFFIC.remove(counts)


def _note(kind):
    if not _TRAFFIC:
        return
    caller = next(f for f in reversed(traceback.extract_stack()[:-2])
                  if f.filename != __file__)
    site = f"{kind} at {caller.filename.rsplit('/src/', 1)[-1]}:{caller.lineno}"
    for counts in _TRAFFIC:
        counts[site] += 1


# --- memory -----------------------------------------------------------------------------------

class OutOfMemoryError(MemoryError):
    def __init__(self, size, total, limit=0):
        super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: "
                         f"{total:,} bytes).")


class _Memory:
    def __init__(self, size):
        self.size, self.device_id = size, _STATE["device"]
        _POOL.used += size
        _POOL.total = max(_POOL.total, _POOL.used)

    def __del__(self):
        _POOL.used -= self.size


class _MemoryPool:
    used = total = limit = 0

    def malloc(self, size):
        if self.used + size > (self.limit or TOTAL):
            raise OutOfMemoryError(size, self.used)
        return _Memory(size)

    def set_limit(self, size=None, fraction=None):     # one GPU's cap stands for each's
        self.limit = size or int((fraction or 0) * TOTAL)

    def get_limit(self):
        return self.limit

    def used_bytes(self):
        return self.used

    def total_bytes(self):
        return self.total

    def free_all_blocks(self, stream=None):
        self.total = self.used


def _nvtx():
    """cupy.cuda.nvtx, recording each call in ``calls`` as (name, arguments)."""
    nvtx = types.SimpleNamespace(available=True, calls=[])
    for name in ("RangePush", "RangePop", "RangeStart", "RangeEnd", "Mark"):
        setattr(nvtx, name, lambda *args, _name=name: nvtx.calls.append((_name, args)) or (
            len(nvtx.calls) if _name == "RangeStart" else None))
    return nvtx


class PinnedMemoryPointer(bytearray):
    """Host memory from ``alloc_pinned_memory`` (a buffer NumPy can view)."""


_POOL = _MemoryPool()
_STATE = {"device": 0, "allocator": _POOL.malloc, "streams": []}


def set_allocator(allocator=None):
    _STATE["allocator"] = allocator or _POOL.malloc


# --- streams and events -----------------------------------------------------------------------

class Stream:
    null = None

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        self.ptr = 0 if null else id(self)
        self.device_id = -1 if null else _STATE["device"]
        self.done = True
        self.priority = max(-5, min(0, priority or 0))     # clamped to H100's range, (0, -5)
        _STREAMS[self.ptr] = self

    def synchronize(self):
        pass

    def use(self):
        _STATE["streams"][-1:] = [self]

    def wait_event(self, event):
        pass

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def __enter__(self):
        _STATE["streams"].append(self)
        return self

    def __exit__(self, *exc):
        _STATE["streams"].pop()

    @classmethod
    def from_external(cls, obj):        # the CUDA stream protocol: (version, handle)
        version, handle = obj.__cuda_stream__()
        stream = cls()
        stream.ptr, stream.device_id, stream.external = handle, _STATE["device"], obj
        return stream


_STREAMS = weakref.WeakValueDictionary()     # ptr -> Stream, for runtime.streamGetPriority
Stream.null = Stream(null=True)
_STATE["streams"].append(Stream.null)


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.timing, self.time, self.done = not disable_timing, None, True
        self.ptr = id(self)

    def record(self, stream=None):
        self.time = time.perf_counter()

    def synchronize(self):
        pass


def get_elapsed_time(start, end):
    if not (start.timing and end.timing):
        raise RuntimeError("cudaErrorInvalidResourceHandle: invalid resource handle")
    return (end.time - start.time) * 1e3 + 1e-6


def _runtime():
    rt = types.ModuleType("cupy.cuda.runtime")
    rt.getDeviceCount = lambda: DEVICES
    rt.getDevice = lambda: _STATE["device"]
    rt.setDevice = lambda i: _STATE.__setitem__("device", i)
    rt.getDeviceProperties = lambda i: {
        "name": b"NVIDIA fake GPU (NumPy)", "major": 9, "minor": 0, "totalGlobalMem": TOTAL,
        "multiProcessorCount": 1, "l2CacheSize": 2 ** 20, "warpSize": 32}
    rt.memGetInfo = lambda: (TOTAL - _POOL.used, TOTAL)
    rt.deviceSynchronize = lambda: None
    rt.streamGetPriority = lambda ptr: _STREAMS[ptr].priority
    rt.deviceCanAccessPeer = lambda device, peer: 0        # the stand-in's GPUs have none
    rt.runtimeGetVersion = rt.driverGetVersion = lambda: 13000
    rt.deviceGetPCIBusId = lambda i: f"0000:{i + 1:02x}:00.0"
    rt.CUDARuntimeError = _CudaRuntimeError
    return rt


class _CudaRuntimeError(RuntimeError):
    _NAMES = {1: ("cudaErrorInvalidValue", "invalid argument"),
              2: ("cudaErrorMemoryAllocation", "out of memory")}

    def __init__(self, status):
        name, text = self._NAMES.get(status, ("cudaErrorUnknown", "unknown error"))
        super().__init__(f"{name}: {text}")


def _gemm_settings():
    """cupy._core._routines_linalg's compute types: remembered, not applied (NumPy has no
    TF32)."""
    linalg = types.ModuleType("cupy._core._routines_linalg")
    for value, name in enumerate(("TBD", "DEFAULT", "PEDANTIC", "FP16", "FP32", "FP64", "BF16",
                                  "TF32")):
        setattr(linalg, f"COMPUTE_TYPE_{name}", value)
    types_by_char = {"e": 0, "f": 0, "F": 0, "d": 0, "D": 0}

    def set_compute_type(dtype, compute_type):
        types_by_char[np.dtype(dtype).char] = compute_type

    linalg.set_compute_type = set_compute_type
    linalg.get_compute_type = lambda dtype: types_by_char[np.dtype(dtype).char] or 1
    return linalg



def install():
    """Put the fake into sys.modules as ``cupy`` and ``cupyx.scipy.special``."""
    cupy = _Namespace("cupy", np)
    for name in ("ndarray", "asarray", "array"):
        setattr(cupy, name, globals()[name])
    cupy.__version__ = "fake"
    cupy.fft = _Namespace("cupy.fft", scipy.fft)
    cupy.linalg = types.ModuleType("cupy.linalg")
    cupy.linalg.LinAlgError = np.linalg.LinAlgError
    for name in _LINALG:
        setattr(cupy.linalg, name, _linalg_function(name))
    cupy.lib = types.SimpleNamespace(
        stride_tricks=_Namespace("cupy.lib.stride_tricks", np.lib.stride_tricks))
    cupy.get_default_memory_pool = lambda: _POOL
    cupy.get_default_pinned_memory_pool = lambda: _MemoryPool()
    cuda = types.ModuleType("cupy.cuda")
    cuda.Device, cuda.Stream, cuda.Event = _Device, Stream, Event
    cuda.get_elapsed_time, cuda.set_allocator = get_elapsed_time, set_allocator
    cuda.get_current_stream = lambda device_id=-1: _STATE["streams"][-1]
    cuda.alloc_pinned_memory = PinnedMemoryPointer
    cuda.PinnedMemoryPointer = PinnedMemoryPointer
    cuda.memory = types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError)
    cuda.device = types.SimpleNamespace(get_cublas_handle=lambda: 0xC0B1A5)
    cuda.runtime = _runtime()
    cuda.nvtx = _nvtx()
    cupy.cuda = cuda
    cupyx = types.ModuleType("cupyx")
    cupyx.errstate = errstate
    cupyx.scipy = types.ModuleType("cupyx.scipy")
    cupyx.scipy.special = _Namespace("cupyx.scipy.special", scipy.special)
    core = types.ModuleType("cupy._core")
    core._routines_linalg = _gemm_settings()
    cupy._core = core
    sys.modules.update({"cupy._core": core, "cupy._core._routines_linalg": core._routines_linalg})
    sys.modules.update({"cupy": cupy, "cupy.cuda": cuda, "cupyx": cupyx,
                        "cupyx.scipy": cupyx.scipy, "cupyx.scipy.special": cupyx.scipy.special})
