"""Where storages go: the location tags a checkpoint records ("cpu", "cuda:0") and the
restorers that put loaded storages on a device, with the registry ``register_package``
extends (PyTorch's built-ins: the CPU at priority 10, other devices at 20)."""

import contextlib
import shutil
import tempfile
import warnings

from ember._device import device
from ember.serialization._rebuild import LoadedStorage


def _cuda_unavailable():
    return RuntimeError(
        "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is "
        "False. If you are running on a CPU-only machine, please use torch.load with "
        "map_location=torch.device('cpu') to map your storages to the CPU.")


def _target_device(location):
    try:
        dev = device(str(location))
    except (RuntimeError, TypeError):
        raise RuntimeError(f"don't know how to restore data location of "
                           f"ember.storage.UntypedStorage (tagged with {location})") from None
    if dev.type == "cuda":
        validate_cuda_device(dev)
    return dev


def validate_cuda_device(location):
    """The index of CUDA device ``location`` (a device or string), checked to exist."""
    dev = device(location) if not isinstance(location, device) else location
    if dev.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {dev}")
    from ember import cuda
    if not cuda.is_available():
        raise _cuda_unavailable()
    index = dev.index or 0
    if index >= cuda.device_count():
        raise RuntimeError(
            f"Attempting to deserialize object on CUDA device {index} but "
            f"torch.cuda.device_count() is {cuda.device_count()}. Please use torch.load "
            f"with map_location to map your storages to an existing device.")
    return index


def validate_hpu_device(location):
    """ember has no HPU backend: always PyTorch's error for a missing HPU module."""
    raise RuntimeError(
        "The HPU device module is not registered. If you are running on a CPU-only machine, "
        "please use torch.load with map_location=torch.device('cpu') to map your storages to "
        "the CPU.")


def _tag(storage):
    dev = device(storage.device)
    return "cpu" if dev.type == "cpu" else f"{dev.type}:{dev.index or 0}"


def _cpu_tag(storage):
    return "cpu" if device(storage.device).type == "cpu" else None


def _cpu_restore(storage, location):
    return _moved(storage, "cpu") if location == "cpu" else None


def _moved(storage, location):
    return LoadedStorage(storage.bytes, storage.dtype, _target_device(location))


# (priority, tagger, restorer), lowest priority first
_registry = [(10, _cpu_tag, _cpu_restore), (20, _tag, _moved)]
_BUILT_IN = len(_registry)


def register_package(priority, tagger, deserializer):
    """Add a ``tagger(storage) -> location or None`` and a ``deserializer(storage,
    location) -> storage or None``, run by priority (lowest first) among the built-ins (the
    CPU's at 10, other devices' at 20) until one returns something other than None."""
    if not callable(tagger) or not callable(deserializer):
        raise TypeError("register_package: tagger and deserializer must be callable")
    _registry.append((priority, tagger, deserializer))
    _registry.sort(key=lambda entry: entry[0])


def location_tag(storage):
    """The location string a checkpoint records for ``storage`` (``"cpu"``, ``"cuda:0"``)."""
    for _, tagger, _ in _registry:
        tag = tagger(storage)
        if tag:
            return tag
    raise RuntimeError(f"don't know how to determine data location of "
                       f"{type(storage).__module__}.{type(storage).__name__}")


def tag_of(tensor):
    """The location tag of ``tensor``'s storage (the registry runs only once it was
    extended)."""
    if len(_registry) == _BUILT_IN:
        return _tag(tensor)
    return location_tag(tensor.untyped_storage())


def default_restore_location(storage, location):
    """``storage`` moved to the device named by ``location`` (``"cpu"``, ``"cuda:0"``), for
    ``map_location`` callables."""
    for _, _, restorer in _registry:
        result = restorer(storage, location)
        if result is not None:
            return result
    raise RuntimeError(f"don't know how to restore data location of "
                       f"{type(storage).__name__} (tagged with {location})")


def restore(storage, location, map_location):
    """The storage on the device ``map_location`` picks for one saved with ``location``."""
    if map_location is None:
        if len(_registry) == _BUILT_IN:
            return _moved(storage, location)
        return default_restore_location(storage, location)
    if isinstance(map_location, dict):
        return restore(storage, map_location.get(location, location), None)
    if callable(map_location):
        result = map_location(storage, location)
        if result is None:
            return restore(storage, location, None)
        if not isinstance(result, LoadedStorage):
            raise TypeError(f"map_location should return a storage or None, got "
                            f"{type(result).__name__}")
        _target_device(result.device)
        return result
    return restore(storage, str(map_location), None)


@contextlib.contextmanager
def mkdtemp():
    """A temporary folder's path, the folder removed with everything in it on exit."""
    path = tempfile.mkdtemp()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def check_module_version_greater_or_equal(module, req_version_tuple, error_if_malformed=True):
    """Whether ``module.__version__``'s leading parts are at least ``req_version_tuple``
    (each part parsed as the type of the matching required one). A version that cannot be
    read so raises RuntimeError, or with ``error_if_malformed=False`` warns and counts as met."""
    parts = module.__version__.split(".")
    try:
        version = tuple(type(required)(parts[i]) for i, required in enumerate(req_version_tuple))
    except (IndexError, ValueError, TypeError):
        message = (f"'{module.__name__}' module version string is malformed "
                   f"'{module.__version__}' and cannot be compared with tuple "
                   f"{req_version_tuple}")
        if error_if_malformed:
            raise RuntimeError(message) from None
        warnings.warn(message + ", but continuing assuming that requirement is met",
                      stacklevel=2)
        return True
    return version >= tuple(req_version_tuple)


def normalize_storage_type(storage_type):
    """The ``ember`` storage class of the same name as ``storage_type``."""
    import ember
    return getattr(ember, storage_type.__name__)


def storage_to_tensor_type(storage):
    """The legacy tensor type (``ember.FloatTensor``...) of ``storage``'s dtype."""
    from ember._legacy_types import CPU_TYPES, CUDA_TYPES
    types = CUDA_TYPES if device(storage.device).type == "cuda" else CPU_TYPES
    return types[storage.dtype._legacy]
