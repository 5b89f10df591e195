"""Which positions of a 16-bit other-dim softmax round as PyTorch's scalar loop does."""

import ml_dtypes
import numpy as np

import ember
from ember.backend.cpu_kernels import TORCH_16_BIT_LANES
from ember.ops.log_space import _scalar_positions


def test_one_thread_leaves_each_rows_tail_past_the_last_whole_vector():
    inner = TORCH_16_BIT_LANES + 8
    scalar = _scalar_positions(2, inner, 1)
    assert scalar.shape == (2, inner)
    assert not scalar[:, :TORCH_16_BIT_LANES].any() and scalar[:, TORCH_16_BIT_LANES:].all()


def test_each_threads_range_has_its_own_tail():
    lanes = TORCH_16_BIT_LANES
    # one row of 40/32 lanes cut in two ranges shorter than a vector: all scalar
    assert _scalar_positions(1, lanes + 8, 2).all()
    # 5 rows of one vector each over two threads: the cut falls inside row 2
    scalar = _scalar_positions(5, lanes, 2)
    assert scalar.sum(axis=1).tolist() == [0, 0, lanes, 0, 0]


def test_bfloat16_softmax_rounds_once_in_the_vector_body_and_the_exps_in_the_tail():
    x = np.random.default_rng(0).standard_normal((3, 4 * TORCH_16_BIT_LANES + 5)) * 3
    x = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    e = np.exp(x - x.max(0))
    once = (e / e.sum(0)).astype(ml_dtypes.bfloat16).astype(np.float32)
    exps_first = (e.astype(ml_dtypes.bfloat16).astype(np.float32) / e.sum(0)).astype(
        ml_dtypes.bfloat16).astype(np.float32)
    threads = ember.get_num_threads()
    ember.set_num_threads(1)
    try:
        out = ember.softmax(ember.from_numpy(x).bfloat16(), 0).float().numpy()
    finally:
        ember.set_num_threads(threads)
    body = 4 * TORCH_16_BIT_LANES
    np.testing.assert_array_equal(out[:, :body], once[:, :body])
    np.testing.assert_array_equal(out[:, body:], exps_first[:, body:])
    assert (once != exps_first).any()       # the two roundings differ on these values
