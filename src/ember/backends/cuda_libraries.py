"""Which GPU libraries PyTorch prefers for products, linear algebra and ROCm's flash attention
(``torch.backends.cuda.preferred_*_library``), as ember can honour them.

ember's products run in cuBLAS (through CuPy) or in its own Triton kernels, and its linear
algebra in cuSOLVER (CuPy's); it has no cuBLASLt, MAGMA or ROCm path. So each preference is
checked as PyTorch checks it (cuBLASLt and MAGMA refused: ember cannot use them; cuSOLVER
refused without CuPy), remembered and reported, and changes nothing: what it asks for is
what ember does, or concerns ROCm (composable_kernel, AOTriton).
"""

import enum

__all__ = ["preferred_blas_library", "preferred_linalg_library", "preferred_rocm_fa_library"]


class _LibraryEnum(enum.Enum):
    """An enum of PyTorch's library choices: named members that convert to their int."""

    def __int__(self):
        return self.value

    __index__ = __int__


class _BlasBackend(_LibraryEnum):
    """The BLAS libraries of ``preferred_blas_library`` (``torch._C._BlasBackend``)."""

    Default = 0
    Cublas = 1
    Cublaslt = 2
    Ck = 3


class _LinalgBackend(_LibraryEnum):
    """The linear algebra libraries of ``preferred_linalg_library``."""

    Default = 0
    Cusolver = 1
    Magma = 2


class _ROCmFABackend(_LibraryEnum):
    """The ROCm flash-attention libraries of ``preferred_rocm_fa_library``."""

    Default = 0
    AOTriton = 1
    Ck = 2


_BLAS = {"default": _BlasBackend.Default, "cublas": _BlasBackend.Cublas,
         "hipblas": _BlasBackend.Cublas, "cublaslt": _BlasBackend.Cublaslt,
         "hipblaslt": _BlasBackend.Cublaslt, "ck": _BlasBackend.Ck}
_LINALG = {"default": _LinalgBackend.Default, "cusolver": _LinalgBackend.Cusolver,
           "magma": _LinalgBackend.Magma}
_ROCM_FA = {"default": _ROCmFABackend.Default, "aotriton": _ROCmFABackend.AOTriton,
            "ck": _ROCmFABackend.Ck}
_PREFERRED = {_BlasBackend: _BlasBackend.Default, _LinalgBackend: _LinalgBackend.Default,
              _ROCmFABackend: _ROCmFABackend.Default}


def _choice(backend, names, kind, wrong_type):
    """The member ``backend`` names (a string of ``names`` or a ``kind`` member), or None."""
    if backend is None or isinstance(backend, kind):
        return backend
    if isinstance(backend, str):
        if backend not in names:
            raise RuntimeError(f"Unknown input value. Choose from: {', '.join(names)}.")
        return names[backend]
    raise wrong_type


def _not_built(library):
    return RuntimeError(f"Cannot set preferred backend to {library} if ember has not been "
                        f"compiled with {library}.")


def preferred_blas_library(backend=None):
    """The library preferred for matrix products, after setting it to ``backend`` ("cublas",
    "default", "ck", ... or a member of the returned enum) if given. cuBLAS, which ember's
    products use, is the answer for "default"; cuBLASLt is refused (ember cannot route products
    through it) and CK (ROCm's) is remembered only."""
    choice = _choice(backend, _BLAS, _BlasBackend, RuntimeError("Unknown input value type."))
    if choice is _BlasBackend.Cublaslt:
        raise _not_built("cuBLASLt")
    if choice is not None:
        _PREFERRED[_BlasBackend] = choice
    preferred = _PREFERRED[_BlasBackend]
    return _BlasBackend.Cublas if preferred is _BlasBackend.Default else preferred


def preferred_linalg_library(backend=None):
    """The library preferred for linear algebra on the GPU, after setting it to ``backend``
    ("cusolver", "magma", "default" or a member of the returned enum) if given. ember's
    linear algebra is CuPy's cuSOLVER whatever the choice; MAGMA is refused (ember has none),
    and so is cuSOLVER where CuPy is not installed."""
    from ember.backends.cuda import is_built
    choice = _choice(backend, _LINALG, _LinalgBackend,
                     RuntimeError("Unknown input value type."))
    if choice is _LinalgBackend.Cusolver and not is_built():
        raise _not_built("cuSOLVER")
    if choice is _LinalgBackend.Magma:
        raise _not_built("MAGMA")
    if choice is not None:
        _PREFERRED[_LinalgBackend] = choice
    return _PREFERRED[_LinalgBackend]


def preferred_rocm_fa_library(backend=None):
    """The flash-attention library preferred on ROCm (AMD GPUs), after setting it to
    ``backend`` ("default", "aotriton", "ck" or a member of the returned enum) if given:
    remembered only, as ember runs on NVIDIA GPUs."""
    names = ", ".join(_ROCM_FA)
    choice = _choice(backend, _ROCM_FA, _ROCmFABackend,
                     ValueError(f"Unknown input value. Choose from: {names}."))
    if choice is not None:
        _PREFERRED[_ROCmFABackend] = choice
    return _PREFERRED[_ROCmFABackend]
