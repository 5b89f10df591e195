"""Mixed-precision programs on the CPU, run once with `torch` bound to ember and once to
PyTorch from the same NumPy weights and data: the dtype each module returns (forward hooks),
outputs, losses, gradients and parameters after a few steps under ``autocast("cpu")``; the
autocast state API (nesting, decorators, cache switch, deprecated aliases); custom autograd
Functions with ``custom_fwd``/``custom_bwd``; checkpointing inside autocast; and
``GradScaler("cpu")`` with float16 and two optimizers."""

import importlib
import warnings

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


@pytest.fixture(autouse=True)
def _autocast_left_off():
    """Each program leaves CPU autocast off in both libraries (a leak would run the tests
    after it in mixed precision)."""
    yield
    assert not ember.is_autocast_enabled("cpu") and not torch.is_autocast_enabled("cpu")


# --- comparing two runs -----------------------------------------------------------------------

def _plain(value):
    """``value`` with tensors as (dtype name, float64 array) and dtypes as their names."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "detach"):
        data = value.detach()
        return [_dt(value.dtype),
                data.double().numpy() if data.is_floating_point() else data.numpy()]
    if type(value).__name__ == "dtype":
        return _dt(value)
    return value


def _dt(dtype):
    """A dtype's bare name ("float16"), whichever library it comes from."""
    return str(dtype).split(".")[-1]


def _assert_same(ours, theirs, tol, where="result"):
    """Equal structure, dtypes, strings and flags; floating values within ``tol``."""
    if isinstance(theirs, dict):
        assert ours.keys() == theirs.keys(), where
        for key in theirs:
            _assert_same(ours[key], theirs[key], tol, f"{where}.{key}")
    elif isinstance(theirs, list):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            _assert_same(a, b, tol, f"{where}[{i}]")
    elif isinstance(theirs, np.ndarray) or isinstance(theirs, float):
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol, err_msg=where)
    else:
        assert ours == theirs, where


def _run_both(program, tol=1e-2):
    _assert_same(_plain(program(ember)), _plain(program(torch)), tol)


def _data(lib, *shape, scale=1.0):
    """A float32 tensor of smooth values, the same in both libraries."""
    values = np.sin(np.arange(np.prod(shape)) * 0.37) * scale
    return lib.from_numpy(values.reshape(shape).astype(np.float32))


def _hooked(lib, model):
    """A list that fills with (module class, output dtypes) as ``model``'s modules run."""
    seen = []

    def hook(module, args, output):
        outputs = output if isinstance(output, tuple) else (output,)
        seen.append((type(module).__name__,
                     [_dt(getattr(o, "dtype", type(o).__name__)) for o in outputs]))
    for module in model.modules():
        module.register_forward_hook(hook)
    return seen


# --- models trained under autocast ------------------------------------------------------------

def _block(lib):
    nn = lib.nn

    class Block(nn.Module):
        """Embedding, LayerNorm, MHA, SDPA (causal), a GELU MLP and a vocabulary head."""

        def __init__(self):
            super().__init__()
            self.emb, self.ln = nn.Embedding(11, 8), nn.LayerNorm(8)
            self.mha = nn.MultiheadAttention(8, 2, batch_first=True)
            self.ff = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
            self.ln2, self.head = nn.LayerNorm(8), nn.Linear(8, 11)

        def forward(self, x):
            h = self.ln(self.emb(x))
            a, weights = self.mha(h, h, h)
            h = h + a
            q = h.view(2, 5, 2, 4).transpose(1, 2)
            att = nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
            h = h + att.transpose(1, 2).reshape(2, 5, 8)
            return self.head(self.ln2(h + self.ff(h))), weights
    return Block()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_transformer_block_trains_alike_under_autocast(dtype):
    def program(lib):
        model = _block(lib)
        fill_(lib, model, np.random.default_rng(0))
        seen = _hooked(lib, model)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        x = lib.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
        y = lib.tensor([2, 3, 4, 5, 6, 7, 8, 9, 10, 1])
        losses = []
        for _ in range(3):
            with lib.autocast("cpu", dtype=getattr(lib, dtype)):
                out, weights = model(x)
                loss = lib.nn.functional.cross_entropy(out.reshape(-1, 11), y,
                                                       label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return {"seen": seen[:12], "out": out, "weights": weights, "loss": loss,
                "losses": losses, "grads": [p.grad for p in model.parameters()],
                "params": list(model.parameters())}
    _run_both(program, tol=2e-2)


def test_cnn_trains_alike_under_autocast():
    def program(lib):
        nn = lib.nn
        model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(4, 4, 3), nn.AvgPool2d(1),
                              nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(16, 3))
        fill_(lib, model, np.random.default_rng(1))
        seen = _hooked(lib, model)
        opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        x, y = _data(lib, 2, 2, 8, 8), lib.tensor([0, 2])
        for _ in range(3):
            with lib.autocast("cpu"):
                loss = nn.functional.nll_loss(lib.log_softmax(model(x), 1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return {"seen": seen, "loss": loss, "params": list(model.parameters()),
                "stats": [model[1].running_mean, model[1].running_var]}
    _run_both(program, tol=2e-2)


def test_recurrent_layers_under_autocast():
    def program(lib):
        nn = lib.nn
        rng = np.random.default_rng(2)
        lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True)
        gru = nn.GRU(4, 5, bidirectional=True)
        cell = nn.LSTMCell(3, 4)
        for m in (lstm, gru, cell):
            fill_(lib, m, rng)
        x = _data(lib, 2, 5, 3)
        with lib.autocast("cpu"):
            out, (h, c) = lstm(x)
            out2, h2 = gru(out.transpose(0, 1))
            hc, cc = cell(x[:, 0])
            loss = nn.functional.mse_loss(out2.float().sum(-1), lib.zeros(5, 2)) + hc.sum()
        loss.backward()
        grads = [p.grad for m in (lstm, gru, cell) for p in m.parameters()]
        return {"outputs": [out, h, c, out2, h2, hc, cc, loss], "grads": grads}
    _run_both(program, tol=2e-2)


def test_lstm_with_projections_steps_in_autocast_ops():
    """PyTorch has no oneDNN kernel for an LSTM with projections: its CPU layer is a
    composition, whose cell state stays float32 (ember ran it as one low-precision op)."""
    def program(lib):
        lstm = lib.nn.LSTM(3, 4, proj_size=2, num_layers=2)
        fill_(lib, lstm, np.random.default_rng(3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # PyTorch's "not supported with oneDNN"
            with lib.autocast("cpu"):
                out, (h, c) = lstm(_data(lib, 5, 2, 3))
        out.float().sum().backward()
        return {"outputs": [out, h, c], "grads": [p.grad for p in lstm.parameters()]}
    _run_both(program, tol=2e-2)


@pytest.mark.parametrize("shape", [(2, 4, 3), (2, 4, 3, 3), (1, 4, 2, 2, 2)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_local_response_norm_of_16_bit_input_under_autocast(shape, dtype):
    """Above 3-D, PyTorch's LRN pools with avg_pool3d, a float32 op under CPU autocast: a
    16-bit input works there (and gives float32) where ember raised its 16-bit error."""
    def program(lib):
        x = _data(lib, *shape).to(getattr(lib, dtype)).requires_grad_()
        with lib.autocast("cpu", dtype=getattr(lib, dtype)):
            y = lib.nn.functional.local_response_norm(x, 3, alpha=0.5, k=1.5)
        y.float().sum().backward()
        return {"y": y, "grad": x.grad}
    _run_both(program, tol=1e-2)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
def test_attention_weights_with_a_float_mask_under_autocast():
    """PyTorch adds the mask of the weights path with baddbmm, which autocast casts to the
    low dtype with its product: a float32 mask is no dtype error there (ember raised one)."""
    def program(lib):
        mha = lib.nn.MultiheadAttention(4, 2)
        fill_(lib, mha, np.random.default_rng(7))
        q = _data(lib, 3, 2, 4).requires_grad_()
        padding = lib.tensor([[False, False, True], [False, True, False]])
        with lib.autocast("cpu"):
            out, weights = mha(q, q, q, attn_mask=_data(lib, 3, 3), average_attn_weights=False)
            padded, none = mha(q, q, q, key_padding_mask=padding, need_weights=False)
            masked, mean = mha(q, q, q, attn_mask=_data(lib, 3, 3), key_padding_mask=padding)
        (out.float().sum() + padded.float().sum() + masked.float().sum()).backward()
        return {"outs": [out, weights, padded, masked, mean], "none": none is None,
                "grads": [q.grad, *(p.grad for p in mha.parameters())]}
    _run_both(program, tol=2e-2)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
def test_lstm_projection_and_float_mask_attention_round_as_torch_under_autocast():
    """Bit for bit: the composed LSTM adds b_hh in its hidden product, as PyTorch's cell,
    and the attention weights add a float mask inside baddbmm (one rounding each)."""
    def program(lib):
        lstm = lib.nn.LSTM(8, 16, proj_size=4, num_layers=2)
        mha = lib.nn.MultiheadAttention(16, 4)
        for module, seed in ((lstm, 3), (mha, 7)):
            fill_(lib, module, np.random.default_rng(seed))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # PyTorch's "not supported with oneDNN"
            with lib.autocast("cpu"):
                out, (h, c) = lstm(_data(lib, 5, 2, 8))
                q = _data(lib, 5, 2, 16)
                attended, weights = mha(q, q, q, attn_mask=_data(lib, 5, 5, scale=2.0))
        return [t.detach().float().numpy() for t in (out, h, c, attended, weights)]
    for ours, theirs in zip(program(ember), program(torch)):
        np.testing.assert_array_equal(ours, theirs)


def test_eval_mode_cnn_under_float16_autocast():
    def program(lib):
        nn = lib.nn
        model = nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.GroupNorm(2, 4),
                              nn.Upsample(scale_factor=1.5, mode="bicubic"), nn.Dropout(0.5),
                              nn.Conv2d(4, 2, 1), nn.LocalResponseNorm(2))
        fill_(lib, model, np.random.default_rng(8))
        model.eval()
        seen = _hooked(lib, model)
        x = _data(lib, 1, 2, 6, 6).requires_grad_()
        with lib.autocast("cpu", dtype=lib.float16):
            y = model(x)
        y.float().sum().backward()
        return {"seen": seen, "y": y, "grad": x.grad}
    _run_both(program, tol=2e-2)


def test_embedding_bags_and_losses_under_autocast():
    def program(lib):
        nn, F = lib.nn, lib.nn.functional
        bag, lin = nn.EmbeddingBag(10, 4, mode="mean"), nn.Linear(4, 3)
        rng = np.random.default_rng(4)
        fill_(lib, bag, rng)
        fill_(lib, lin, rng)
        b, t = _data(lib, 2, 3, scale=0.5), (_data(lib, 2, 3) > 0).float()
        with lib.autocast("cpu"):
            h = lin(bag(lib.tensor([1, 2, 4, 5, 4, 3]), lib.tensor([0, 3])))
            losses = [F.mse_loss(h, b), F.binary_cross_entropy_with_logits(h, t),
                      F.nll_loss(F.log_softmax(h, 1), lib.tensor([0, 2])),
                      F.kl_div(F.log_softmax(h, 1), F.softmax(b, 1), reduction="batchmean"),
                      F.cross_entropy(h, lib.tensor([1, 2]), label_smoothing=0.2),
                      F.smooth_l1_loss(h, b), F.binary_cross_entropy(lib.sigmoid(h), t),
                      lib.cdist(h, b), F.layer_norm(h, (3,)), F.softmax(h, 1), h.sum()]
            total = sum(x.float().sum() for x in losses)
        total.backward()
        return {"losses": losses, "grads": [bag.weight.grad, lin.weight.grad]}
    _run_both(program, tol=2e-2)


def test_products_and_in_place_ops_on_autocast_outputs():
    def program(lib):
        x, y, m, v = (_data(lib, 2, 3, 4), _data(lib, 2, 4, 5), _data(lib, 3, 5),
                      _data(lib, 4))
        with lib.autocast("cpu"):
            return [lib.bmm(x, y), lib.baddbmm(_data(lib, 2, 3, 5), x, y, beta=0.5, alpha=2),
                    lib.addmm(m, x[0], y[0]), lib.einsum("bij,bjk->bik", x, y),
                    lib.einsum("ij,j->i", x[0], v),
                    lib.matmul(x.half(), y), lib.matmul(v, v), lib.mv(x[0], v),
                    lib.addbmm(_data(lib, 3, 5), x, y), lib.linalg.vecdot(x, x),
                    lib.tensordot(x, y, dims=([2, 0], [1, 0])),
                    lib.linalg.multi_dot([x[0], y[0], _data(lib, 5, 2)]),
                    lib.mm(x[0], y[0]).add_(1.0).mul_(m),
                    _data(lib, 3, 5).add_(lib.mm(x[0], y[0])),
                    lib.mm(x[0], y[0], out=lib.empty(3, 5))]
    _run_both(program)


# --- the autocast state -----------------------------------------------------------------------

def test_autocast_state_nesting_and_decorators():
    def program(lib):
        x = _data(lib, 3, 3)
        dtype = lambda: str(lib.mm(x, x).dtype)  # noqa: E731
        seen = [lib.is_autocast_enabled("cpu"), lib.get_autocast_dtype("cpu")]
        with lib.autocast("cpu", dtype=lib.float16):
            seen += [lib.is_autocast_enabled("cpu"), lib.get_autocast_dtype("cpu"), dtype()]
            with lib.autocast("cpu", enabled=False):
                seen += [lib.is_autocast_enabled("cpu"), dtype()]
                with lib.autocast("cpu", dtype=lib.bfloat16):
                    seen.append(dtype())
            with lib.autocast("cpu", cache_enabled=False):
                seen += [lib.is_autocast_cache_enabled(), dtype()]
            seen += [lib.is_autocast_cache_enabled(), dtype()]
        lib.set_autocast_enabled("cpu", True)
        try:
            seen += [lib.is_autocast_enabled("cpu"), dtype()]
        finally:
            lib.set_autocast_enabled("cpu", False)
        seen.append(dtype())

        @lib.autocast("cpu")
        def on(a):
            return lib.mm(a, a).dtype, lib.is_autocast_enabled("cpu")

        @lib.autocast("cpu", enabled=False)
        def off(a):
            return lib.mm(a, a).dtype
        seen += [*on(x), lib.is_autocast_enabled("cpu")]
        with lib.autocast("cpu"):
            seen.append(off(x))
        region = lib.autocast("cpu", dtype=lib.float16)
        for _ in range(2):      # reused, not nested (nested, it leaks its state in both)
            with region:
                seen.append(dtype())
            seen.append(dtype())
        try:
            with lib.autocast("cpu"):
                raise KeyError
        except KeyError:
            seen.append(lib.is_autocast_enabled("cpu"))
        with lib.no_grad(), lib.autocast("cpu"):
            seen.append(lib.nn.functional.linear(x, x).dtype)
        return [_dt(s) for s in seen]
    assert program(ember) == program(torch)


def test_deprecated_cpu_amp_aliases_warn_at_the_callers_line():
    def program(lib):
        x = _data(lib, 3, 3)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with lib.cpu.amp.autocast(dtype=lib.float16):
                dtypes = [lib.mm(x, x).dtype, lib.get_autocast_cpu_dtype()]
            enabled = lib.is_autocast_cpu_enabled()
        messages = [(w.category.__name__, str(w.message).split(" (Triggered")[0],
                     w.filename == __file__) for w in caught]
        return [_dt(d) for d in dtypes] + [enabled] + messages
    ours, theirs = program(ember), program(torch)
    assert [m if isinstance(m, (str, bool)) else (m[0], m[1].replace("torch.", "ember."), m[2])
            for m in ours] == [m if isinstance(m, (str, bool)) else
                               (m[0], m[1].replace("torch.", "ember."), m[2]) for m in theirs]


# --- custom Functions and checkpoints ---------------------------------------------------------

def test_custom_functions_under_autocast():
    def program(lib):
        seen = []

        class Float32Product(lib.autograd.Function):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu", cast_inputs=lib.float32)
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                seen.append((a.dtype, lib.is_autocast_enabled("cpu")))
                return a.mm(b)

            @staticmethod
            @lib.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g):
                a, b = ctx.saved_tensors
                seen.append((g.dtype, lib.is_autocast_enabled("cpu"), g.mm(b.t()).dtype))
                return g.mm(b.t()), a.t().mm(g)

        class Product(Float32Product):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu")
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                return a.mm(b)

        class Bare(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                seen.append((lib.is_autocast_enabled("cpu"), a.mm(a).dtype))
                return a * 2

            @staticmethod
            def backward(ctx, g):
                return g * 2
        a = _data(lib, 3, 3).requires_grad_()
        b = _data(lib, 3, 2, scale=0.5).requires_grad_()
        with lib.autocast("cpu"):
            h = lib.mm(a, a)
            outs = [Float32Product.apply(h, b), Product.apply(h, b), Bare.apply(a)]
        sum(o.float().sum() for o in outs).backward()
        return {"outs": outs, "seen": [[_dt(s) for s in step] for step in seen],
                "grads": [a.grad, b.grad]}
    _run_both(program)


def test_checkpoint_recomputes_under_the_forwards_autocast_state():
    def program(lib):
        checkpoint = importlib.import_module(lib.__name__ + ".utils.checkpoint")
        nn = lib.nn
        net = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4))
        seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        fill_(lib, [*net.parameters(), *seq.parameters()], np.random.default_rng(5))
        seen = []

        def run(x):
            y = net(x)
            seen.append((_dt(y.dtype), lib.is_autocast_enabled("cpu")))
            return y
        x = _data(lib, 2, 4).requires_grad_()
        with lib.autocast("cpu"):
            y1 = checkpoint.checkpoint(run, x, use_reentrant=False)
            y2 = checkpoint.checkpoint(run, x, use_reentrant=True)
            z = checkpoint.checkpoint_sequential(seq, 2, x, use_reentrant=False)
        (y1.float().sum() + y2.float().sum() + z.float().sum()).backward()
        return {"seen": [list(s) for s in seen], "outs": [y1, y2, z], "grad": x.grad,
                "weights": [p.grad for p in net.parameters()]}
    _run_both(program)


# --- GradScaler -------------------------------------------------------------------------------

def test_grad_scaler_with_two_optimizers_skips_and_grows_alike():
    def program(lib):
        nn = lib.nn
        m1, m2 = nn.Linear(4, 3), nn.Linear(3, 2)
        fill_(lib, [*m1.parameters(), *m2.parameters()], np.random.default_rng(6))
        o1 = lib.optim.SGD(m1.parameters(), lr=0.1, momentum=0.9)
        o2 = lib.optim.Adam(m2.parameters(), lr=0.01)
        scaler = lib.amp.GradScaler("cpu", init_scale=2.0 ** 14, growth_interval=2)
        x, y = _data(lib, 5, 4), _data(lib, 5, 2, scale=0.3)
        log = []
        for step in range(7):
            with lib.autocast("cpu", dtype=lib.float16):
                out = m2(m1(x))
                loss = nn.functional.mse_loss(out, y) * (float("inf") if step == 3 else 1.0)
            o1.zero_grad()
            o2.zero_grad()
            scaled = scaler.scale(loss)
            scaled.backward()
            scaler.unscale_(o1)
            norm = nn.utils.clip_grad_norm_(m1.parameters(), 0.5)
            stepped = [scaler.step(o1), scaler.step(o2)]
            scaler.update()
            log.append([_dt(out.dtype), _dt(scaled.dtype), norm.item(), stepped,
                        scaler.get_scale()])
        state = scaler.state_dict()
        restored = lib.amp.GradScaler("cpu")
        restored.load_state_dict(state)
        return {"log": log, "state": [state["scale"], int(state["_growth_tracker"]),
                                      state["growth_interval"]],
                "restored": [restored.get_scale(), restored.get_growth_interval()],
                "params": [*m1.parameters(), *m2.parameters()]}
    _run_both(program, tol=1e-3)


def test_grad_scaler_misuse_raises_alike():
    def program(lib):
        seen = []

        def attempt(fn, *args):
            try:
                fn(*args)
                seen.append("ok")
            except Exception as e:          # noqa: BLE001 (the type and message are compared)
                seen.append((type(e).__name__, str(e)))
        scaler = lib.amp.GradScaler("cpu")
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=1.0)
        attempt(scaler.unscale_, opt)
        attempt(scaler.update)
        scaler.scale(p.sum()).backward()
        scaler.unscale_(opt)
        attempt(scaler.unscale_, opt)
        scaler.step(opt)
        attempt(scaler.step, opt)
        attempt(scaler.update, lib.tensor([1.0, 2.0]))
        scaler.update(lib.tensor(512.0))
        seen.append(scaler.get_scale())
        half = lib.nn.Parameter(lib.ones(2, dtype=lib.float16))
        half.grad = lib.ones(2, dtype=lib.float16)
        scaler.scale(lib.ones(1))
        attempt(scaler.unscale_, lib.optim.SGD([half], lr=1.0))
        p.grad = lib.tensor([float("nan"), 1.0])
        backoff = lib.amp.GradScaler("cpu", init_scale=8.0, backoff_factor=0.25)
        backoff.scale(lib.ones(1))
        seen.append(backoff.step(opt))
        backoff.update()
        seen.append(backoff.get_scale())
        attempt(lib.amp.GradScaler("cpu").load_state_dict, {})
        seen.append(lib.amp.GradScaler("cpu", enabled=False).state_dict())
        return seen
    assert program(ember) == program(torch)
