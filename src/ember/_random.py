"""Random numbers: Generator, manual_seed, and sampling (rand, randn, normal, ...).

Streams come from NumPy's PCG64. They do not match PyTorch's bit for bit, but a seed makes
ember reproducible with itself. On a GPU with the CUDA kernels loaded, uniform, normal and
Bernoulli samples of 32- and 16-bit floats (rand, randn, normal, uniform_, normal_,
bernoulli, dropout's masks) and integers from spans up to 2**32 (randint, random_) are drawn
on the device instead, from a counter-based (Philox) stream of the generator's seed: the
generator then also counts the numbers it has handed out (``_offset``). The other samples
are drawn on the host and uploaded.
"""

import functools
import json

import numpy as np

from ember import _dtype as D
from ember._creation import (_finish, _out_device, _out_dtype, _place, _target,
                             _write_out, check_like_input, check_requires_grad, in_format,
                             offered_to_overrides, pinned)
from ember._device import as_device, get_default_device
from ember._from_data import _tp_name
from ember._sizes import _size
from ember.backend import (DEVICE_KERNELS, XP_BY_ARRAY_TYPE, cuda_available, cuda_backend,
                           device_assert, device_guard, device_of, host_array, on_device_of,
                           xp_of)
from ember._tensor import Tensor, _make
from ember._random_checks import (NO_CUDA_GENERATOR, _as_float, _barebones,  # noqa: F401
                                  _NOT_GIVEN, _parsed_size, _parser_error, _randint_args,
                                  _check_like_bounds, _check_long, _check_permutation_dtype,
                                  _check_random_bounds, _check_size_given, _check_std,
                                  _continuous, _float_dtype, _normal_dtype,
                                  _not_implemented_for, _random_limit)
from ember.backend.meta import MetaArray

__all__ = [
    "Generator", "default_generator", "manual_seed", "seed", "initial_seed",
    "get_rng_state", "set_rng_state", "rand", "randn", "randint", "randperm", "normal",
    "bernoulli", "multinomial", "poisson", "binomial", "rand_like", "randn_like", "randint_like",
    "_standard_gamma", "_sample_dirichlet",
]


_CPU_STATE_SIZE = 5056      # bytes in PyTorch's CPU generator state (ember's is JSON, padded)


class Generator:
    """A random number generator with its own state (``torch.Generator``)."""

    def __init__(self, device="cpu"):
        self.device = as_device("cpu" if device is None else device)
        if self.device.type == "cpu":           # (PyTorch's CPU generators have no index)
            self.device = as_device("cpu")
        elif self.device.type == "meta":
            raise RuntimeError("META device type not an accelerator.")
        elif self.device.type == "cuda" and not cuda_available():
            raise RuntimeError(NO_CUDA_GENERATOR)
        self._start()

    @classmethod
    def _unchecked(cls, device):
        """A generator for ``device`` made without asking for the device: the CUDA default
        generators can be seeded before, and without, a GPU (as PyTorch's lazy seeding)."""
        gen = cls.__new__(cls)
        gen.device = as_device(device)
        gen._start()
        return gen

    def _start(self):
        self._seed = 67280421310721            # PyTorch's default CPU seed
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        self._offset = 0                        # numbers drawn from the device stream

    def manual_seed(self, seed):
        """Reset the state from ``seed`` (an integer) and return self."""
        if isinstance(seed, (bool, Tensor)) or not hasattr(type(seed), "__index__"):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        seed = seed.__index__()
        if not -0x8000_0000_0000_0000 <= seed <= 0xFFFF_FFFF_FFFF_FFFF:
            raise ValueError("Overflow when unpacking long long")
        self._seed = seed & 0xFFFF_FFFF_FFFF_FFFF
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        self._offset = 0
        return self

    def seed(self):
        """Seed from the operating system's entropy and return the new seed."""
        new = int(np.random.SeedSequence().entropy) & 0xFFFF_FFFF_FFFF_FFFF
        self.manual_seed(new)
        return new

    def initial_seed(self):
        """The seed this generator was last seeded with."""
        return self._seed

    def get_state(self):
        """The generator state as a uint8 tensor (of PyTorch's fixed size on CPU, so that
        states can be stacked or broadcast between processes)."""
        state = {"seed": self._seed, "bit_generator": self._rng.bit_generator.state,
                 "offset": self._offset}
        text = json.dumps(state).encode()
        if self.device.type == "cpu":            # JSON allows the trailing blanks
            text = text.ljust(_CPU_STATE_SIZE)
        return _make(np.frombuffer(text, dtype=np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state returned by ``get_state``; returns self."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a torch.ByteTensor, but got "
                            f"{type(new_state).__name__}")
        if new_state.dtype is not D.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        on_cpu = self.device.type == "cpu"
        if on_cpu and new_state.numel() != _CPU_STATE_SIZE:
            raise RuntimeError(f"Expected a CPUGeneratorImplState of size {_CPU_STATE_SIZE} "
                               f"but found the input RNG state size to be {new_state.numel()}")
        try:
            state = json.loads(np.asarray(new_state).tobytes().decode())
            bit_generator = state["bit_generator"]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError):
            raise RuntimeError("Invalid mt19937 state" if on_cpu else
                               f"Expected an RNG state from Generator.get_state, but found "
                               f"{new_state.numel()} bytes that are not one") from None
        self._seed = state["seed"]
        self._rng = np.random.Generator(np.random.PCG64())
        self._rng.bit_generator.state = bit_generator
        self._offset = state.get("offset", 0)
        return self

    def clone_state(self):
        """A new generator on the same device in this one's state."""
        return Generator._unchecked(self.device).set_state(self.get_state())

    def get_offset(self):
        """How far a GPU generator's counter-based stream has advanced."""
        self._check_offset()
        return self._offset

    def set_offset(self, offset):
        """Move a GPU generator's stream to ``offset``; returns self."""
        self._check_offset()
        self._offset = int(offset)
        return self

    def _check_offset(self):
        if self.device.type == "cpu":
            raise RuntimeError("CPU Generator does not use offset")

    def graphsafe_get_state(self):
        """Not available: ember has no CUDA graphs to capture generators in."""
        raise NotImplementedError("graphsafe_get_state is not supported in this Generator")

    def graphsafe_set_state(self, state):
        """Not available: ember has no CUDA graphs to capture generators in."""
        raise NotImplementedError("graphsafe_set_state is not supported in this Generator")


default_generator = Generator()


def _checked(generator):
    """``generator`` itself, after checking that it is a Generator (PyTorch's TypeError)."""
    if not isinstance(generator, Generator):
        raise TypeError(f"argument 'generator' must be torch.Generator, not "
                        f"{type(generator).__name__}")
    return generator


def _check_generator(generator, fn):
    """PyTorch's TypeError, naming ``fn``, for a ``generator`` that is not a Generator."""
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{fn}(): argument 'generator' must be torch.Generator, not "
                        f"{_tp_name(generator)}")


def _rng(generator):
    return (default_generator if generator is None else _checked(generator))._rng


def _drawn_on_device(generator, shape, dtype, device, kind="uniform", low=0.0, high=1.0):
    """``shape`` samples of ``dtype`` drawn on GPU ``device`` by the CUDA kernels, from the
    counter-based stream of the generator's seed (``generator`` or the GPU's default one):
    of ``kind`` "uniform" (on [low, high)), "normal" (mean ``low``, std ``high``) or
    "integers" (in [low, high)). None where they cannot be: a CPU device or generator, no
    kernels, what they do not store (float64, ...)."""
    if device.type != "cuda" or (generator is not None and generator.device.type == "cpu"):
        return None
    backend = cuda_backend()                        # loads the kernels with the backend
    draw = DEVICE_KERNELS.get("random")
    if draw is None:
        return None
    if generator is None:
        from ember.cuda.random import default_generator as cuda_default
        generator = cuda_default(device.index)
    _before_draw(generator)
    with backend.device_guard(device.index):
        out = draw(backend.cupy, tuple(shape), dtype.np, generator._seed, generator._offset,
                   kind, low, high)
    if out is not None:                             # None: the kernel cannot run here
        generator._offset += out.size
    return out


def _before_draw(generator):
    """A draw from ``generator`` that skips its NumPy stream (a Philox kernel's) still meets
    the checks of a vmap watching it (func/_vmap.py's _GuardedRng)."""
    check = getattr(type(generator._rng), "before_draw", None)
    if check is not None:
        check()


def _philox_reserved(device, n):
    """(seed, offset) of ``n`` numbers taken from the Philox stream of GPU ``device``'s
    default generator, for a kernel that draws them itself (flash attention's dropout)."""
    from ember.cuda.random import default_generator as cuda_default
    generator = cuda_default(device.index)
    _before_draw(generator)
    seed, offset = generator._seed, generator._offset
    generator._offset += n
    return seed, offset


def _philox_uniform(seed, offset, shape, like):
    """Uniform float32 numbers, on ``like``'s GPU, of elements ``offset`` onward of the
    Philox stream of ``seed``, in ``shape``'s order: what a kernel drew there (None without
    the kernels)."""
    draw = DEVICE_KERNELS.get("random")
    if draw is None:
        return None
    with device_guard(device_of(like).index):
        return draw(xp_of(like), tuple(shape), np.float32, seed, offset)


def _uniform_like(generator, shape, like):
    """Uniform [0, 1) float32 numbers of ``shape`` where array ``like`` lives: drawn on its
    GPU when the kernels can (``_drawn_on_device``), else on the host and moved."""
    if XP_BY_ARRAY_TYPE.get(type(like), np) is not np:      # a GPU array
        out = _drawn_on_device(generator, shape, D.float32, device_of(like))
        if out is not None:
            return out
    return on_device_of(_rng(generator).random(shape, dtype="float32"), like)


def _rng_on(generator, device):
    """The stream a sample for ``device`` (None: the default device) draws from: the
    generator given, else that device's default generator."""
    if generator is not None:
        return _checked(generator)._rng
    dev = get_default_device() if device is None else as_device(device)
    if dev.type != "cuda":              # a meta sample keeps only the draws' shape
        return default_generator._rng
    from ember.cuda.random import default_generator as cuda_default
    return cuda_default(dev.index)._rng


def manual_seed(seed):
    """Seed the default generator and the CUDA generators; returns the default generator."""
    gen = default_generator.manual_seed(int(seed))
    from ember.cuda.random import manual_seed_all
    manual_seed_all(gen.initial_seed())
    return gen


def seed():
    """Seed the default generator (and the CUDA generators) non-deterministically; returns
    the seed."""
    new = default_generator.seed()
    from ember.cuda.random import manual_seed_all
    manual_seed_all(new)
    return new


def initial_seed():
    """The default generator's seed."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state as a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state."""
    default_generator.set_state(new_state)


def _sample(array, dtype, device, requires_grad):
    _, dev = _target(device)
    return _finish(_place(np.asarray(array).astype(dtype.np), dev), requires_grad)


def _complex(rng, shape, draw):
    # complex samples: real and imaginary parts each with half the variance
    return np.asarray((draw(rng, shape) + 1j * draw(rng, shape)) / np.sqrt(2))


def rand(*sizes, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
         requires_grad=False, pin_memory=False):
    """Uniform samples on [0, 1)."""
    _check_generator(generator, "rand")
    check_requires_grad(requires_grad, "rand")
    if pin_memory:
        return pinned(rand(*sizes, size=size, generator=generator, dtype=dtype, device=device,
                           requires_grad=requires_grad), True)
    sizes = _parsed_size(sizes, size, "rand")
    dtype = _out_dtype(dtype, out, "rand")
    device = _out_device(device, out)
    shape = _size(sizes)
    dtype = _float_dtype(dtype, "check_uniform_bounds")
    _barebones(dtype, "check_uniform_bounds", wide_unsigned=False)
    drawn = _drawn_on_device(generator, shape, dtype, _target(device)[1])
    if drawn is not None:
        return _fill_out(out, _finish(drawn, requires_grad))
    rng = _rng_on(generator, device)
    arr = rng.random(shape) if not dtype.is_complex else rng.random(shape) + 1j * rng.random(shape)
    return _fill_out(out, _sample(arr, dtype, device, requires_grad))


def randn(*sizes, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
          requires_grad=False, pin_memory=False):
    """Standard normal samples."""
    _check_generator(generator, "randn")
    check_requires_grad(requires_grad, "randn")
    if pin_memory:
        return pinned(randn(*sizes, size=size, generator=generator, dtype=dtype, device=device,
                            requires_grad=requires_grad), True)
    sizes = _parsed_size(sizes, size, "randn")
    dtype = _out_dtype(dtype, out, "randn")
    device = _out_device(device, out)
    shape = _size(sizes)
    dtype = _normal_dtype(dtype, shape)
    drawn = _drawn_on_device(generator, shape, dtype, _target(device)[1], "normal")
    if drawn is not None:
        return _fill_out(out, _finish(drawn, requires_grad))
    rng = _rng_on(generator, device)
    arr = rng.standard_normal(shape) if not dtype.is_complex else \
        _complex(rng, shape, lambda r, s: r.standard_normal(s))
    return _fill_out(out, _sample(arr, dtype, device, requires_grad))


def randint(low=_NOT_GIVEN, high=None, size=None, *more, generator=None, out=None, dtype=None,
            layout=None, device=None, requires_grad=False):
    """Integers drawn uniformly from [low, high)."""
    _check_generator(generator, "randint")
    check_requires_grad(requires_grad, "randint")
    try:
        low, high, size = _randint_args(low, high, size, more)
    except TypeError as error:
        raise _parser_error(str(error)) from None
    dtype = _out_dtype(dtype, out, "randint")
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    dtype = D.int64 if dtype is None else dtype
    device = _out_device(device, out)
    _barebones(dtype, "random_update_from_to", wide_unsigned=False)
    _check_random_bounds(dtype, low, high)
    shape = _size((size,))
    drawn = _drawn_on_device(generator, shape, dtype, _target(device)[1], "integers", low, high)
    if drawn is not None:
        return _fill_out(out, _finish(drawn, requires_grad))
    arr = _rng_on(generator, device).integers(low, high, size=shape, dtype=np.int64)
    return _fill_out(out, _sample(arr, dtype, device, requires_grad))


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None,
             requires_grad=False, pin_memory=False):
    """A random permutation of 0..n-1."""
    _check_generator(generator, "randperm")
    check_requires_grad(requires_grad, "randperm")
    if pin_memory:
        return pinned(randperm(n, generator=generator, dtype=dtype, device=device,
                               requires_grad=requires_grad), True)
    try:
        _check_long(n, "randperm(): argument 'n' (position 1)")
    except TypeError as error:
        raise _parser_error(str(error)) from None
    n = n.__index__()
    dtype = _out_dtype(dtype, out, "randperm")
    if n < 0:       # (PyTorch's out= overload checks n itself; the other makes a tensor of n)
        raise RuntimeError(f"n must be non-negative, got{n}" if out is not None else
                           f"Trying to create tensor with negative dimension {n}: [{n}]")
    dtype = D.int64 if dtype is None else dtype
    device = _out_device(device, out)
    _check_permutation_dtype(dtype, n)
    drawn = _permutation_on_device(generator, n, _target(device)[1])
    if drawn is not None:
        return _fill_out(out, _finish(drawn.astype(dtype.np, copy=False), requires_grad))
    arr = _rng_on(generator, device).permutation(n)
    return _fill_out(out, _sample(arr, dtype, device, requires_grad))


def _permutation_on_device(generator, n, device):
    """A random permutation of 0..n-1 made on GPU ``device`` (None where the kernels cannot
    draw): the order of n random 62-bit keys drawn there, so that a training step's shuffle
    (mixup's, say) neither draws on the host nor waits for an upload."""
    keys = _drawn_on_device(generator, (2, n), D.int64, device, "integers", 0, 2 ** 31)
    if keys is None:
        return None
    with device_guard(device.index):
        return xp_of(keys).argsort(keys[0] * 2 ** 31 + keys[1])


def _vmap_aware(sample, inplace=False):
    """``sample`` (a random function reading its tensor arguments' values), which hands a
    call with a vmap BatchedTensor argument to vmap's randomness rules."""
    @functools.wraps(sample)
    def sampler(*args, **kwargs):
        from ember.func._batched import BatchedTensor
        if any(type(a) is BatchedTensor for a in args) or any(
                type(a) is BatchedTensor for a in kwargs.values()):
            from ember.func._vmap import batched_random
            return batched_random(sample, args, kwargs, inplace)
        if inplace:
            from ember.ops._dispatch import ACTIVE_VMAPS
            if ACTIVE_VMAPS[0]:
                from ember.func._vmap import unbatched_inplace_random
                unbatched_inplace_random()
        return sample(*args, **kwargs)
    # (the call reads as ``sample``'s, whose frame holds the arguments by name: _call_site)
    sampler._ember_forwards = True
    return sampler


def _fill_out(out, result):
    if out is None:
        return result
    _write_out(out, result._data)
    if result.requires_grad:            # requires_grad=True with out= marks out
        out._set_requires_grad(True)
    return out


@_vmap_aware
def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None,
           layout=None, device=None, requires_grad=False):
    """Normal samples with the given mean(s) and standard deviation(s)."""
    check_requires_grad(requires_grad, "normal")
    _check_generator(generator, "normal")
    if size is not None:                # the (float mean, float std, size) form
        mean, std = _as_float(mean, "mean", 1), _as_float(std, "std", 2)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        check_out_grad((mean, std), "normal", out)
        if not (isinstance(std, Tensor) and type(std._data) is MetaArray):     # (no values)
            _check_std(std, host_array(std._data) if isinstance(std, Tensor) else std)
        from ember._random_inplace import normal_of_tensors
        result = normal_of_tensors(mean, std, generator, out)
        if out is not None:
            return out
        node = "NormalBackward" + ("3" if isinstance(mean, Tensor) and isinstance(std, Tensor)
                                   else "1" if isinstance(mean, Tensor) else "2")
        return sampled((mean, std), result, node, "normal")
    if size is None:
        raise TypeError("normal(): with float mean and std a size is required")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"normal(): argument 'size' must be tuple of ints, not "
                        f"{type(size).__name__}")
    device = _out_device(device, out)
    shape = _size((size,))
    dtype = _out_dtype(dtype, out, "normal")
    _check_std(std, std)
    dtype = _normal_dtype(dtype, shape)
    drawn = _drawn_on_device(generator, shape, dtype, _target(device)[1], "normal", mean, std)
    if drawn is not None:
        return _fill_out(out, _finish(drawn, requires_grad))
    arr = mean + std * _rng_on(generator, device).standard_normal(shape)
    return _fill_out(out, _sample(arr, dtype, device, requires_grad))


@_vmap_aware
def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 samples with probabilities ``input`` (or the scalar ``p``)."""
    _check_generator(generator, "bernoulli")
    if p is not None and out is not None:       # (PyTorch declares no such overload)
        raise _parser_error("bernoulli() got an unexpected keyword argument 'out'")
    check_out_grad((input,), "bernoulli", out)
    if p is not None and not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
    # (the kernels, which refuse dtypes, run where there are elements: float8, uint16/32/64
    # and complex are refused there)
    if p is not None and input.numel():
        _not_implemented_for(input.dtype, "bernoulli_scalar_cpu_", (D.COMPLEX,))
        _barebones(input.dtype, "bernoulli_scalar_cpu_")
    elif p is None and input.numel():
        # PyTorch fills ``out`` (or a tensor like input) with probabilities ``input``
        self_dtype = (input if out is None else out).dtype
        _not_implemented_for(self_dtype, "bernoulli_tensor_cpu_self_", (D.COMPLEX,))
        _barebones(self_dtype, "bernoulli_tensor_cpu_self_")
        _not_implemented_for(input.dtype, "bernoulli_tensor_cpu_p_", (D.COMPLEX,))
    node = "BernoulliBackward0" if p is None else NOT_IMPLEMENTED
    drawn = _drawn_on_device(generator, input.shape, D.float32, input.device)
    if drawn is not None:
        return sampled((input,), _make(_below(drawn, input._data if p is None else p)
                                       .astype(input._data.dtype)), node, "bernoulli", out)
    probs = host_array(input._data) if p is None else np.full(input.shape, p)
    if p is None and input.dtype.category < D.FLOATING and input.numel():
        raise NotImplementedError(f"\"bernoulli_tensor_cpu_p_\" not implemented for "
                                  f"'{input.dtype._torch_name}'")
    if probs.size and not ((probs >= 0) & (probs <= 1)).all():     # NaN fails too
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could "
                           "this error message be improved?  If so, please report an "
                           "enhancement request to PyTorch.)")
    arr = _rng_on(generator, input.device).random(input.shape) < probs
    return sampled((input,), _sample(arr, input.dtype, input.device, False), node, "bernoulli",
                   out)


@_vmap_aware
def binomial(count, prob, generator=None):
    """Binomial samples: successes in ``count`` trials of probability ``prob`` each
    (broadcast together), in ``count``'s dtype."""
    _check_generator(generator, "binomial")
    for name, t in (("count", count), ("prob", prob)):
        if not t.is_floating_point():
            raise ValueError(f"binomial only supports floating-point dtypes for {name}, got: "
                             f"{t.dtype._legacy[:-len('Tensor')]}")
    try:
        shape = np.broadcast_shapes(count.shape, prob.shape)
    except ValueError:
        from ember.ops._registry import broadcast_message
        raise RuntimeError(broadcast_message([count.shape, prob.shape])) from None
    if prob.dtype is not count.dtype:
        raise RuntimeError(f"Found dtype {prob.dtype._torch_name} but expected "
                           f"{count.dtype._torch_name}")
    if count.dtype.itemsize < 4:
        raise NotImplementedError(f"\"binomial_cpu\" not implemented for "
                                  f"'{count.dtype._torch_name}'")
    counts = np.broadcast_to(host_array(count._data), shape).astype(np.float64)
    probs = np.broadcast_to(host_array(prob._data), shape).astype(np.float64)
    arr = _binomial_draws(_rng_on(generator, count.device), counts, probs)
    return sampled((count, prob), _sample(arr, count.dtype, count.device, False),
                   NOT_IMPLEMENTED, "binomial")


def _binomial_draws(rng, counts, probs):
    """Binomial draws where they are defined; elsewhere what PyTorch's sampler gives: 0 for
    a count or probability <= 0, the count for a probability >= 1, NaN for a NaN
    probability (and, where PyTorch's sampler never returns, the count if not finite)."""
    with np.errstate(invalid="ignore"):
        counted = ~(counts <= 0)                # (a NaN count is)
        drawn = counted & (probs > 0) & (probs < 1)
        finite = drawn & np.isfinite(counts)
        arr = np.asarray(rng.binomial(np.where(finite, counts, 0).astype(np.int64),
                                      np.where(finite, probs, 0.5)), dtype=np.float64)
        whole = drawn | counted & (probs >= 1)
        rest = np.where(np.isnan(probs) & counted, np.nan, 0.0)
        return np.where(finite, arr, np.where(whole, counts, rest))


@_vmap_aware
def poisson(input, generator=None):
    """Poisson samples with rates ``input``."""
    _check_generator(generator, "poisson")
    if input.dtype.category != D.FLOATING:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for "
                                  f"'{input.dtype._torch_name}'")
    if input.numel() and not bool((input >= 0).all()):      # NaN too
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    arr = _rng_on(generator, input.device).poisson(host_array(input._data).astype(np.float64))
    return sampled((input,), _sample(arr, input.dtype, input.device, False), "PoissonBackward0",
                   "poisson")


@_vmap_aware
def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Indices sampled from each row of non-negative weights."""
    _check_generator(generator, "multinomial")
    if replacement is not False and replacement is not True:
        from ember.ops._dims import _argument, type_name
        raise TypeError(f"{_argument(('multinomial', 'replacement', 2))} must be bool, not "
                        f"{type_name(replacement)}")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if input.dtype.category != D.FLOATING:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{input.dtype._torch_name}")
    num_samples = _check_long(num_samples, "multinomial(): argument 'num_samples' (position 2)")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if out is not None and out.dtype is not D.int64:
        raise RuntimeError(f"multinomial expects Long tensor out, got: {out.dtype._torch_name}")
    if not replacement and num_samples > input.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if input.is_meta:
        return _fill_out(out, _finish(MetaArray(input.shape[:-1] + (num_samples,), np.int64),
                                      False))
    if input.shape[-1] > 2 ** 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    if input.is_cuda and input.numel():
        drawn = _multinomial_on_device(input, num_samples, replacement, generator)
        if drawn is not None:
            return _fill_out(out, _finish(drawn[0] if input.ndim == 1 else drawn, False))
    n_rows = input.shape[0] if input.ndim == 2 else 1
    if input.shape[-1] == 0 and n_rows:
        if replacement and num_samples > 1:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    w = np.asarray(host_array(input._data), dtype=np.float64)
    rows = w.reshape(n_rows, w.shape[-1])
    bad = ~(rows >= 0) | np.isinf(rows)
    if bad.any():
        if not replacement or num_samples == 1:
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        first = rows[bad][0]        # PyTorch's kernel for several draws with replacement
        what = "= infinity or NaN" if first == np.inf else "< 0"
        raise RuntimeError(f"invalid multinomial distribution (encountering probability entry "
                           f"{what})")
    rng = _rng_on(generator, input.device)
    result = np.empty((rows.shape[0], num_samples), dtype=np.int64)
    for i, row in enumerate(rows):
        total = row.sum()
        if total <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if not replacement and np.count_nonzero(row) < num_samples:
            # as PyTorch: every category of positive weight (in weighted order), then
            # categories of weight 0 (in random order)
            positive = np.flatnonzero(row)
            first = rng.choice(positive, size=positive.size, replace=False,
                               p=row[positive] / total)
            rest = rng.permutation(np.flatnonzero(row == 0))
            result[i] = np.concatenate([first, rest])[:num_samples]
        else:
            result[i] = rng.choice(row.size, size=num_samples, replace=replacement,
                                   p=row / total)
    if input.ndim == 1:
        result = result[0]
    return _fill_out(out, _sample(result, D.int64, input.device, False))


def _multinomial_on_device(input, num_samples, replacement, generator):
    """``multinomial``'s (rows, num_samples) indices drawn on the GPU of ``input`` (None
    where the kernels cannot draw), so that sampling a model's next token does not wait for
    the GPU: with replacement, uniform draws searched for in each row's running sums;
    without, the ``num_samples`` largest of log w - log(-log u) (the Gumbel top-k trick).
    The weights are checked on the device (NOTE [Deferred device checks])."""
    w = input._data
    k = w.shape[-1]
    rows = w.size // k
    u = _drawn_on_device(generator, (rows, num_samples if replacement else k), D.float32,
                         input.device)
    if u is None:
        return None
    with device_guard(input.device.index):
        xp = xp_of(w)
        w = w.reshape(rows, k).astype(np.float64)
        _check_weights(xp, w, None if replacement else num_samples)
        if not replacement:            # log 0 is -inf: such categories come last
            positive = w > 0
            gumbel = -xp.log(-xp.log(xp.maximum(u, np.float32(1e-38))))
            keys = xp.where(positive, xp.log(xp.where(positive, w, 1.0)), -np.inf) + gumbel
            if num_samples == 1:
                return keys.argmax(axis=1)[:, None]
            return xp.argsort(-keys, axis=1)[:, :num_samples]
        # each row's running sums over its total, shifted by the row's index: one sorted
        # sequence, searched once for every row's draws (shifted likewise)
        cdf = xp.cumsum(w, axis=1)
        starts = xp.arange(rows, dtype=np.float64)[:, None]
        cdf = cdf / cdf[:, -1:] + starts
        found = xp.searchsorted(cdf.reshape(-1), (u + starts).reshape(-1), side="right")
        picked = found.reshape(rows, num_samples) - (starts * k).astype(np.int64)
        return xp.minimum(picked, k - 1)    # a draw rounding up to a row's end stays in it


def _check_weights(xp, w, needed):
    """multinomial's checks of float64 weight rows on a GPU, deferred as device asserts;
    ``needed``: the nonzero weights a row needs (sampling without replacement)."""
    device_assert(((w < 0) | ~xp.isfinite(w)).any(), lambda: RuntimeError(
        "probability tensor contains either `inf`, `nan` or element < 0"))
    device_assert((w.sum(axis=1) <= 0).any(), lambda: RuntimeError(
        "invalid multinomial distribution (sum of probabilities <= 0)"))
    if needed is not None:
        device_assert(((w != 0).sum(axis=1) < needed).any(), lambda: RuntimeError(
            "invalid multinomial distribution (with replacement=False, not enough "
            "non-negative category to sample)"))


@offered_to_overrides
def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, generator=None, pin_memory=False):
    """Uniform samples shaped like ``input``."""
    _check_generator(generator, "rand_like")
    check_requires_grad(requires_grad, "rand_like")
    check_like_input(input, "rand_like")
    made = rand(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad, generator=generator)
    return pinned(in_format(made, memory_format, input), pin_memory)


@offered_to_overrides
def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, generator=None, pin_memory=False):
    """Normal samples shaped like ``input``."""
    _check_generator(generator, "randn_like")
    check_requires_grad(requires_grad, "randn_like")
    check_like_input(input, "randn_like")
    made = randn(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad, generator=generator)
    return pinned(in_format(made, memory_format, input), pin_memory)


@offered_to_overrides
def randint_like(input, low=None, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, generator=None, pin_memory=False):
    """Random integers shaped like ``input``."""
    _check_generator(generator, "randint_like")
    check_requires_grad(requires_grad, "randint_like")
    check_like_input(input, "randint_like")
    _check_like_bounds(low, high)
    low, high = (0, low) if high is None else (0 if low is None else low, high)
    made = randint(low, high, input.shape, dtype=dtype or input.dtype,
                   device=device or input.device, generator=generator,
                   requires_grad=requires_grad)
    return pinned(in_format(made, memory_format, input), pin_memory)


def _below(uniform, probs):
    """``uniform < probs``, Bernoulli samples, on a GPU; ``probs`` outside [0, 1] raise."""
    if isinstance(probs, (int, float)):
        if not 0 <= probs <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={probs}")
    elif probs.size:
        device_assert((~((probs >= 0) & (probs <= 1))).any(), lambda: RuntimeError(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false."))
    return uniform < probs


for _fn in (bernoulli, multinomial):
    setattr(Tensor, _fn.__name__, _fn)


# --- gamma and Dirichlet samples --------------------------------------------------------------

def _gamma_draws(concentration, generator, kernel):
    """Gamma(concentration, 1) samples drawn on the host in float64, at least the tiny value
    of ``concentration``'s dtype (where concentration <= 0 or NaN too), as PyTorch's."""
    dtype = concentration.dtype
    on_cpu = concentration.device.type == "cpu"
    allowed = (D.float32, D.float64) if on_cpu else (D.float16, D.bfloat16, D.float32,
                                                     D.float64)
    if kernel == "gamma":
        kernel += "_cpu" if on_cpu else "_cuda"
    if dtype not in allowed:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtype._torch_name}'")
    alpha = np.asarray(host_array(concentration._data), dtype=np.float64)
    valid = alpha > 0
    draws = _rng_on(generator, concentration.device).standard_gamma(np.where(valid, alpha, 1.0))
    return np.asarray(np.fmax(np.where(valid, draws, 0.0), float(D.finfo(dtype).tiny))), dtype


@_vmap_aware
def _standard_gamma(concentration, generator=None):
    """Gamma(concentration, 1) samples, differentiable with respect to ``concentration`` by
    implicit reparameterization (``_standard_gamma_grad``)."""
    _check_generator(generator, "_standard_gamma")
    from ember.ops.gamma_sampling import _standard_gamma_sample
    draws, dtype = _gamma_draws(concentration, generator, "gamma")
    sample = _sample(draws, dtype, concentration.device, False)
    return _standard_gamma_sample(concentration, sample)


@_vmap_aware
def _sample_dirichlet(input, generator=None):
    """Dirichlet samples with concentrations ``input`` over its last dimension: standard
    gamma samples divided by their sum (not differentiable)."""
    draws, dtype = _gamma_draws(input, generator, "dirichlet")
    total = draws.sum(axis=-1, keepdims=True) if draws.ndim else draws
    with np.errstate(invalid="ignore"):
        ratios = draws / total
    tiny = float(D.finfo(dtype).tiny)
    return sampled((input,), _sample(np.asarray(np.fmax(ratios, tiny)), dtype, input.device,
                                     False), NOT_IMPLEMENTED, "_sample_dirichlet")


from ember import _random_inplace  # noqa: E402,F401  (installs Tensor.uniform_, ...)
from ember.ops.random_nodes import NOT_IMPLEMENTED, check_out_grad, sampled  # noqa: E402  (samplers' nodes)
