"""The CUDA default generators (``torch.cuda.manual_seed`` and friends).

With the CUDA kernels loaded, uniform, normal and Bernoulli samples of 32- and 16-bit floats
and integers on a GPU (``rand``, ``randn``, ``randint``, ``randperm``, dropout's masks ...)
are drawn there, from a Philox stream of the generator's seed
(``_random._drawn_on_device``). Other
samples are drawn on the host with the same PCG64 streams as the CPU and uploaded, so a seed
gives the same values on either device. Each GPU has its own default generator, seeded like
PyTorch's; seeding needs no GPU and loads nothing without one.
"""

from ember import backend
from ember._random import Generator

__all__ = ["default_generator", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all",
           "set_rng_state_all"]

_GENERATORS = {}                # GPU index -> Generator, created on first use
_SEED_ALL = [None]              # the last manual_seed_all seed, for generators made later


def default_generator(index=None):
    """The default generator of GPU ``index`` (the current GPU by default)."""
    index = _current() if index is None else index
    gen = _GENERATORS.get(index)
    if gen is None:
        gen = _GENERATORS[index] = Generator._unchecked(f"cuda:{index}")
        if _SEED_ALL[0] is not None:
            gen.manual_seed(_SEED_ALL[0])
    return gen


def _current():
    # without the backend loaded no GPU has been selected: the current one is GPU 0
    if not backend.cuda_initialized():
        return 0
    return backend.cuda_backend().cupy.cuda.runtime.getDevice()


def manual_seed(seed):
    """Seed the current GPU's default generator."""
    default_generator().manual_seed(int(seed))


def manual_seed_all(seed):
    """Seed the default generators of all GPUs."""
    _SEED_ALL[0] = seed = int(seed)
    for gen in _GENERATORS.values():
        gen.manual_seed(seed)


def seed():
    """Seed the current GPU's default generator from the system's entropy."""
    default_generator().seed()


def seed_all():
    """Seed all GPUs' default generators from one random seed."""
    manual_seed_all(Generator().seed())


def initial_seed():
    """The seed of the current GPU's default generator."""
    backend.require_cuda()
    return default_generator().initial_seed()


def get_rng_state(device="cuda"):
    """The state of a GPU's default generator as a uint8 tensor."""
    from ember.cuda._common import index_of
    backend.require_cuda()
    return default_generator(index_of(device)).get_state()


def set_rng_state(new_state, device="cuda"):
    """Restore a GPU's default generator from ``get_rng_state``'s tensor."""
    from ember.cuda._common import index_of
    backend.require_cuda()
    default_generator(index_of(device)).set_state(new_state)


def get_rng_state_all():
    """The states of all GPUs' default generators."""
    from ember.cuda import device_count
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    """Restore all GPUs' default generators."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
