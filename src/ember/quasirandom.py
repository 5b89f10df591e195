"""Quasi-random sequences: ``SobolEngine`` (``torch.quasirandom``).

The direction numbers are Joe and Kuo's (search criterion D(6), 21201 dimensions), read from
the table SciPy ships with ``scipy.stats`` and expanded here. Points follow the Gray-code
order: point ``p`` is point ``p - 1`` XOR the direction vector picked by the lowest zero bit of
``p - 1``, so a batch is one cumulative XOR. Scrambling is a random lower-triangular binary
matrix per dimension applied to the direction vectors (linear matrix scrambling) plus a random
digital shift, which keeps the points' balance. The scrambled streams come from ember's
generators and differ from PyTorch's.
"""

import functools
import operator
from importlib import resources

import numpy as np

from ember import _dtype as D
from ember._random import Generator, default_generator
from ember._tensor import _make

__all__ = ["SobolEngine"]

_MAXBIT = 30
_CHUNK = 1 << 22                 # int64 elements per block of points (32 MiB)


@functools.lru_cache(maxsize=1)
def _joe_kuo_table():
    """Joe and Kuo's primitive polynomials and initial direction numbers, int64."""
    # through the package ``scipy`` alone: importing ``scipy.stats`` takes a second
    table_file = resources.files("scipy").joinpath("stats", "_sobol_direction_numbers.npz")
    with table_file.open("rb") as f:
        table = np.load(f)
        return table["poly"].astype(np.int64), table["vinit"].astype(np.int64)


@functools.lru_cache(maxsize=8)
def _direction_numbers(dimension):
    """The first ``dimension`` dimensions' direction vectors, shape (dimension, 30): column k
    of row d holds the k-th direction number ``m_k`` of dimension d shifted left by ``29 - k``
    (a 30-bit binary fraction), from Joe and Kuo's primitive polynomials, initial numbers and
    recurrence. Read-only: callers copy."""
    # only the rows asked for: all 21201 take half a second, a few rows a millisecond
    poly, vinit = (a[:dimension] for a in _joe_kuo_table())
    degree = np.array([int(p).bit_length() - 1 for p in poly])   # 0 for dimension 0: m_k = 1
    m = np.ones((poly.size, _MAXBIT), np.int64)
    for k in range(_MAXBIT):
        given = k < degree
        if k < vinit.shape[1]:
            m[given, k] = vinit[given, k]
        rows = np.nonzero(~given & (degree > 0))[0]
        s, p = degree[rows], poly[rows]
        older = m[rows, k - s]
        new = older ^ (older << s)
        for j in range(1, int(s.max(initial=0))):
            use = (j < s) & ((p >> (s - j)) & 1).astype(bool)
            new ^= np.where(use, m[rows, k - j] << j, 0)
        m[rows, k] = new
    out = m << (_MAXBIT - 1 - np.arange(_MAXBIT))
    out.flags.writeable = False
    return out


def _count(value, name):
    """``value`` as a Python int, or PyTorch's kind of error naming ``name``."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}(): argument 'n' must be int, not {type(value).__name__}") \
            from None


def _lowest_zero_bit(x):
    """The position of the lowest zero bit of each int64 in ``x`` (-1 for -1)."""
    return np.frexp((~x & (x + 1)).astype(np.float64))[1] - 1


class SobolEngine:
    """An engine drawing (scrambled) Sobol sequences of up to 21201 dimensions, with Joe and
    Kuo's direction numbers (``torch.quasirandom.SobolEngine``).

    Args:
        dimension (int): the dimensionality of the points.
        scramble (bool): scramble the sequence (linear matrix scrambling and a digital shift).
        seed (int, optional): the seed of the scrambling; None draws it from the global
            generator (``ember.manual_seed``).
    """

    MAXBIT = _MAXBIT
    MAXDIM = 21201

    def __init__(self, dimension, scramble=False, seed=None):
        if dimension > self.MAXDIM or dimension < 1:
            raise ValueError(f"Supported range of dimensionality for SobolEngine is "
                             f"[1, {self.MAXDIM}]")
        self.seed = seed
        self.scramble = scramble
        self.dimension = operator.index(dimension)
        self._v = _direction_numbers(self.dimension).copy()
        self._shift = np.zeros(self.dimension, np.int64)
        if self.scramble:
            self._scramble()
        # rows: the direction vector per lowest-zero-bit position, then a zero row for
        # positions out of range
        self._steps = np.vstack([self._v.T, np.zeros((1, self.dimension), np.int64)])
        self._quasi = self._shift.copy()
        self.num_generated = 0

    def _scramble(self):
        if self.seed is None:
            rng = default_generator._rng
        else:
            rng = Generator().manual_seed(self.seed)._rng
        self._shift = rng.integers(0, 1 << _MAXBIT, self.dimension, dtype=np.int64)
        weights = np.int64(1) << (_MAXBIT - 1 - np.arange(_MAXBIT))    # bit i: i-th from top
        block = max(1, _CHUNK // _MAXBIT ** 3)
        for start in range(0, self.dimension, block):
            v = self._v[start:start + block]
            ltm = rng.integers(0, 2, (v.shape[0], _MAXBIT, _MAXBIT), dtype=np.int8)
            ltm = np.tril(ltm, -1) + np.eye(_MAXBIT, dtype=np.int8)
            bits = ((v[..., None] & weights) != 0).astype(np.float32)
            # each bit of a scrambled vector mixes the vector's bits of equal or higher weight
            mixed = np.matmul(bits, ltm.transpose(0, 2, 1).astype(np.float32)) % 2
            self._v[start:start + block] = mixed.astype(np.int64) @ weights

    @property
    def sobolstate(self):
        """The (scrambled) direction vectors, int64 of shape (dimension, MAXBIT)."""
        return _make(self._v)

    @property
    def shift(self):
        """The digital shift (zeros unless scrambled), int64 of shape (dimension,)."""
        return _make(self._shift)

    @property
    def quasi(self):
        """The last point drawn (the shift before any), as integers scaled by 2**MAXBIT."""
        return _make(self._quasi)

    def _advance(self, n):
        """The next ``n`` points as integers (n, dimension); moves the state past them."""
        out = np.empty((n, self.dimension), np.int64)
        block = max(1, _CHUNK // self.dimension)
        for start in range(0, n, block):
            p = np.arange(self.num_generated + start,
                          self.num_generated + min(start + block, n), dtype=np.int64)
            c = _lowest_zero_bit(p - 1)
            c[(p < 1) | (c < 0) | (c >= _MAXBIT)] = _MAXBIT    # point 0 is the start: no step
            chunk = out[start:start + p.size]
            np.take(self._steps, c, axis=0, out=chunk)
            np.bitwise_xor.accumulate(chunk, axis=0, out=chunk)
            chunk ^= self._quasi
            self._quasi = chunk[-1].copy()
        return out

    def draw(self, n=1, out=None, dtype=None):
        """The next ``n`` points of the sequence, shape (n, dimension), of ``dtype`` (the
        default float dtype unless given); written to ``out`` when given."""
        n = _count(n, "draw")
        if dtype is None:
            dtype = D.get_default_dtype()
        elif not isinstance(dtype, D.dtype):
            raise TypeError(f"draw(): argument 'dtype' must be torch.dtype, not "
                            f"{type(dtype).__name__}")
        if self.num_generated == 0 and n == 1:
            points = self._quasi[None]
        else:
            rows = n - 1 if self.num_generated == 0 else n
            if rows < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {rows}: "
                                   f"[{rows}, {self.dimension}]")
            if dtype not in (D.float32, D.float64):
                raise NotImplementedError(f'"_sobol_engine_draw" not implemented for '
                                          f"'{dtype._torch_name}'")
            points = self._advance(n)
        self.num_generated += n
        if dtype in (D.float32, D.float64):
            # points < 2**30 and a power-of-2 scale: the one rounding is the conversion's
            values = points.astype(dtype.np)
            values *= dtype.np.type(2.0 ** -_MAXBIT)
        else:                     # the first point in another dtype, as PyTorch's cast of it
            values = (points * 2.0 ** -_MAXBIT).astype(dtype.np)
        result = _make(values)
        if out is not None:
            return out.resize_as_(result).copy_(result)
        return result

    def draw_base2(self, m, out=None, dtype=None):
        """The next ``2**m`` points (shape (2**m, dimension)); the total drawn must stay a
        power of 2, which keeps the points balanced."""
        n = 2 ** m
        total = self.num_generated + n
        if total & (total - 1) != 0:
            raise ValueError(f"The balance properties of Sobol' points require n to be a power "
                             f"of 2. {self.num_generated} points have been previously "
                             f"generated, then: n={self.num_generated}+2**{m}={total}. If you "
                             f"still want to do this, please use 'SobolEngine.draw()' instead.")
        return self.draw(n=n, out=out, dtype=dtype)

    def fast_forward(self, n):
        """Skip the next ``n`` points, as drawing them would."""
        n = _count(n, "fast_forward")
        last = self.num_generated + n - 1
        if n > 0 and last >= 0:
            # the point at index ``last``: the shift XOR the vectors of its Gray code's bits
            gray = last ^ (last >> 1)
            bits = ((gray >> np.arange(_MAXBIT)) & 1).astype(bool)
            self._quasi = self._shift ^ np.bitwise_xor.reduce(self._v[:, bits], axis=1)
        self.num_generated += n
        return self

    def reset(self):
        """Go back to the first point."""
        self._quasi = self._shift.copy()
        self.num_generated = 0
        return self

    def __repr__(self):
        parts = [f"dimension={self.dimension}"]
        if self.scramble:
            parts.append("scramble=True")
        if self.seed is not None:
            parts.append(f"seed={self.seed}")
        return f"{type(self).__name__}({', '.join(parts)})"
