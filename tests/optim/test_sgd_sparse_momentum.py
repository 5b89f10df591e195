"""SGD with momentum on a sparse gradient keeps a sparse momentum buffer, as PyTorch's."""

import numpy as np

import ember
from ember import nn, optim


def test_sgd_momentum_buffer_of_a_sparse_gradient_is_sparse():
    emb = nn.Embedding(4, 2, sparse=True)
    with ember.no_grad():
        emb.weight.zero_()
    opt = optim.SGD(emb.parameters(), lr=0.5, momentum=0.5)
    for _ in range(2):
        opt.zero_grad()
        emb(ember.tensor([1, 1, 3])).sum().backward()
        opt.step()
    buf = opt.state[emb.weight]["momentum_buffer"]
    assert buf.is_sparse
    # step 1: b = g; step 2: b = 0.5 b + g; rows 1 (twice) and 3
    assert np.allclose(buf.to_dense().numpy(), [[0, 0], [3, 3], [0, 0], [1.5, 1.5]])
    assert np.allclose(emb.weight.detach().numpy(), [[0, 0], [-2.5, -2.5], [0, 0],
                                                     [-1.25, -1.25]])
