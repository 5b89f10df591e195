"""amax/amin and the inf and negative-order vector norms over an empty dim name the dim as
the caller wrote it (-1 as -1), as PyTorch's messages do; max(dim)/argmax keep naming the
wrapped dim, as PyTorch's do."""

import pytest

import ember


@pytest.mark.parametrize("dim, shown", [(-2, -2), ((0, -2), -2), ([2, -2], -2), (1, 1),
                                        ((-1, -2), -2)])
def test_amax_amin_name_the_dim_as_given(dim, shown):
    x = ember.zeros(2, 0, 3)
    for name in ("amax", "amin"):
        with pytest.raises(IndexError, match=rf"^{name}\(\): Expected reduction dim {shown} "
                                             rf"to have non-zero size\.$"):
            getattr(x, name)(dim)


@pytest.mark.parametrize("order", [float("inf"), -1.0])
def test_vector_norm_names_the_dim_as_given(order):
    x = ember.zeros(2, 0, 3)
    with pytest.raises(RuntimeError, match=r"on the dimension -2because this dimension is "
                                           r"empty"):
        ember.linalg.vector_norm(x, order, dim=(-1, -2))


def test_max_with_dim_names_the_wrapped_dim():
    x = ember.zeros(2, 0, 3)
    with pytest.raises(IndexError, match=r"max\(\): Expected reduction dim 1 "):
        x.max(dim=-2)
