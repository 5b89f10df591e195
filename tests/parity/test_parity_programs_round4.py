"""Short programs written as PyTorch users write them, over the APIs audit 8 added or changed,
run once with `torch` bound to ember and once to PyTorch (weights and data from one NumPy
generator): torch.masked reductions in a padded-attention loss, top-level torch.lstm/torch.gru
on packed sequences, a MAML loop through differentiable optimizers, a logging Tensor subclass
through layers and losses (the handler must see PyTorch's functions), and the margin and
logistic loss kernels with a gradient penalty and per-sample vmap."""

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_
from tests.parity.test_parity_programs_round3 import assert_same_results as same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def arrays(values):
    """Detached float values of tensors (or of a list of them) as NumPy arrays."""
    if isinstance(values, (list, tuple)):
        return [arrays(v) for v in values]
    return values.detach().float().numpy()


def masked_attention_program(torch):
    """Attention over padded sequences with torch.masked softmax, a masked-mean loss, Adam."""
    nn, rng = torch.nn, np.random.default_rng(0)
    B, L, D = 3, 6, 8
    x = torch.from_numpy(rng.standard_normal((B, L, D)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((B, L)).astype(np.float32))
    mask = torch.arange(L)[None, :] < torch.tensor([6, 4, 2])[:, None]
    layers = [nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, 1)]
    params = [p for layer in layers for p in layer.parameters()]
    fill_(torch, params, rng)
    lin, q, k, head = layers
    opt = torch.optim.Adam(params, lr=1e-2)
    losses = []
    for _ in range(3):
        h = torch.tanh(lin(x))
        scores = q(h) @ k(h).transpose(1, 2) / D ** 0.5
        attn = torch.masked.softmax(scores, dim=-1, mask=mask[:, None, :].expand(B, L, L))
        pred = head(attn @ h).squeeze(-1)
        err = (pred - y) ** 2
        loss = (torch.masked.mean(err, mask=mask)
                + 0.1 * torch.masked.sum(err, dim=1, mask=mask).mean()
                + 0.01 * torch.masked.amax(err, dim=1, mask=mask).sum()
                + 0.01 * torch.masked.var(pred, dim=1, mask=mask).sum())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"loss": losses, "attn": arrays(attn), "grads": arrays([p.grad for p in params]),
            "log_softmax": arrays(torch.masked.log_softmax(pred, dim=1, mask=mask))}


def packed_rnn_functions_program(torch):
    """torch.lstm and torch.gru called as libraries call them, padded and packed."""
    nn, rng = torch.nn, np.random.default_rng(2)
    rnn = nn.utils.rnn
    B, T, IN, H = 3, 5, 4, 6
    lstm = nn.LSTM(IN, H, num_layers=2, bidirectional=True, batch_first=True)
    gru = nn.GRU(IN, H)
    fill_(torch, list(lstm.parameters()) + list(gru.parameters()), rng)
    x = torch.from_numpy(rng.standard_normal((B, T, IN)).astype(np.float32)).requires_grad_()
    h0, c0 = torch.zeros(4, B, H), torch.zeros(4, B, H)
    weights = list(lstm._flat_weights)
    y, hn, _ = torch.lstm(x, (h0, c0), weights, True, 2, 0.0, False, True, True)
    packed = rnn.pack_padded_sequence(x, torch.tensor([5, 3, 2]), batch_first=True)
    data, hp, cp = torch.lstm(packed.data, packed.batch_sizes, (h0, c0), weights, True, 2, 0.0,
                              False, True)
    padded, lengths = rnn.pad_packed_sequence(rnn.PackedSequence(data, packed.batch_sizes),
                                              batch_first=True)
    xt = x.transpose(0, 1)
    g0 = torch.from_numpy(rng.standard_normal((1, B, H)).astype(np.float32))
    pg = rnn.pack_padded_sequence(xt, torch.tensor([5, 3, 2]))
    gy, gh = torch.gru(pg.data, pg.batch_sizes, g0, list(gru._flat_weights), True, 1, 0.0,
                       False, False)
    (padded.pow(2).sum() + hp.sum() + gy.sum() + gh.pow(2).sum()).backward()
    return {"y": arrays(y), "hn": arrays(hn), "padded": arrays(padded), "cp": arrays(cp),
            "lengths": lengths.tolist(), "gru": arrays([gy, gh]), "gx": arrays(x.grad),
            "gw": arrays([w.grad for w in weights])}


def maml_program(torch):
    """MAML: three differentiable inner steps (SGD with a learnt learning rate, then Adam),
    the query loss differentiated back to the initial weights."""
    F, rng = torch.nn.functional, np.random.default_rng(3)

    def tensor(*shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))

    w, b = (tensor(4, 1) * 0.5).requires_grad_(), torch.zeros(1, requires_grad=True)
    log_lr = torch.tensor(-1.0, requires_grad=True)
    xs, ys, xq, yq = tensor(8, 4), tensor(8, 1), tensor(8, 4), tensor(8, 1)
    meta = torch.optim.Adam([w, b, log_lr], lr=1e-2)
    out = {"query": []}
    for outer, kind in enumerate(["sgd", "adam"]):
        fw, fb = w.clone(), b.clone()
        inner = (torch.optim.SGD([fw, fb], lr=log_lr.exp(), differentiable=True) if kind == "sgd"
                 else torch.optim.Adam([fw, fb], lr=0.1, weight_decay=0.1, differentiable=True))
        for _ in range(3):
            loss = F.mse_loss(xs @ fw + fb, ys)
            fw.grad, fb.grad = torch.autograd.grad(loss, [fw, fb], create_graph=True)
            inner.step()
        query = F.mse_loss(xq @ fw + fb, yq)
        meta.zero_grad()
        query.backward()
        out[f"grads{outer}"] = arrays([w.grad, b.grad])
        meta.step()
        out["query"].append(query.item())
        if kind == "sgd":
            out["lr_grad"] = arrays(log_lr.grad)
    return out


def logging_subclass_program(torch):
    """A LoggingTensor (PyTorch's "extending torch" docs) through layers in eval mode,
    functionals and the loss kernels; the handler sees PyTorch's functions."""
    nn, F, rng = torch.nn, torch.nn.functional, np.random.default_rng(7)
    seen = []

    class LoggingTensor(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return super().__torch_function__(func, types, args, kwargs or {})

    net = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.ReLU(), nn.Dropout(0.3),
                        nn.Linear(6, 2)).eval()
    fill_(torch, net.parameters(), rng)
    x = torch.from_numpy(rng.standard_normal((5, 4)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((5, 2)).astype(np.float32))
    pred = net(x.as_subclass(LoggingTensor))
    h = F.normalize(torch.cat([pred, F.dropout(pred, 0.5, training=False)], dim=1), dim=1)
    loss = (F.soft_margin_loss(pred, y.sign()) + h.abs().mean()
            + F.binary_cross_entropy_with_logits(pred, (y > 0).float(),
                                                 pos_weight=torch.tensor([2.0, 0.5])))
    loss.backward()
    mask = (y > 0).expand_as(pred)
    return {"seen": seen, "types": [type(v).__name__ for v in (pred, h, loss, mask)],
            "loss": arrays(loss.as_subclass(torch.Tensor)),
            "grads": arrays([p.grad for p in net.parameters()])}


def margin_losses_program(torch):
    """soft margin, logistic (pos_weight, weight), multi-margin (p=1, 2) and multilabel margin
    losses in a training loop with a gradient penalty, then per-sample gradients by vmap."""
    nn, F, func, rng = torch.nn, torch.nn.functional, torch.func, np.random.default_rng(9)
    lin = nn.Linear(5, 4)
    fill_(torch, lin.parameters(), rng)
    x = torch.from_numpy(rng.standard_normal((6, 5)).astype(np.float32))
    signs = torch.from_numpy(np.sign(rng.standard_normal((6, 4))).astype(np.float32))
    bits, classes = (signs > 0).float(), torch.tensor([0, 3, 1, 2, 2, 1])
    labels = torch.tensor([[0, 2, -1, 1], [3, -1, 0, 0], [1, 2, 3, 0], [-1, 0, 0, 0],
                           [2, 1, -1, 3], [0, 1, 2, 3]])
    pw, w = torch.tensor([1.5, 0.5, 2.0, 1.0]), torch.tensor([0.2, 1.0, 0.7, 1.3])
    opt = torch.optim.SGD(lin.parameters(), lr=0.05)
    out = {"loss": [], "penalty": []}
    for _ in range(3):
        xi = x.clone().requires_grad_()
        z = lin(xi)
        smooth = (F.soft_margin_loss(z, signs)
                  + F.binary_cross_entropy_with_logits(z, bits, weight=w, pos_weight=pw))
        gx, = torch.autograd.grad(smooth, xi, create_graph=True)
        penalty = gx.pow(2).sum(1).sub(1).pow(2).mean()
        loss = (smooth + F.multi_margin_loss(z, classes, p=1, margin=0.7, weight=w)
                + 0.1 * F.multi_margin_loss(z, classes, p=2, reduction="sum")
                + F.multilabel_margin_loss(z, labels))
        opt.zero_grad()
        (loss + 0.1 * penalty).backward()
        opt.step()
        out["loss"].append(loss.item())
        out["penalty"].append(penalty.item())

    def sample_loss(params, xs, s, bit, c, label):
        z = func.functional_call(lin, params, (xs[None],))
        return (F.soft_margin_loss(z, s[None]) + F.multilabel_margin_loss(z, label[None])
                + F.binary_cross_entropy_with_logits(z, bit[None], pos_weight=pw)
                + F.multi_margin_loss(z, c[None], p=2, weight=w))

    params = {k: v.detach() for k, v in lin.named_parameters()}
    grads = func.vmap(func.grad(sample_loss), in_dims=(None, 0, 0, 0, 0, 0))(
        params, x, signs, bits, classes, labels)
    out["per_sample"] = arrays([grads["weight"], grads["bias"]])
    return out


def assert_same_results(ours, theirs):
    """round3's comparison, with lists of arrays compared array by array."""
    assert ours.keys() == theirs.keys()
    for key, expected in theirs.items():
        if isinstance(expected, list) and expected and isinstance(expected[0], np.ndarray):
            assert len(ours[key]) == len(expected), key
            for g, e in zip(ours[key], expected):
                np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-6, err_msg=key)
    arrays = {k for k, v in theirs.items()
              if isinstance(v, list) and v and isinstance(v[0], np.ndarray)}
    same_results({k: v for k, v in ours.items() if k not in arrays},
                 {k: v for k, v in theirs.items() if k not in arrays}, rtol=2e-4)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("program", [masked_attention_program, packed_rnn_functions_program,
                                     maml_program, logging_subclass_program,
                                     margin_losses_program],
                         ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch))
