"""Training programs run once with `torch` bound to ember and once to PyTorch from the same
NumPy weights and data: an nn.Transformer seq2seq (causal and padding masks, label-smoothed
cross entropy with ignore_index, tied embeddings, AdamW with OneCycleLR, clipping), a VAE over
torch.distributions, bidirectional LSTM/GRU classifiers on packed variable-length batches,
parameter groups with freezing mid-training and set_to_none, a checkpoint saved by one library
and resumed by the other, GradScaler("cpu") under bfloat16 autocast; and the kernels a pure
bfloat16 model trains through (softmax, log_softmax, cross entropy, layer norm, SGD), whose
roundings must be PyTorch's bit for bit."""

import io
import math
import warnings

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def transformer_program(torch):
    """An encoder-decoder nn.Transformer with causal and key-padding masks, tied embeddings,
    label-smoothed cross entropy ignoring padding, AdamW with OneCycleLR and clipping."""
    nn = torch.nn
    rng = np.random.default_rng(3)
    vocab, width, pad = 13, 16, 0

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, width, padding_idx=pad)
            self.tf = nn.Transformer(width, 2, 1, 1, 32, dropout=0.0, batch_first=True)
            self.out = nn.Linear(width, vocab, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, src, tgt):
            mask = self.tf.generate_square_subsequent_mask(tgt.shape[1])
            scale = math.sqrt(width)
            h = self.tf(self.emb(src) * scale, self.emb(tgt) * scale, tgt_mask=mask,
                        src_key_padding_mask=src == pad, tgt_key_padding_mask=tgt == pad,
                        memory_key_padding_mask=src == pad, tgt_is_causal=True)
            return self.out(h)

    model = Seq2Seq()
    fill_(torch, model, rng, 0.2)
    src = torch.from_numpy(rng.integers(1, vocab, (4, 6)))
    tgt = torch.from_numpy(rng.integers(1, vocab, (4, 5)))
    src[0, 4:] = pad
    src[2, 5:] = pad
    tgt[1, 3:] = pad
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-2, total_steps=6)
    crit = nn.CrossEntropyLoss(ignore_index=pad, label_smoothing=0.1)
    res = {"loss": [], "norm": [], "lr": []}
    for _ in range(3):
        logits = model(src, tgt[:, :-1])
        loss = crit(logits.reshape(-1, vocab), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        res["norm"].append(nn.utils.clip_grad_norm_(model.parameters(), 0.5).item())
        opt.step()
        sched.step()
        res["loss"].append(loss.item())
        res["lr"].append(sched.get_last_lr()[0])
    res["emb"] = model.emb.weight
    res["tied"] = [model.out.weight is model.emb.weight, len(list(model.parameters()))]
    return res


def vae_program(torch):
    """A Bernoulli VAE: Independent Normal posterior, reparameterized with fixed noise,
    analytic kl_divergence to the prior, Adam."""
    nn, dist = torch.nn, torch.distributions
    rng = np.random.default_rng(4)
    enc = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 6))
    dec = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 8))
    params = [*enc.parameters(), *dec.parameters()]
    fill_(torch, params, rng, 0.3)
    x = torch.from_numpy((rng.random((10, 8)) > 0.5).astype(np.float32))
    noise = [normal(torch, rng, 10, 3) for _ in range(3)]
    opt = torch.optim.Adam(params, lr=1e-2)
    res = {"elbo": [], "kl": [], "log_q": []}
    for eps in noise:
        mu, log_std = enc(x).chunk(2, -1)
        q = dist.Independent(dist.Normal(mu, log_std.exp()), 1)
        prior = dist.Independent(dist.Normal(torch.zeros_like(mu), torch.ones_like(mu)), 1)
        z = mu + log_std.exp() * eps
        kl = dist.kl_divergence(q, prior)
        elbo = dist.Independent(dist.Bernoulli(logits=dec(z)), 1).log_prob(x) - kl
        opt.zero_grad()
        (-elbo.mean()).backward()
        opt.step()
        res["elbo"].append(elbo.detach().clone())
        res["kl"].append(kl.mean().item())
        res["log_q"].append(q.log_prob(z).mean().item())
    res["shapes"] = [str(tuple(q.batch_shape)), str(tuple(q.event_shape))]
    res["entropy"] = q.entropy()
    res["weight"] = enc[0].weight
    return res


def packed_program(torch):
    """A two-layer bidirectional LSTM and a bidirectional GRU over unsorted variable-length
    sequences (pack_padded_sequence, pack_sequence, pad_packed_sequence), RMSprop."""
    nn = torch.nn
    rnn_utils = nn.utils.rnn
    rng = np.random.default_rng(5)
    lengths = [5, 2, 4, 3]
    seqs = [normal(torch, rng, n, 3) for n in lengths]
    y = torch.tensor([0, 1, 2, 1])
    lstm = nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)
    gru = nn.GRU(3, 4, batch_first=True, bidirectional=True)
    head = nn.Linear(16, 3)
    params = [*lstm.parameters(), *gru.parameters(), *head.parameters()]
    fill_(torch, params, rng, 0.3)
    opt = torch.optim.RMSprop(params, lr=1e-2, momentum=0.5)
    res = {"loss": []}
    for _ in range(3):
        padded = rnn_utils.pad_sequence(seqs, batch_first=True)
        packed = rnn_utils.pack_padded_sequence(padded, torch.tensor(lengths), batch_first=True,
                                                enforce_sorted=False)
        out, (h, c) = lstm(packed)
        unpacked, lens = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=6)
        _, h_gru = gru(rnn_utils.pack_sequence(seqs, enforce_sorted=False))
        mean = unpacked.sum(1) / lens[:, None].float()
        feats = torch.cat([mean, h_gru.transpose(0, 1).reshape(4, 8)], 1)
        loss = nn.functional.cross_entropy(head(feats), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res["loss"].append(loss.item())
    res["lens"] = lens.tolist()
    res.update(unpacked=unpacked, h=h, c=c, grad=lstm.weight_hh_l1_reverse.grad)
    return res


def param_groups_program(torch):
    """Nesterov SGD with decay and no-decay groups, a LambdaLR per group, gradient
    accumulation over two batches, set_to_none both ways, the first layer frozen halfway."""
    nn = torch.nn
    rng = np.random.default_rng(6)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    fill_(torch, model, rng, 0.4)
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 0.1},
                           {"params": no_decay, "lr": 0.05}], lr=0.1, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, [lambda s: 0.9 ** s, lambda s: 1 / (1 + s)])
    xs = [normal(torch, rng, 5, 4) for _ in range(8)]
    ys = [normal(torch, rng, 5, 2) for _ in range(8)]
    res = {"loss": [], "none": [], "lr": []}
    for i in range(0, 8, 2):
        if i == 4:
            model[0].requires_grad_(False)
        for x, y in zip(xs[i:i + 2], ys[i:i + 2]):
            loss = nn.functional.smooth_l1_loss(model(x), y) / 2
            loss.backward()
            res["loss"].append(loss.item())
        opt.step()
        sched.step()
        res["none"].append(model[0].weight.grad is None)
        opt.zero_grad(set_to_none=(i != 2))
        res["none"].append(model[2].weight.grad is None)
        res["lr"] += sched.get_last_lr()
    res.update(w0=model[0].weight, w2=model[2].weight, b4=model[4].bias)
    res["state"] = [len(opt.state)]
    return res


def _checkpoint_parts(lib, seed):
    nn = lib.nn
    model = nn.Sequential(nn.Conv1d(2, 4, 3), nn.BatchNorm1d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(16, 2))
    fill_(lib, model, np.random.default_rng(seed), 0.3)
    opt = lib.optim.Adam([{"params": model[0].parameters(), "lr": 1e-2},
                          {"params": [*model[1].parameters(), *model[4].parameters()]}],
                         lr=5e-3, amsgrad=True)
    return model, opt, lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2)


def _checkpoint_steps(lib, parts, count):
    rng = np.random.default_rng(1)
    x, y = normal(lib, rng, 5, 2, 6), normal(lib, rng, 5, 2)
    model, opt, sched = parts
    losses = []
    for _ in range(count):
        loss = lib.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("saver, loader", [(ember, torch), (torch, ember)],
                         ids=["ember_to_torch", "torch_to_ember"])
def test_checkpoint_resumes_in_the_other_library(saver, loader):
    """Three steps in one library, torch.save of model, optimizer, scheduler and RNG state,
    weights_only torch.load in the other, three more steps: an uninterrupted run's losses."""
    first = _checkpoint_parts(saver, 0)
    losses = _checkpoint_steps(saver, first, 3)
    buffer = io.BytesIO()
    saver.save({"model": first[0].state_dict(), "opt": first[1].state_dict(),
                "sched": first[2].state_dict(), "rng": saver.get_rng_state(), "epoch": 3},
               buffer)
    buffer.seek(0)
    checkpoint = loader.load(buffer, weights_only=True)
    assert checkpoint["rng"].dtype == loader.uint8 and checkpoint["epoch"] == 3
    second = _checkpoint_parts(loader, 9)
    for part, key in zip(second, ("model", "opt", "sched")):
        part.load_state_dict(checkpoint[key])
    losses += _checkpoint_steps(loader, second, 3)
    straight = _checkpoint_steps(saver, _checkpoint_parts(saver, 0), 6)
    np.testing.assert_allclose(losses, straight, rtol=1e-5)
    assert second[0][1].num_batches_tracked.item() == 6


def amp_scaler_program(torch):
    """A LayerNorm MLP under CPU bfloat16 autocast with GradScaler('cpu'): unscale_, clip,
    step, update (the scale grows every two steps)."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(7)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))
    fill_(torch, model, rng, 0.3)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=2)
    x, y = normal(torch, rng, 12, 6), torch.from_numpy(rng.integers(0, 3, 12))
    res = {"loss": [], "scale": [], "dtypes": []}
    for _ in range(5):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)
            loss = F.cross_entropy(out, y)
        res["dtypes"] += [str(out.dtype).rsplit(".", 1)[-1], str(loss.dtype).rsplit(".", 1)[-1]]
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        res["loss"].append(loss.item())
        res["scale"].append(scaler.get_scale())
    res["weight"] = model[3].weight
    res["scaler_keys"] = sorted(scaler.state_dict())
    return res


PROGRAMS = [transformer_program, vae_program, packed_program, param_groups_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-6)


def test_grad_scaler_program_stays_close_to_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ours = amp_scaler_program(ember)
    assert_same_results(ours, amp_scaler_program(torch), rtol=3e-2, atol=1e-4)


# --- pure bfloat16 training: PyTorch's roundings, bit for bit -------------------------------

def _bf16(lib, array):
    return lib.from_numpy(np.ascontiguousarray(array, np.float32)).bfloat16()


def _bits(tensor):
    return tensor.detach().float().numpy()


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((12, 3), 1), ((5, 40), -1), ((7,), 0), ((5, 40), 0),
                                        ((3, 7, 4), 1)])
def test_bfloat16_softmax_rounds_as_torch(name, shape, dim):
    """The last-dim log_softmax keeps its sums' log in bfloat16, the other-dim softmax its
    exps; both backwards compute in float32 and round once (they rounded every step)."""
    rng = np.random.default_rng(len(shape) * 10 + dim)
    x, g = rng.standard_normal(shape) * 3, rng.standard_normal(shape)
    results = []
    for lib in (ember, torch):
        xt = _bf16(lib, x).requires_grad_()
        out = getattr(lib, name)(xt, dim)
        grad, = lib.autograd.grad(out, xt, _bf16(lib, g))
        results.append((_bits(out), _bits(grad)))
    (out, grad), (expected_out, expected_grad) = results
    np.testing.assert_array_equal(out, expected_out)
    np.testing.assert_array_equal(grad, expected_grad)


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def both_libraries_threads(request):
    """Both libraries on the same number of threads (tests/parity runs on one)."""
    torch.set_num_threads(request.param)
    ember.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(1)
    ember.set_num_threads(1)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape, dim", [((5, 400), 0), ((3, 70, 40), 1), ((6, 5, 33), 1),
                                        ((5, 32), 0), ((5, 69), 0), ((5, 40), 0)])
def test_other_dim_softmax_rounds_its_vector_body_once(dtype, shape, dim,
                                                       both_libraries_threads):
    """torch's other-dim softmax rounds once in its vector body and rounds the exps first
    in its scalar loop (what is left of each thread's range in each row after whole
    vectors): ember's bits match both parts on as many threads."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32) * 3
    outs = [lib.softmax(lib.from_numpy(x).to(getattr(lib, dtype)), dim)
            for lib in (ember, torch)]
    mismatched = (_bits(outs[0]) != _bits(outs[1])).sum()
    assert mismatched <= (1 if dtype == "float16" else 0)    # float16: one division's last bit


def test_vector_width_is_torchs():
    """The 16-bit lanes ember assumes are those of the kernels torch picked on this CPU."""
    from ember.backend.cpu_kernels import TORCH_16_BIT_LANES
    capability = torch.backends.cpu.get_cpu_capability()
    if not capability.startswith("AVX"):
        pytest.skip(f"torch's {capability} kernels: no x86 vector width to compare")
    assert TORCH_16_BIT_LANES == (32 if capability.startswith("AVX512") else 16)


@pytest.mark.parametrize("shape", [(12, 3), (4, 5, 3, 3), (5,)])
@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"label_smoothing": 0.1},
                                    {"ignore_index": 1}, {"reduction": "none"},
                                    {"label_smoothing": 0.2, "weight": True, "reduction": "sum"},
                                    {"label_smoothing": 0.1, "ignore_index": 1}])
def test_bfloat16_cross_entropy_gradient_rounds_as_torch(shape, kwargs):
    """bfloat16 logits go through log_softmax and nll_loss (and the smoothing term) rounded
    as PyTorch's composite; the fused float32 kernel differed in most gradient elements."""
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape) * 2
    target = rng.integers(0, shape[1] if len(shape) > 1 else shape[0],
                          shape[:1] + shape[2:] if len(shape) > 1 else ())
    results = []
    for lib in (ember, torch):
        options = dict(kwargs)
        if options.pop("weight", False):
            options["weight"] = _bf16(lib, np.linspace(0.5, 2, x.shape[1 if x.ndim > 1 else 0]))
        xt = _bf16(lib, x).requires_grad_()
        loss = lib.nn.functional.cross_entropy(xt, lib.from_numpy(np.asarray(target)), **options)
        grad, = lib.autograd.grad(loss.sum(), xt)
        results.append((_bits(loss), _bits(grad), str(loss.dtype).rsplit(".", 1)[-1]))
    (loss, grad, dtype), (expected_loss, expected_grad, expected_dtype) = results
    np.testing.assert_array_equal(grad, expected_grad)
    assert dtype == expected_dtype == "bfloat16"
    # PyTorch sums the nll terms in bfloat16 partial sums: the loss may be an ulp away
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-2)


def test_bfloat16_layer_norm_input_gradient_rounds_as_torch():
    """The input gradient in float32 from the statistics saved in bfloat16, rounded once."""
    rng = np.random.default_rng(30)
    x, g, w = rng.standard_normal((12, 16)) * 2, rng.standard_normal((12, 16)), \
        rng.standard_normal(16)
    grads = []
    for lib in (ember, torch):
        xt = _bf16(lib, x).requires_grad_()
        out = lib.nn.functional.layer_norm(xt, (16,), _bf16(lib, w), None)
        grads.append(_bits(lib.autograd.grad(out, xt, _bf16(lib, g))[0]))
    np.testing.assert_array_equal(*grads)


@pytest.mark.parametrize("options", [{}, {"weight_decay": 0.01}, {"maximize": True},
                                     {"momentum": 0.9, "dampening": 0.3}])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_sgd_steps_round_as_torch(options, dtype):
    """param.add_(grad, alpha=-lr) and the momentum update: 64 elements go through PyTorch's
    vectorized loop (the alpha in the parameter's dtype, one rounding; NumPy rounded
    lr * grad, then the difference); 5, and the last 3 of 35, through its scalar loop, which
    rounds the scaled term first as NumPy does."""
    rng = np.random.default_rng(1)
    weights = [rng.standard_normal(shape) for shape in ((7, 5), (5,), (8, 8))]
    grads = [[rng.standard_normal(w.shape) * 0.1 for w in weights] for _ in range(4)]
    results = []
    for lib in (ember, torch):
        def cast(a):
            return lib.from_numpy(np.ascontiguousarray(a, np.float32)).to(getattr(lib, dtype))
        params = [lib.nn.Parameter(cast(w)) for w in weights]
        opt = lib.optim.SGD(params, lr=0.013, **options)
        for step in grads:
            for p, g in zip(params, step):
                p.grad = cast(g)
            opt.step()
        results.append([_bits(p) for p in params])
    for ours, theirs in zip(*results):
        np.testing.assert_array_equal(ours, theirs)
