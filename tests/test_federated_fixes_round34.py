"""Robust aggregation on broadcast views: PyTorch 2.13's median(dim) of an expanded (stride-0)
input returns wrong values (torch.tensor([[1., 2.]]).expand(3, 2).median(0) gives [2., 2.]);
ember keeps the true coordinate-wise median, the same as for the contiguous copy."""

import ember as torch


def test_median_dim_of_expanded_input_is_the_true_median():
    x = torch.tensor([[1., 2.]]).expand(3, 2)
    got = x.median(dim=0)
    assert got.values.tolist() == [1., 2.]
    assert (x[got.indices, torch.arange(2)] == got.values).all()
    assert x.contiguous().median(dim=0).values.tolist() == [1., 2.]
    assert x.median().item() == 1.
