"""``nn.parallel.comm`` (``cuda.comm``) over the stand-in's two GPUs: copies land on the
devices asked for, with the values of the source."""

import pytest

import ember
from ember.cuda import comm

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(
    not ember.cuda.is_available() or ember.cuda.device_count() < 2, reason="needs two GPUs")]

FIRST, SECOND = ember.device("cuda:0"), ember.device("cuda:1")


def test_broadcast_copies_to_each_device_or_into_out():
    x = ember.arange(6.0).reshape(2, 3)
    copies = comm.broadcast(x, [0, "cuda:1"])
    assert [c.device for c in copies] == [FIRST, SECOND]
    assert all(c.cpu().tolist() == x.tolist() for c in copies)
    copies[0].add_(1)                   # copies, not views of one another
    assert copies[1].cpu().tolist() == x.tolist()
    out = [ember.zeros(2, 3, device=FIRST), ember.zeros(2, 3, device=SECOND)]
    assert comm.broadcast(x.to(SECOND), out=out)[0] is out[0]
    assert out[0].cpu().tolist() == x.tolist() and out[1].cpu().tolist() == x.tolist()
    with pytest.raises(RuntimeError, match="Exactly one of 'devices' and 'out'"):
        comm.broadcast(x, [0], out=out)
    with pytest.raises(RuntimeError, match="output tensor at index 1 has device 'cpu'"):
        comm.broadcast(x, out=[out[0], ember.zeros(2, 3)])
    with pytest.raises(RuntimeError, match=r"output tensor at index 0 has shape \(3,\)"):
        comm.broadcast(x, out=[ember.zeros(3, device=FIRST)])
    grouped = comm.broadcast_coalesced([x, x.sum()], [0, 1])
    assert [[t.device for t in per] for per in grouped] == [[FIRST, FIRST], [SECOND, SECOND]]
    assert grouped[1][1].item() == 15.0


def test_scatter_and_gather_round_trip():
    x = ember.arange(10.0).reshape(5, 2)
    even = comm.scatter(x, [0, 1])
    assert [p.shape for p in even] == [(3, 2), (2, 2)] and even[1].device == SECOND
    sized = comm.scatter(x, [0, 1], chunk_sizes=[1, 4])
    assert [p.shape[0] for p in sized] == [1, 4]
    assert comm.gather(sized, destination=-1).tolist() == x.tolist()
    joined = comm.gather(even)                          # on the current GPU
    assert joined.device == FIRST and joined.cpu().tolist() == x.tolist()
    columns = comm.scatter(x, [1, 0], dim=1)
    assert columns[0].device == SECOND and columns[0].cpu().reshape(-1).tolist() == [0, 2, 4,
                                                                                      6, 8]
    out = ember.empty(5, 2, device=SECOND)
    assert comm.gather(columns, dim=1, out=out) is out and out.cpu().tolist() == x.tolist()
    with pytest.raises(RuntimeError, match="same length"):
        comm.scatter(x, [0, 1], chunk_sizes=[5])


def test_reduce_add_sums_on_the_destination():
    a, b = ember.ones(2, 2, device=FIRST), ember.full((2, 2), 2.0, device=SECOND)
    total = comm.reduce_add([a, b], destination=1)
    assert total.device == SECOND and total.cpu().tolist() == [[3.0, 3.0]] * 2
    assert a.cpu().tolist() == [[1.0, 1.0]] * 2         # the inputs are left alone
    assert comm.reduce_add([a, b]).device == FIRST
    sums = comm.reduce_add_coalesced([[a, a[0]], [b, b[0]]], destination=0)
    assert [s.shape for s in sums] == [(2, 2), (2,)] and sums[1].cpu().tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match=r"input 1 has invalid size: got \[2\], but expected "
                                         r"\[2, 2\]"):
        comm.reduce_add([a, b[0]])
    assert ember.nn.parallel.comm.reduce_add is comm.reduce_add
