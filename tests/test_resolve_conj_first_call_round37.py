"""resolve_conj of a dual tensor whose tangent is a conjugate view resolves the tangent even
when it is the process's first conjugate-bit query (the tensor classes it compares against
were loaded lazily, after its own test: the test below failed whenever xdist ran it first)."""

import subprocess
import sys

_PROGRAM = """
import numpy as np
import ember
fa = ember.autograd.forward_ad
z, t = np.array([1 + 2j, 3 - 1j]), np.array([0.5 + 1j, -1 + 0.25j])
with fa.dual_level():
    c = fa.make_dual(ember.from_numpy(z), ember.from_numpy(t)).conj().resolve_conj()
    tangent = fa.unpack_dual(c).tangent
    print(tangent.is_conj(), tangent.tolist())
"""


def test_resolve_conj_of_a_dual_as_the_first_conj_query_in_a_process():
    out = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True,
                         check=True).stdout.split(" ", 1)
    assert out[0] == "False"
    assert out[1].strip() == "[(0.5-1j), (-1-0.25j)]"
