"""Training infrastructure and module plumbing, written as training code writes it, run once
with `torch` bound to ember and once to PyTorch from the same NumPy weights and data: module
surgery (state-dict hooks, strict=False and assign=True loads, tied weights, extra state,
shared submodules, whole-model pickling), optimizer plumbing (named parameter groups, state
round trips into fresh optimizers, step and state-dict hooks, clipping, schedulers), a data
pipeline (random_split, samplers, collation, padding collate_fns), checkpointing in a loop
(model, optimizer, scheduler, scaler and RNG state through BytesIO, weights-only loads,
activation checkpointing) and interpretability hooks (forward/backward module hooks, tensor
hooks, Grad-CAM, integrated gradients). What they found is pinned down in
test_parity_programs_round21_plumbing_fixes.py.

Random draws (randperm, multinomial) do not follow PyTorch's streams, so where a program
shuffles it compares what does not depend on the stream: sizes, the union of the indices,
and that one seed replays itself."""

import argparse
import copy
import io
import pickle
import re
import warnings

import numpy as np
import pytest

import ember
from tests.parity._compare import ember_names
from tests.parity._programs import fill_, normal
from tests.parity.test_parity_programs_round9 import assert_same_results

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _text(message):
    """A message or warning as both libraries can agree on it: PyTorch's names read as
    ember's, PyTorch's C++ source location and ember's failing-module line dropped (see NOTE
    [Module error context] in ember/nn/modules/_errors.py)."""
    message = re.sub(r" \(Triggered internally at .*\)", "", str(message))
    message = re.sub(r"\n  in model\S* \(.*$", "", message, flags=re.S)
    return ember_names(re.sub(r"TiedLM_(ember|torch)", "TiedLM", message))


def _outcome(fn):
    """'ok <value>' and the warnings raised, or '<ErrorType>: <message>'."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = fn()
    except Exception as e:
        return f"{type(e).__name__}: {_text(e)}"
    notes = "; ".join(f"{w.category.__name__}: {_text(w.message)}" for w in caught)
    return f"ok {_text(value)} | {notes}"


def _unpickling(fn):
    """The part of a weights-only refusal that names the global (ember words the preamble
    about its own load function)."""
    try:
        fn()
    except pickle.UnpicklingError as e:
        return "UnpicklingError: " + _text(str(e).split("WeightsUnpickler error: ")[-1]
                                           .split("\n")[0])
    return "loaded"


def _groups(opt):
    return [str(sorted((k, v) for k, v in g.items() if k not in ("params", "param_names")))
            for g in opt.param_groups]


class _TiedLM:
    """A tiny LM with tied embeddings and extra state (see _tied_class)."""

    def __init__(self):
        super().__init__()
        nn = self._lib.nn
        self.emb = nn.Embedding(6, 4)
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(4)])
        self.bn = nn.BatchNorm1d(4)
        self.out = nn.Linear(4, 6, bias=False)
        self.out.weight = self.emb.weight
        self.register_parameter("unused", None)
        self.register_buffer("mask", None)
        self.step = 0

    def get_extra_state(self):
        return {"step": self.step}

    def set_extra_state(self, state):
        self.step = state["step"] + 100

    def forward(self, idx):
        h = self.emb(idx)
        for layer in self.layers:
            h = self._lib.tanh(layer(h))
        h = self.bn(h.transpose(1, 2)).transpose(1, 2)
        return self.out(h)


def _tied_class(lib):
    """_TiedLM as a module-level class of ``lib``, so that whole-model pickling finds it."""
    name = "TiedLM_" + lib.__name__
    if name not in globals():
        cls = type(name, (_TiedLM, lib.nn.Module), {"_lib": lib})
        cls.__qualname__, cls.__module__ = name, __name__
        globals()[name] = cls
    return globals()[name]


def surgery_program(torch):
    """Fine-tuning surgery: hooks on state dicts, partial and assigning loads, shared and tied
    modules, submodule replacement, copies and pickles of the model and its optimizer."""
    nn = torch.nn
    rng = np.random.default_rng(1)
    res = {}

    class Block(nn.Module):
        def __init__(self, d, scale=2.0):
            super().__init__()
            self.fc, self.norm, self.scale = nn.Linear(d, d), nn.LayerNorm(d), scale
            self.register_buffer("running", torch.zeros(d))
            self.register_buffer("cache", torch.ones(d), persistent=False)

        def extra_repr(self):
            return f"scale={self.scale}"

        def forward(self, x):
            return self.norm(self.fc(x)) * self.scale + self.running

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(3, 4)
            shared = Block(4)
            self.blocks = nn.ModuleList([shared, Block(4), shared])
            self.head = nn.Sequential(nn.ReLU(), nn.Linear(4, 2))

        def forward(self, x):
            x = self.embed(x)
            for b in self.blocks:
                x = x + b(x)
            return self.head(x)

    net = Net()
    net.apply(lambda m: nn.init.constant_(m.bias, 0.01) if isinstance(m, nn.Linear) else None)
    fill_(torch, net, rng)
    res["repr"] = [_text(repr(net))]
    for kind in ("modules", "parameters", "buffers"):
        named = getattr(net, "named_" + kind)
        res[kind] = [n for n, _ in named()]
        res[kind + "_dup"] = [n for n, _ in named(remove_duplicate=False)]
    res["lookups"] = [_text(repr(net.get_submodule("blocks.1.norm"))),
                      _outcome(lambda: net.get_submodule("blocks.7")),
                      _outcome(lambda: net.get_parameter("blocks.1.fc.nope")),
                      _outcome(lambda: net.get_buffer("embed.weight")),
                      _text(net.get_parameter("blocks.1.fc.weight").sum())]

    calls = []

    def post_hook(module, state_dict, prefix, local_metadata):
        calls.append(prefix)
        state_dict[prefix + "version_tag"] = torch.tensor(3)
    net.blocks[1].register_state_dict_post_hook(post_hook)
    net.register_state_dict_pre_hook(lambda m, prefix, keep_vars: calls.append(("pre", prefix)))
    sd = net.state_dict()
    res["sd_keys"], res["sd_calls"] = list(sd), [str(calls)]
    res["sd_meta"] = [str(sd._metadata[""]), str(sd._metadata["blocks.0.norm"])]

    loads = []

    def load_pre(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errs):
        loads.append((prefix, strict))
        state_dict.pop(prefix + "version_tag", None)
    net2 = Net()
    net2.blocks[1].register_load_state_dict_pre_hook(load_pre)
    net2.register_load_state_dict_post_hook(
        lambda m, keys: loads.append((sorted(keys.missing_keys), sorted(keys.unexpected_keys))))
    partial = dict(sd)
    del partial["head.1.bias"]
    partial["extra.weight"] = torch.ones(2)
    result = net2.load_state_dict(partial, strict=False)
    res["incompatible"] = [repr(result), str(result.missing_keys), str(loads)]
    res["strict"] = [_outcome(lambda: net2.load_state_dict(partial))]
    bad = {k: v for k, v in sd.items() if "version_tag" not in k}
    bad["embed.weight"] = torch.zeros(5, 3)
    res["size_mismatch"] = [_outcome(lambda: net2.load_state_dict(bad, strict=False))]
    net3 = Net()
    clean = {k: v.clone() for k, v in sd.items() if "version_tag" not in k}
    net3.load_state_dict(clean, assign=True)
    res["assign"] = [net3.embed.weight.data_ptr() == clean["embed.weight"].data_ptr(),
                     type(net3.embed.weight).__name__, net3.embed.weight.requires_grad]
    x = normal(torch, rng, 5, 3)
    res["assigned_out"] = net3(x)

    net.head[0] = nn.GELU()
    net.add_module("extra", nn.Identity())
    net.register_module("dropout", nn.Dropout(0.0))
    net.blocks[1].norm = nn.Identity()
    res["repr_after"] = [_text(repr(net))]
    res["register_errors"] = [_outcome(f) for f in (
        lambda: net.register_buffer("a.b", torch.ones(1)), lambda: net.add_module("head", 3),
        lambda: net.register_parameter("w", torch.ones(1)))]
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    net_c = copy.deepcopy(net)
    opt_c = torch.optim.Adam(net_c.parameters(), lr=1e-2)
    opt_c.load_state_dict(copy.deepcopy(opt.state_dict()))
    res["shared_after_copy"] = [net_c.blocks[0] is net_c.blocks[2]]
    for _ in range(2):
        for m, o in ((net, opt), (net_c, opt_c)):
            o.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            o.step()
            losses.append(loss.item())
    res["losses"] = losses
    res["copied_params"] = [p.detach().clone() for p in net_c.parameters()]

    # tied weights, extra state, None entries; list surgery; whole-model pickles
    lm = _tied_class(torch)()
    fill_(torch, lm, rng)
    lm.step = 5
    sd = lm.state_dict()
    res["tied_keys"] = list(sd)
    res["tied_state"] = [sd["emb.weight"].data_ptr() == sd["out.weight"].data_ptr(),
                         str(sd["_extra_state"]),
                         str([n for n, _ in lm.named_parameters(remove_duplicate=False)])]
    lm2 = _tied_class(torch)()
    loaded = lm2.load_state_dict(sd)
    res["tied_load"] = [lm2.step, repr(loaded), lm2.out.weight is lm2.emb.weight]
    lm.layers.insert(1, nn.Identity())
    lm.layers.append(nn.ReLU())
    popped = lm.layers.pop(2)
    del lm.layers[-1]
    res["module_list"] = [_text(repr(lm.layers)), type(popped).__name__, len(lm.layers)]
    lm.half()
    res["half"] = [_text(f"{n}:{t.dtype}") for n, t in lm.state_dict().items()
                   if hasattr(t, "dtype")]
    lm.float().eval()
    idx = torch.tensor([[0, 5, 2], [1, 1, 3]])
    res["lm_out"] = lm(idx)
    buf = io.BytesIO()
    torch.save(lm, buf)
    buf.seek(0)
    res["whole_model_weights_only"] = [_unpickling(lambda: torch.load(buf))]
    buf.seek(0)
    lm3 = torch.load(buf, weights_only=False)
    res["whole_model"] = lm3(idx)
    res["whole_model_tied"] = [lm3.out.weight is lm3.emb.weight, lm3.step]
    lm.register_forward_hook(lambda mod, args, out: out * 2)
    lm4 = copy.deepcopy(lm)
    res["deepcopy_hooked"] = lm4(idx)
    sn = nn.utils.spectral_norm(nn.Linear(3, 3))        # GAN discriminators' older form
    res["spectral_norm_metadata"] = [str(dict(sn.state_dict()._metadata)), list(sn.state_dict())]
    res["functional_call"] = torch.func.functional_call(lm, {"emb.weight": torch.zeros(6, 4)},
                                                        (idx,), tie_weights=False)
    return res


def optimizer_program(torch):
    """Decoupled weight decay groups, a head added mid-training, chained schedulers, hooks,
    clipping, and the optimizer's state carried into fresh parameter objects."""
    nn = torch.nn
    rng = np.random.default_rng(3)
    res = {}
    backbone = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8))
    head = nn.Linear(8, 1)
    fill_(torch, backbone, rng)
    fill_(torch, head, rng)
    x, y = normal(torch, rng, 16, 4), normal(torch, rng, 16, 1)
    decay = [p for n, p in backbone.named_parameters() if not n.endswith("bias")]
    no_decay = [p for n, p in backbone.named_parameters() if n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0, "lr": 5e-3}],
                            lr=1e-2, betas=(0.9, 0.99), foreach=False)
    res["defaults"] = [str(sorted(opt.defaults.items()))]
    res["groups"] = _groups(opt)
    events = []
    opt.register_step_pre_hook(lambda o, a, k: events.append(("pre", len(o.param_groups))))
    opt.register_step_post_hook(lambda o, a, k: events.append(("post", len(o.state))))
    chained = torch.optim.lr_scheduler.ChainedScheduler([
        torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9),
        torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=3)])
    losses, lrs, norms = [], [], []
    for step in range(6):
        opt.zero_grad(set_to_none=(step % 2 == 0))
        loss = nn.functional.mse_loss(head(backbone(x)), y)
        loss.backward()
        norms.append(nn.utils.clip_grad_norm_(backbone.parameters(), max_norm=0.5,
                                              foreach=(step % 2 == 0)).item())
        nn.utils.clip_grad_value_(head.parameters(), clip_value=0.05)
        opt.step()
        chained.step()
        losses.append(loss.item())
        lrs.append(str([round(g["lr"], 10) for g in opt.param_groups]))
        if step == 2:
            opt.add_param_group({"params": head.parameters(), "lr": 2e-2})
            res["groups_added"] = _groups(opt)
    res["losses"], res["lrs"], res["norms"] = losses, lrs, norms
    res["events"] = [str(events), str(chained.get_last_lr())]
    opt.zero_grad(set_to_none=False)
    res["zeroed"] = [p.grad.abs().sum() for p in head.parameters()]
    sd = opt.state_dict()
    res["sd"] = [str([g["params"] for g in sd["param_groups"]]), str(sorted(sd["state"][0])),
                 str(sd["state"][0]["step"])]
    back2, head2 = copy.deepcopy(backbone), copy.deepcopy(head)
    opt2 = torch.optim.AdamW(
        [{"params": [p for n, p in back2.named_parameters() if not n.endswith("bias")]},
         {"params": [p for n, p in back2.named_parameters() if n.endswith("bias")]},
         {"params": list(head2.parameters())}], lr=1.0)
    opt2.load_state_dict(sd)
    res["loaded_groups"] = _groups(opt2)
    for o, b, h in ((opt, backbone, head), (opt2, back2, head2)):
        o.zero_grad()
        nn.functional.mse_loss(h(b(x)), y).backward()
        o.step()
    res["resumed"] = [p.detach() - q.detach() for p, q in zip(backbone.parameters(),
                                                              back2.parameters())]
    res["load_mismatch"] = [_outcome(lambda: torch.optim.AdamW(head2.parameters())
                                     .load_state_dict(sd))]

    # named parameters, state-dict hooks, maximize with foreach, flat vectors, clipping errors
    named = torch.optim.Adam(head.named_parameters(), lr=1e-2, amsgrad=True)
    hooks = []
    named.register_state_dict_pre_hook(lambda o: hooks.append("sd_pre"))
    named.register_load_state_dict_post_hook(lambda o: hooks.append("load_post"))
    nn.functional.mse_loss(head(backbone(x).detach()), y).backward()
    named.step()
    named_sd = named.state_dict()
    named.load_state_dict(named_sd)
    res["named"] = [str(named_sd["param_groups"][0]["param_names"]), str(hooks),
                    str(sorted(named_sd["state"][1]))]
    w = nn.Parameter(torch.ones(3))
    sgd = torch.optim.SGD([w], lr=0.1, momentum=0.9, nesterov=True, maximize=True,
                          foreach=True, weight_decay=0.01)
    for _ in range(3):
        sgd.zero_grad()
        (-(w - 2.0).pow(2).sum()).backward()
        sgd.step()
        sgd.param_groups[0]["lr"] *= 0.5
        sgd.param_groups[0]["weight_decay"] = 0.0
    res["maximize"], res["momentum"] = w, sgd.state[w]["momentum_buffer"]
    vec = nn.utils.parameters_to_vector(head.parameters())
    nn.utils.vector_to_parameters(vec * 2, head.parameters())
    res["vector"] = [vec, nn.utils.parameters_to_vector(head.parameters())]
    res["vector_error"] = [_outcome(lambda: nn.utils.vector_to_parameters(vec.tolist(),
                                                                          head.parameters()))]
    p = nn.Parameter(torch.ones(2))
    p.grad = torch.tensor([float("inf"), 1.0])
    res["nonfinite"] = [_outcome(lambda: nn.utils.clip_grad_norm_([p], 1.0,
                                                                  error_if_nonfinite=True)),
                        _outcome(lambda: nn.utils.clip_grad_norm_([p], 1.0, norm_type="inf"))]
    p.grad = torch.tensor([3.0, 4.0])
    res["clipped"] = [nn.utils.clip_grad_norm_([p], 1.0), p.grad]

    q = nn.Parameter(torch.zeros(1))
    o = torch.optim.SGD([q], lr=1.0)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
        o, mode="min", factor=0.5, patience=1, cooldown=2, min_lr=0.1, threshold=0.01)
    trail = []
    for metric in [1.0] + [0.9] * 11:
        o.step()
        plateau.step(metric)
        trail.append(o.param_groups[0]["lr"])
    res["plateau"] = trail
    res["plateau_state"] = [str(plateau.get_last_lr()), plateau.num_bad_epochs,
                            plateau.cooldown_counter]
    return res


def data_program(torch):
    """Splits, samplers, collation of nested samples, a padding collate_fn and a small
    training loop over a DataLoader."""
    import collections
    data = torch.utils.data
    rng = np.random.default_rng(4)
    res = {}
    feats = rng.standard_normal((20, 3)).astype(np.float32)
    labels = rng.integers(0, 3, 20)
    Pair = collections.namedtuple("Pair", ["feat", "label"])

    class Table(data.Dataset):
        def __len__(self):
            return len(feats)

        def __getitem__(self, i):
            return {"x": feats[i], "y": int(labels[i]), "meta": Pair(np.float64(i), [i, i * 2])}

    class Stream(data.IterableDataset):
        def __init__(self, start, end):
            self.start, self.end = start, end

        def __iter__(self):
            info = data.get_worker_info()
            res["worker_info"] = [str(info)]
            lo, hi = self.start, self.end
            if info is not None:
                per = int(np.ceil((hi - lo) / info.num_workers))
                lo = lo + info.id * per
                hi = min(lo + per, hi)
            return iter(range(lo, hi))

    ds = Table()
    parts = data.random_split(ds, [0.6, 0.25, 0.15], generator=torch.Generator().manual_seed(0))
    res["split"] = [len(p) for p in parts] + sorted(i for p in parts for i in p.indices)
    again = data.random_split(ds, [0.6, 0.25, 0.15], generator=torch.Generator().manual_seed(0))
    res["split_replays"] = [[p.indices for p in parts] == [p.indices for p in again],
                            type(parts[0]).__name__]
    res["split_errors"] = [_outcome(lambda: data.random_split(range(10), [0.5, 0.4])),
                           _outcome(lambda: [len(p) for p in data.random_split(range(3),
                                                                               [0.1, 0.1, 0.8])])]
    sub = data.Subset(ds, [3, 1, 4, 1, 5])
    cat = data.ConcatDataset([sub, data.TensorDataset(torch.arange(4.).view(4, 1),
                                                      torch.arange(4))])
    res["concat"] = [len(cat), str(cat.cumulative_sizes), _text(cat[-1]),
                     _outcome(lambda: cat[-20])]
    batch = data.default_collate([ds[0], ds[1]])
    res["collate"] = [_text(batch), _text(batch["x"].dtype), _text(batch["y"].dtype),
                      type(batch["meta"]).__name__, _text(batch["meta"].feat.dtype)]
    res["collate_more"] = [_outcome(lambda: data.default_collate(x)) for x in (
        [[1, 2.5], [3, 4.5]], [(np.array([1, 2]), "a"), (np.array([3, 4]), "b")],
        [True, False], [np.int32(3), np.int32(4)], [np.array(1.5), np.array(2.5)],
        [[1, 2], [3]], [{"a": 1}, {"b": 2}], [None, None])]
    res["convert"] = [_text(data.default_convert({"a": np.ones(2, dtype=np.float32), "b": 3}))]

    weights = torch.tensor([0.1, 0.5, 0.0, 0.2, 1.0])
    drawn = list(data.WeightedRandomSampler(weights, num_samples=8, replacement=True,
                                            generator=torch.Generator().manual_seed(3)))
    res["weighted"] = [len(drawn), all(weights[i] > 0 for i in drawn), _outcome(
        lambda: list(data.WeightedRandomSampler(weights, 8, replacement=False)))]
    for drop_last in (True, False):
        sampler = data.BatchSampler(data.SequentialSampler(range(10)), 3, drop_last=drop_last)
        res[f"batches_{drop_last}"] = [str(list(sampler)), len(sampler)]

    seqs = [rng.integers(1, 9, n) for n in (3, 5, 2, 4, 1, 6)]
    pad = torch.nn.utils.rnn.pad_sequence

    def pad_collate(batch):
        xs, lens = zip(*batch)
        return (pad(list(xs), batch_first=True, padding_value=-1),
                pad(list(xs), batch_first=True, padding_side="left"), pad(list(xs)),
                torch.tensor(lens))
    padded = data.DataLoader([(torch.as_tensor(s), len(s)) for s in seqs], batch_size=4,
                             collate_fn=pad_collate)
    res["padded"] = [str(r.tolist()) + str(left.tolist()) + str(tuple(t.shape)) + str(n.tolist())
                     for r, left, t, n in padded]
    res["pad_errors"] = [_outcome(lambda: pad([torch.ones(2)], padding_side="middle")),
                         _outcome(lambda: pad([torch.ones(2, 3), torch.ones(2, 4)]))]
    res["stream"] = [str([b.tolist() for b in data.DataLoader(Stream(3, 10), batch_size=3)]),
                     _outcome(lambda: len(data.DataLoader(Stream(0, 3), batch_size=2))),
                     _outcome(lambda: data.DataLoader(Stream(0, 3), shuffle=True))]

    model = torch.nn.Linear(3, 3)
    fill_(torch, model, rng)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train = data.Subset(ds, list(range(0, 20, 2)))
    losses = []
    for epoch in range(2):
        for b in data.DataLoader(train, batch_size=4, drop_last=epoch == 1):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(b["x"]), b["y"])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    res["losses"], res["weights"] = losses, model.weight
    orders = []
    for _ in range(2):
        loader = data.DataLoader(train, batch_size=3, shuffle=True, drop_last=True,
                                 generator=torch.Generator().manual_seed(7))
        orders.append([b["meta"].feat.tolist() for b in loader])
    flat = sorted(i for b in orders[0] for i in b)
    res["shuffled"] = [orders[0] == orders[1], len(orders[0]), len(flat),
                       set(flat) <= set(range(0, 20, 2)), type(loader.sampler).__name__]
    res["loader_errors"] = [
        _outcome(lambda: data.DataLoader(ds, batch_size=2, batch_sampler=sampler)),
        _outcome(lambda: data.DataLoader(ds, num_workers=0, persistent_workers=True))]
    return res


class Custom:
    """A user class in a checkpoint (refused by weights-only loads unless allowed)."""

    def __init__(self, v):
        self.v = v


def checkpoint_program(torch):
    """A resumable loop: everything a trainer saves through one BytesIO, resumed into fresh
    objects; weights-only loading; activation checkpointing with dropout and batch norm."""
    nn = torch.nn
    rng = np.random.default_rng(5)
    res = {}

    def make():
        return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, 2))
    model = make()
    fill_(torch, model, rng)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
    x, y = normal(torch, rng, 8, 4), normal(torch, rng, 8, 2)

    def train_step(m, o, s, sc):
        o.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        sc.scale(loss).backward()
        sc.step(o)
        sc.update()
        s.step()
        return loss.item()
    losses = [train_step(model, opt, sched, scaler) for _ in range(3)]
    torch.manual_seed(123)
    gen = torch.Generator().manual_seed(9)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "scaler": scaler.state_dict(),
                "rng": torch.get_rng_state(), "gen": gen.get_state(), "epoch": 3,
                "args": {"dims": (4, 16, 2), "name": "mlp"}}, buf)
    res["states"] = [str(sorted(scaler.state_dict().items())),
                     str(sorted(sched.state_dict().items())), _text(torch.get_rng_state().dtype)]
    a, b = torch.rand(3), torch.randn(2, generator=gen)
    after = [train_step(model, opt, sched, scaler) for _ in range(3)]
    res["losses"] = losses + after
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True, map_location="cpu")
    res["loaded"] = [str(list(ckpt)), str(ckpt["args"]), ckpt["epoch"]]
    m2 = make()
    o2 = torch.optim.Adam(m2.parameters(), lr=1.0)
    s2 = torch.optim.lr_scheduler.StepLR(o2, step_size=5, gamma=0.1)
    sc2 = torch.amp.GradScaler("cpu")
    for obj, key in ((m2, "model"), (o2, "optimizer"), (s2, "scheduler"), (sc2, "scaler")):
        obj.load_state_dict(ckpt[key])
    torch.set_rng_state(ckpt["rng"])
    g2 = torch.Generator()
    g2.set_state(ckpt["gen"])
    res["rng_replays"] = [bool(torch.equal(a, torch.rand(3))),
                          bool(torch.equal(b, torch.randn(2, generator=g2)))]
    res["resumed"] = [train_step(m2, o2, s2, sc2) for _ in range(3)]
    res["resumed_state"] = [str(o2.param_groups[0]["lr"]), str(s2.get_last_lr()),
                            str(sc2.get_scale())]

    unsafe = io.BytesIO()
    torch.save({"obj": Custom(3), "args": argparse.Namespace(lr=0.1), "fs": frozenset([1])},
               unsafe)
    for allowed in ([], [Custom], [Custom, argparse.Namespace]):
        unsafe.seek(0)
        with torch.serialization.safe_globals(allowed):
            res[f"weights_only_{len(allowed)}"] = [_unpickling(lambda: torch.load(unsafe))]
    unsafe.seek(0)
    res["unsafe_globals"] = sorted(torch.serialization.get_unsafe_globals_in_checkpoint(unsafe))
    unsafe.seek(0)
    res["trusted"] = [torch.load(unsafe, weights_only=False)["obj"].v]
    plain = io.BytesIO()
    torch.save({"w": torch.arange(6.)}, plain)
    for where in ("cpu", torch.device("cpu"), lambda storage, loc: storage, {"cpu": "cpu"},
                  "nope"):
        plain.seek(0)
        res[f"map_{where if isinstance(where, str) else type(where).__name__}"] = [
            _outcome(lambda: torch.load(plain, map_location=where)["w"].device)]
    base = torch.arange(6.)
    shared = io.BytesIO()
    torch.save({"base": base, "view": base[2:4]}, shared)
    shared.seek(0)
    got = torch.load(shared)
    got["view"].fill_(-1)
    res["shared_storage"] = [got["base"], got["view"].storage_offset()]

    cp = torch.utils.checkpoint
    block = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.GELU(), nn.Linear(8, 4))
    fill_(torch, block, rng)
    inp = normal(torch, rng, 6, 4).requires_grad_()
    for reentrant in (True, False):
        torch.manual_seed(0)
        out = cp.checkpoint(block, inp, use_reentrant=reentrant, preserve_rng_state=True)
        torch.manual_seed(0)
        ref = block(inp)
        res[f"ckpt_{reentrant}"] = [bool(torch.equal(out, ref)), type(out.grad_fn).__name__,
                                    _outcome(lambda: torch.autograd.grad(
                                        out.sum(), inp, retain_graph=True)[0].shape)]
        params = [inp] + list(block.parameters())
        grads = []
        for root in (out, ref):
            for p in params:
                p.grad = None
            root.sum().backward()
            grads.append([p.grad.clone() for p in params])
        res[f"ckpt_grads_{reentrant}"] = [g - r for g, r in zip(*grads)]
        bn = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 3))
        fill_(torch, bn, rng)
        xb = normal(torch, rng, 5, 3).requires_grad_()
        cp.checkpoint(bn, xb, use_reentrant=reentrant).pow(2).sum().backward()
        # the recomputation runs batch norm again: its running stats move twice
        res[f"ckpt_bn_{reentrant}"] = [bn[1].running_mean, xb.grad,
                                       int(bn[1].num_batches_tracked)]
    res["ckpt_warnings"] = [_outcome(lambda: cp.checkpoint(block, inp).shape),
                            _outcome(lambda: cp.checkpoint(block, torch.ones(2, 4),
                                                           use_reentrant=True).requires_grad),
                            _outcome(lambda: cp.checkpoint(lambda t, s: t * s, inp, s=2.0,
                                                           use_reentrant=True))]
    return res


def hooks_program(torch):
    """Interpretability through hooks: keyword pre-hooks, always-called forward hooks, full
    backward (pre-)hooks, tensor and node hooks, Grad-CAM, guided backprop, integrated
    gradients."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(6)
    res = {}

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                                          nn.Conv2d(6, 8, 3, padding=1), nn.ReLU())
            self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(8, 4)

        def forward(self, x, temperature=1.0):
            return self.fc(self.pool(self.features(x)).flatten(1)) / temperature

    model = CNN()
    fill_(torch, model, rng)
    model.eval()
    x = normal(torch, rng, 2, 3, 6, 6)
    log = []

    def pre_kw(module, args, kwargs):
        log.append(("pre", tuple(args[0].shape), sorted(kwargs)))
        return args, dict(kwargs, temperature=2.0)

    def fwd_kw(module, args, kwargs, output):
        log.append(("fwd", sorted(kwargs), tuple(output.shape)))
        return output * 1.5
    handles = [model.register_forward_pre_hook(pre_kw, with_kwargs=True),
               model.register_forward_hook(fwd_kw, with_kwargs=True, always_call=True),
               model.register_forward_hook(lambda m, a, o: log.append("first"), prepend=True)]
    res["hooked_out"] = model(x, temperature=1.0)
    for h in handles:
        h.remove()
    res["plain_out"] = model(x)

    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    boom = Boom()
    boom.register_forward_hook(lambda m, a, o: log.append("always"), always_call=True)
    boom.register_forward_hook(lambda m, a, o: log.append("normal"))
    res["boom"] = [_outcome(lambda: boom(torch.ones(1)))]
    lin = nn.Linear(2, 2)
    h = lin.register_forward_pre_hook(lambda m, a, k: (a, k, 1), with_kwargs=True)
    res["bad_pre_hook"] = [_outcome(lambda: lin(torch.ones(1, 2)))]
    res["log"] = [str(e) for e in log]

    # Grad-CAM on the last conv: activations from a forward hook, gradients from a tensor hook
    acts, grads = {}, {}

    def save_act(module, inp, output):
        acts["v"] = output.detach()
        output.register_hook(lambda g: grads.__setitem__("v", g.detach()))
    h = model.features[2].register_forward_hook(save_act)
    logits = model(x)
    model.zero_grad()
    logits[torch.arange(2), logits.argmax(1)].sum().backward()
    cam = F.relu((grads["v"].mean(dim=(2, 3), keepdim=True) * acts["v"]).sum(1))
    cam = F.interpolate(cam.unsqueeze(1), size=(12, 12), mode="bilinear", align_corners=False)
    lo, hi = cam.amin(dim=(2, 3), keepdim=True), cam.amax(dim=(2, 3), keepdim=True)
    res["cam"] = (cam - lo) / (hi - lo + 1e-8)
    h.remove()

    blog = []

    def bpre(module, grad_output):
        blog.append(("bpre", [tuple(g.shape) for g in grad_output]))
        return (grad_output[0] * 2,)

    def bhook(module, grad_input, grad_output):
        blog.append(("bhook", [None if g is None else tuple(g.shape) for g in grad_input]))
        return tuple(None if g is None else g.clamp(-0.1, 0.1) for g in grad_input)
    handles = [model.fc.register_full_backward_pre_hook(bpre),
               model.features[2].register_full_backward_hook(bhook),
               model.features.register_full_backward_hook(
                   lambda m, gi, go: blog.append(("seq", [g is None for g in gi])))]
    xin = x.clone().requires_grad_()
    model.zero_grad()
    model(xin).sum().backward()
    res["backward_hooked"] = [xin.grad, model.features[0].weight.grad]
    model(x).sum().backward()           # no input requires grad: the hooks see None
    res["blog"] = [str(e) for e in blog]
    with torch.no_grad():
        res["no_grad_hooked"] = [_outcome(lambda: model.features(xin).requires_grad)]
    for h in handles:
        h.remove()
    relu = nn.Sequential(nn.Linear(2, 2), nn.ReLU(inplace=True))
    relu[0].register_full_backward_hook(lambda m, gi, go: None)
    res["inplace_after_hook"] = [_outcome(
        lambda: relu(torch.ones(1, 2, requires_grad=True)).sum().backward())]

    # guided backprop: clamp the gradient through every ReLU
    net = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    fill_(torch, net, rng)
    h = net[1].register_full_backward_hook(lambda m, gi, go: (gi[0].clamp(min=0),))
    xx = normal(torch, rng, 3, 4).requires_grad_()
    net(xx)[:, 1].sum().backward()
    res["guided"] = xx.grad
    h.remove()

    w = nn.Parameter(normal(torch, rng, 3))
    a = w * 2
    a.retain_grad()
    b = a.exp()
    b.retain_grad()
    a.register_hook(lambda g: g * 10)
    w.register_hook(lambda g: g + 1)
    node_log = []
    b.grad_fn.register_prehook(lambda gout: node_log.append(b.grad_fn.name()))
    a.grad_fn.register_hook(lambda gin, gout: node_log.append(len(gin)))
    (b * torch.arange(3.)).sum().backward()
    res["tensor_hooks"] = [a.grad, b.grad, w.grad]
    res["retains"] = [a.retains_grad, b.retains_grad, w.retains_grad, str(node_log),
                      _outcome(lambda: torch.ones(2).register_hook(lambda g: g)),
                      _outcome(lambda: (w * 2).grad)]
    accumulated = []
    w.register_post_accumulate_grad_hook(lambda p: accumulated.append(p.grad.sum().item()))
    (w * 3).sum().backward()
    res["post_accumulate"] = accumulated
    seen = []
    p, q = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    torch.autograd.graph.register_multi_grad_hook(
        (p, q), lambda gs: seen.append([None if g is None else g.sum().item() for g in gs]))
    (p.sum() + (q * 3).sum()).backward()
    res["multi_grad"] = [str(seen)]

    # integrated gradients along a straight path from a black baseline
    baseline = torch.zeros_like(x[:1])
    alphas = torch.linspace(0, 1, steps=9)
    path = (baseline + alphas.view(-1, 1, 1, 1) * (x[:1] - baseline)).requires_grad_(True)
    g_path = torch.autograd.grad(model(path)[:, 1].sum(), path)[0]
    ig = (x[:1] - baseline) * ((g_path[:-1] + g_path[1:]) / 2).mean(0)
    res["ig"] = ig
    res["ig_completeness"] = [ig.sum().item(),
                              (model(x[:1])[0, 1] - model(baseline)[0, 1]).item()]
    hd = model.register_forward_hook(lambda m, a, o: o + 1)
    res["handles"] = [type(hd).__name__, len(model._forward_hooks), str(hd.remove()),
                      str(hd.remove()), len(model._forward_hooks)]     # removing twice is fine
    return res


PROGRAMS = [surgery_program, optimizer_program, data_program, checkpoint_program,
            hooks_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = program(ember), program(torch)
    assert_same_results(ours, theirs, rtol=1e-5, atol=1e-6)

