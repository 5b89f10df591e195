"""Training steps of small real models: ember vs PyTorch, same code through ``lib.nn``.

Each workload is one step: forward, cross-entropy loss, backward, and a plain SGD update
under no_grad. The models are written once against the PyTorch API and built from
``lib`` (ember or torch), so both frameworks run exactly the same program.
"""

import numpy as np


def _sgd(model, lib, lr=0.01):
    with lib.no_grad():
        for p in model.parameters():
            p.sub_(p.grad, alpha=lr)
            p.grad = None


def _step(lib, model, make_loss):
    def step():
        make_loss().backward()
        _sgd(model, lib)
    step.parameters = model.parameters
    step.model = model
    return step


def _data(lib, shape, classes, seed=0):
    gen = np.random.default_rng(seed)
    x = lib.tensor(gen.standard_normal(shape).astype(np.float32))
    y = lib.tensor(gen.integers(0, classes, shape[0]))
    return x, y


def mlp_adam(lib):
    """A 3-layer tanh MLP on a 64x256 batch, stepped by Adam (the optimizer's share shows)."""
    gen = np.random.default_rng(0)
    params = [lib.tensor(gen.standard_normal(s).astype(np.float32) * 0.05, requires_grad=True)
              for s in ((256, 256), (256, 256), (256, 10))]
    x = lib.tensor(gen.standard_normal((64, 256)).astype(np.float32))
    opt = lib.optim.Adam(params, lr=1e-3)

    def step():
        w1, w2, w3 = params
        loss = ((x @ w1).tanh() @ w2).tanh().matmul(w3).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    step.parameters = lambda: iter(params)
    return step


def mlp_784(lib, batch=128):
    """The classic MNIST MLP (784-512-512-10, ReLU) on a batch of 128, stepped by Adam."""
    nn, F = lib.nn, lib.nn.functional
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    x, y = _data(lib, (batch, 784), 10)
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    step.parameters = model.parameters
    return step


def lenet(lib, batch=64):
    """LeNet-5 style CNN on a 64x1x28x28 batch."""
    nn, F = lib.nn, lib.nn.functional
    model = nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(256, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    x, y = _data(lib, (batch, 1, 28, 28), 10)
    return _step(lib, model, lambda: F.cross_entropy(model(x), y))


def resnet_block(lib, batch=32):
    """A ResNet basic block (3->32 channels, 1x1 projection shortcut) with BatchNorm on
    32x3x32x32, then global average pooling and a linear classifier."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            h = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(h)) + self.shortcut(x))

    model = nn.Sequential(Block(3, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10))
    x, y = _data(lib, (batch, 3, 32, 32), 10)
    return _step(lib, model, lambda: F.cross_entropy(model(x), y))


def gpt(lib, n_layer=2, n_embd=128, n_head=4, seq=64, batch=16, vocab=65):
    """A 2-layer GPT (pre-norm blocks, causal SDPA, GELU MLP) on 16 sequences of 64 tokens."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(n_embd)
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)
            self.ln2 = nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                     nn.Linear(4 * n_embd, n_embd), nn.Dropout(0.1))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(n_embd, dim=2)
            q, k, v = (z.view(b, t, n_head, c // n_head).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, n_embd)
            self.pos = nn.Embedding(seq, n_embd)
            self.blocks = nn.Sequential(*[Block() for _ in range(n_layer)])
            self.ln = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(lib.arange(idx.shape[1]))
            return self.head(self.ln(self.blocks(x)))

    model = GPT()
    gen = np.random.default_rng(0)
    idx = lib.tensor(gen.integers(0, vocab, (batch, seq)))
    target = lib.tensor(gen.integers(0, vocab, (batch, seq)))
    return _step(lib, model,
                 lambda: F.cross_entropy(model(idx).view(-1, vocab), target.view(-1)))


def lstm_lm(lib, vocab=1000, hidden=256, seq=35, batch=20):
    """A 2-layer LSTM language model (embedding 256, hidden 256, vocabulary 1000) on 20
    sequences of 35 tokens."""
    nn, F = lib.nn, lib.nn.functional

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, hidden)
            self.rnn = nn.LSTM(hidden, hidden, num_layers=2)
            self.dec = nn.Linear(hidden, vocab)

        def forward(self, idx):
            out, _ = self.rnn(self.emb(idx))
            return self.dec(out)

    model = LM()
    gen = np.random.default_rng(0)
    idx = lib.tensor(gen.integers(0, vocab, (seq, batch)))
    target = lib.tensor(gen.integers(0, vocab, (seq, batch)))
    return _step(lib, model,
                 lambda: F.cross_entropy(model(idx).view(-1, vocab), target.view(-1)))


def vae(lib, batch=128, hidden=256, latent=32):
    """A variational autoencoder on 784-pixel inputs: a Gaussian posterior sampled with
    rsample, a Bernoulli likelihood and the closed-form KL to the prior (distributions'
    share shows)."""
    nn, D = lib.nn, lib.distributions
    encoder = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent))
    decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, 784))
    model = nn.ModuleList([encoder, decoder])
    gen = np.random.default_rng(0)
    x = lib.tensor((gen.random((batch, 784)) < 0.3).astype(np.float32))
    prior = D.Normal(lib.zeros(latent), lib.ones(latent))

    def loss():
        loc, raw_scale = encoder(x).chunk(2, dim=-1)
        posterior = D.Normal(loc, nn.functional.softplus(raw_scale) + 1e-4)
        z = posterior.rsample()
        likelihood = D.Bernoulli(logits=decoder(z)).log_prob(x).sum(-1)
        kl = D.kl_divergence(posterior, prior).sum(-1)
        return (kl - likelihood).mean()
    return _step(lib, model, loss)


WORKLOADS = {
    "MLP 64x256 Adam step": mlp_adam,
    "MLP 784-512-512-10 Adam step": mlp_784,
    "LeNet 64x1x28x28 step": lenet,
    "ResNet block 32x3x32x32 step": resnet_block,
    "GPT 2x128, 16x64 step": gpt,
    "LSTM LM 2x256, 35x20 step": lstm_lm,
    "VAE 784-256-32, 128 step": vae,
}
