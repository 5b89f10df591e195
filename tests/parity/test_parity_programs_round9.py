"""Programs modelled on PyTorch's tutorials, run once with `torch` bound to ember and once to
PyTorch from the same NumPy weights and data: forward-mode AD (dual numbers through modules,
functional_call, a custom jvp, batch norm whose running statistics must move once), double
backward through custom Functions, extending autograd (once_differentiable,
mark_non_differentiable, needs_input_grad), module hooks (forward pre/post with kwargs, full
backward and backward pre hooks), pruning, parametrizations, model ensembling with
torch.func, warm-starting from a different model, and a BiLSTM-CRF tagger."""

import copy
import importlib

import numpy as np
import pytest

import ember
from tests.parity._programs import fill_, normal

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def submodule(lib, name):
    """`lib.<name>` imported (torch.nn.utils.prune is not an attribute until imported)."""
    return importlib.import_module(f"{lib.__name__}.{name}")


def forward_ad_program(torch):
    """Dual numbers through ops, a Linear whose parameters are duals, functional_call and a
    custom Function with a jvp; then func.jvp."""
    fwAD = torch.autograd.forward_ad
    rng = np.random.default_rng(0)
    primal, tangent = normal(torch, rng, 4, 3), normal(torch, rng, 4, 3)
    res = {}
    with fwAD.dual_level():
        dual = fwAD.make_dual(primal, tangent)
        res["same_tangent"] = [fwAD.unpack_dual(dual).tangent is tangent]
        p, t = fwAD.unpack_dual(torch.sin(dual) * dual.exp() + dual.sum(0, keepdim=True))
        res["p"], res["t"] = p, t
        res["plain"] = [fwAD.unpack_dual(primal).tangent is None]
        model = torch.nn.Linear(3, 2)
        fill_(torch, model, rng)
        for name, param in list(model.named_parameters()):
            delattr(model, name)
            setattr(model, name, fwAD.make_dual(param, torch.ones_like(param)))
        res["module"] = fwAD.unpack_dual(model(primal)).tangent
        model2 = torch.nn.Linear(3, 2)
        fill_(torch, model2, rng)
        duals = {n: fwAD.make_dual(p, torch.ones_like(p)) for n, p in model2.named_parameters()}
        out = torch.func.functional_call(model2, duals, (primal,))
        res["functional_call"] = fwAD.unpack_dual(out).tangent

    class TwiceExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x.exp() * 2

        @staticmethod
        def jvp(ctx, grad_input):
            x, = ctx.saved_tensors
            return grad_input * x.exp() * 2

    with fwAD.dual_level():
        out = TwiceExp.apply(fwAD.make_dual(primal, tangent))
        res["custom_jvp"] = fwAD.unpack_dual(out).tangent
    res["func_jvp"] = list(torch.func.jvp(torch.sin, (primal,), (tangent,)))
    return res


def forward_ad_layers_program(torch):
    """Tangents through conv, batch norm (training: running statistics move once), layer and
    group norm, softmax, pooling, in-place ops on duals and views, and func.jvp/linearize."""
    nn, F = torch.nn, torch.nn.functional
    fwAD = torch.autograd.forward_ad
    rng = np.random.default_rng(80)
    x, tx = normal(torch, rng, 2, 3, 5, 5), normal(torch, rng, 2, 3, 5, 5)
    conv = nn.Conv2d(3, 4, 3, padding=1)
    fill_(torch, conv, rng)
    bn, ln, gn = nn.BatchNorm2d(4), nn.LayerNorm(5), nn.GroupNorm(2, 4)
    res = {}
    with fwAD.dual_level():
        d = fwAD.make_dual(x, tx)
        y = conv(d)
        for name, out in [("conv", y), ("bn", bn(y)), ("ln", ln(y)), ("gn", gn(y)),
                          ("softmax", F.softmax(y, 1)), ("log_softmax", F.log_softmax(y, -1)),
                          ("max_pool", F.max_pool2d(y, 2)), ("avg", F.adaptive_avg_pool2d(y, 1)),
                          ("ce", F.cross_entropy(y.flatten(1), torch.tensor([0, 3])))]:
            res[name] = fwAD.unpack_dual(out).tangent
        z = d.clone()
        z.mul_(2)
        view = z[:, 0]
        view.add_(1)
        res["inplace"], res["view"] = fwAD.unpack_dual(z).tangent, fwAD.unpack_dual(view).tangent
    res["running_mean"], res["running_var"] = bn.running_mean, bn.running_var
    res["num_batches"] = [bn.num_batches_tracked.item()]
    out, jvp_out, aux = torch.func.jvp(lambda a: (a.sin().sum(0), a.cos()), (x[0, 0],),
                                       (tx[0, 0],), has_aux=True)
    res["jvp_aux"] = [out, jvp_out, aux]
    _, linear_fn = torch.func.linearize(lambda a: a.exp() * 2, x[0, 0])
    res["linearize"] = linear_fn(tx[0, 0])
    return res


def double_backward_program(torch):
    """A cube Function returning its derivative too (setup_context style), checked by
    gradcheck/gradgradcheck; Functions saving inputs, outputs and intermediates."""
    class MyCube(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3, 3 * x ** 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0], output[1])

        @staticmethod
        def backward(ctx, grad_output, grad_dx):
            x, dx = ctx.saved_tensors
            return grad_output * dx + grad_dx * 6 * x

    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = x.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad):
            result, = ctx.saved_tensors
            return grad * result

    class Sinh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx, expnegx = torch.exp(x), torch.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, grad_exp, grad_negexp):
            expx, expnegx = ctx.saved_tensors
            return grad_out * (expx + expnegx) / 2 + grad_exp * expx - grad_negexp * expnegx

    def cube(x):
        return MyCube.apply(x)[0]

    x = torch.tensor([1.0, 2.0, -0.5], dtype=torch.double, requires_grad=True)
    g, = torch.autograd.grad(cube(x).sum(), x, create_graph=True)
    gg, = torch.autograd.grad(g.sum(), x)
    checks = [torch.autograd.gradcheck(cube, (x,)), torch.autograd.gradgradcheck(cube, (x,)),
              torch.autograd.gradgradcheck(Exp.apply, (x,)),
              torch.autograd.gradgradcheck(lambda a: Sinh.apply(a)[0], (x,))]
    return {"g": g, "gg": gg, "checks": checks}


def extend_autograd_program(torch):
    """once_differentiable (double backward refused), mark_non_differentiable indices,
    needs_input_grad with a missing bias, and a non-tensor argument."""
    once_differentiable = torch.autograd.function.once_differentiable

    class Clamp01(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.clamp(0, 1)

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            x, = ctx.saved_tensors
            return grad * ((x > 0) & (x < 1)).to(grad.dtype)

    class Sort(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values, indices = x.sort()
            ctx.mark_non_differentiable(indices)
            ctx.save_for_backward(indices)
            return values, indices

        @staticmethod
        def backward(ctx, grad_values, grad_indices):
            indices, = ctx.saved_tensors
            return torch.zeros_like(grad_values).scatter_(0, indices, grad_values)

    class LinearFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, weight, bias=None):
            ctx.save_for_backward(input, weight, bias)
            output = input.mm(weight.t())
            return output if bias is None else output + bias.unsqueeze(0).expand_as(output)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grads = [grad_output.mm(weight) if ctx.needs_input_grad[0] else None,
                     grad_output.t().mm(input) if ctx.needs_input_grad[1] else None,
                     grad_output.sum(0) if bias is not None and ctx.needs_input_grad[2] else None]
            return tuple(grads)

    class MulConstant(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor, constant):
            ctx.constant = constant
            return tensor * constant

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.constant, None

    rng = np.random.default_rng(3)
    x = normal(torch, rng, 6).requires_grad_()
    values, indices = Sort.apply(Clamp01.apply(x * 0.5 + 0.5))
    (values * torch.arange(6.0)).sum().backward()
    res = {"x_grad": x.grad, "values": values, "indices": indices,
           "flags": [indices.requires_grad, values.requires_grad]}
    g, = torch.autograd.grad(Clamp01.apply(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError) as info:
        g.sum().backward()
    res["once"] = [str(info.value)]
    inp = normal(torch, rng, 5, 3).double().requires_grad_()
    w = normal(torch, rng, 4, 3).double().requires_grad_()
    b = normal(torch, rng, 4).double().requires_grad_()
    res["gradcheck"] = [torch.autograd.gradcheck(LinearFn.apply, (inp, w, b), eps=1e-6,
                                                 atol=1e-4)]
    LinearFn.apply(inp.detach(), w, None).sum().backward()
    res["w_grad"] = w.grad
    y = x.detach().requires_grad_()
    MulConstant.apply(y, 3.0).pow(2).sum().backward()
    res["constant"] = y.grad
    return res


def hooks_program(torch):
    """Forward pre/post hooks with kwargs (changing a kwarg and the output), prepend, full
    backward hooks and a backward pre hook doubling the gradient, removal, a global hook."""
    nn = torch.nn
    rng = np.random.default_rng(4)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(3, 4), nn.Linear(4, 2)

        def forward(self, x, scale=1.0):
            return self.l2(torch.relu(self.l1(x))) * scale

    m = Model()
    fill_(torch, m, rng)
    log = []

    def shape(g):
        return None if g is None else tuple(g.shape)

    def backward_hook(mod, grad_in, grad_out):
        log.append(("bw", type(mod).__name__, [shape(g) for g in grad_in],
                    [shape(g) for g in grad_out]))

    handles = [
        m.register_forward_pre_hook(lambda mod, args, kwargs: (log.append(("pre", sorted(kwargs)))
                                    or (args, {**kwargs, "scale": 2.0})), with_kwargs=True),
        m.register_forward_hook(lambda mod, args, kwargs, out: out + 1, with_kwargs=True),
        m.l1.register_forward_pre_hook(lambda mod, args: log.append(("pre_l1", len(args)))),
        m.l1.register_forward_hook(lambda mod, args, out: log.append(("post_l1",)), prepend=True),
        m.l2.register_full_backward_hook(backward_hook),
        m.l2.register_full_backward_pre_hook(lambda mod, gout: (gout[0] * 2,)),
        m.register_full_backward_hook(backward_hook)]
    x = normal(torch, rng, 5, 3).requires_grad_()
    out = m(x, scale=1.0)
    out.sum().backward()
    res = {"out": out, "x_grad": x.grad, "w_grad": m.l1.weight.grad}
    for h in handles:
        h.remove()
    res["after_remove"] = m(x)
    seen = []
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda mod, i, o: seen.append(type(mod).__name__))
    m(x)
    handle.remove()
    res["log"], res["seen"] = [repr(entry) for entry in log], seen
    return res


def pruning_program(torch):
    """The pruning tutorial: random/l1 unstructured, ln_structured, hook history, remove,
    global pruning, a custom method, then training through the masks."""
    nn = torch.nn
    prune = submodule(torch, "nn.utils.prune")
    rng = np.random.default_rng(24)

    def lenet():
        model = nn.Sequential(nn.Conv2d(1, 6, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 3),
                              nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 32),
                              nn.ReLU(), nn.Linear(32, 10))
        fill_(torch, model, rng, 0.2)
        return model

    model = lenet()
    conv = model[0]
    res = {}
    prune.l1_unstructured(conv, name="bias", amount=3)
    prune.ln_structured(conv, name="weight", amount=0.5, n=2, dim=0)
    res["bias_mask"], res["weight_mask"] = conv.bias_mask, conv.weight_mask
    res["hooks"] = [type(h).__name__ for h in conv._forward_pre_hooks.values()]
    prune.ln_structured(conv, name="weight", amount=0.25, n=1, dim=1)
    container = next(h for h in conv._forward_pre_hooks.values() if h._tensor_name == "weight")
    res["history"] = [type(h).__name__ for h in container]
    res["keys"] = list(model.state_dict())
    prune.remove(conv, "weight")
    res["names"] = [n for n, _ in conv.named_parameters()]
    model2 = lenet()
    targets = [(model2[0], "weight"), (model2[3], "weight"), (model2[7], "weight"),
               (model2[9], "weight")]
    prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=0.2)
    res["sparsity"] = [float((m.weight == 0).sum()) / m.weight.nelement() for m, _ in targets]

    class EveryOther(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            mask = default_mask.clone()
            mask.view(-1)[::2] = 0
            return mask

    lin = nn.Linear(3, 5)
    EveryOther.apply(lin, "bias")
    res["custom"] = lin.bias_mask
    opt = torch.optim.SGD(model2.parameters(), lr=0.1)
    x = normal(torch, rng, 2, 1, 28, 28)
    for _ in range(2):
        opt.zero_grad()
        model2(x).pow(2).mean().backward()
        opt.step()
    res["w"], res["w_orig"] = model2[9].weight, model2[9].weight_orig
    res["is_pruned"] = [prune.is_pruned(model2), prune.is_pruned(lenet())]
    return res


def parametrization_program(torch):
    """Symmetric, skew + Cayley, matrix_exp and a right_inverse parametrization; cached();
    removing one with and without leaving it; orthogonal() trained by SGD."""
    nn = torch.nn
    P = submodule(torch, "nn.utils.parametrize")
    rng = np.random.default_rng(30)

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    class Skew(nn.Module):
        def forward(self, X):
            A = X.triu(1)
            return A - A.transpose(-1, -2)

    class CayleyMap(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("Id", torch.eye(n))

        def forward(self, X):
            return torch.linalg.solve(self.Id - X, self.Id + X)

    calls = []

    class Counting(nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 2

    def linear(n):
        layer = nn.Linear(n, n)
        fill_(torch, layer, rng)
        return layer

    res = {}
    cayley = linear(3)
    P.register_parametrization(cayley, "weight", Skew())
    P.register_parametrization(cayley, "weight", CayleyMap(3))
    res["cayley"] = cayley.weight.T @ cayley.weight
    expm = linear(3)
    P.register_parametrization(expm, "weight", Skew())
    res["repr"] = [repr(expm).replace("ember", "torch")]
    counted = linear(4)
    P.register_parametrization(counted, "weight", Counting())
    counted.weight + counted.weight
    with P.cached():
        counted.weight + counted.weight
    res["calls"] = [len(calls)]
    sym = linear(3)
    P.register_parametrization(sym, "weight", Symmetric())
    res["original"] = sym.parametrizations.weight.original
    X = normal(torch, rng, 3, 3)
    sym.weight = X + X.T
    res["original_after_set"] = sym.parametrizations.weight.original
    res["keys"] = list(sym.state_dict())
    P.remove_parametrizations(sym, "weight", leave_parametrized=True)
    res["left"] = sym.weight
    P.remove_parametrizations(counted, "weight", leave_parametrized=False)
    res["unparametrized"] = counted.weight
    lin = linear(4)
    torch.nn.utils.parametrizations.orthogonal(lin)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    x = normal(torch, rng, 5, 4)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = (lin(x) - x.flip(1)).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res["losses"], res["orthogonal"] = losses, lin.weight.T @ lin.weight
    return res


def ensembling_program(torch):
    """Model ensembling: stack_module_state, a meta-device base model, functional_call under
    vmap with and without shared data, and per-model gradients."""
    nn, F, func = torch.nn, torch.nn.functional, torch.func
    rng = np.random.default_rng(22)

    class SimpleMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = nn.Linear(12, 16), nn.Linear(16, 8), nn.Linear(8, 4)

        def forward(self, x):
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x.flatten(1))))))

    models = [SimpleMLP() for _ in range(3)]
    for m in models:
        fill_(torch, m, rng)
    data = normal(torch, rng, 5, 3, 4)
    minibatches = data.unsqueeze(0).expand(3, -1, -1, -1) * torch.arange(1, 4.0).view(3, 1, 1, 1)
    params, buffers = func.stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def fmodel(params, buffers, x):
        return func.functional_call(base, (params, buffers), (x,))

    def loss_fn(params, buffers, x):
        return fmodel(params, buffers, x).pow(2).mean()

    grads = func.vmap(func.grad(loss_fn), in_dims=(0, 0, None))(params, buffers, data)
    return {"different": func.vmap(fmodel)(params, buffers, minibatches),
            "loop": torch.stack([m(mb) for m, mb in zip(models, minibatches)]),
            "same": func.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, data),
            "keys": sorted(params), "requires_grad": [p.requires_grad for p in params.values()],
            "meta": [base.fc1.weight.is_meta], "grad": grads["fc1.weight"]}


def warmstart_program(torch):
    """Loading a different model's state_dict: strict=False report, the strict error, a
    shape mismatch, renamed keys, assign=True and loading into a meta-device model."""
    nn = torch.nn
    rng = np.random.default_rng(41)

    class NetA(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.fc1, self.fc2 = nn.Conv2d(3, 6, 5), nn.Linear(16, 8), nn.Linear(8, 10)

    class NetB(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.fc1, self.fc3 = nn.Conv2d(3, 6, 5), nn.Linear(16, 8), nn.Linear(8, 4)
            self.register_buffer("extra", torch.zeros(2))

    a, b = NetA(), NetB()
    fill_(torch, a, rng)
    fill_(torch, b, rng)
    report = b.load_state_dict(a.state_dict(), strict=False)
    res = {"report": [repr(report)], "tuple": [repr(list(report))], "conv": b.conv1.weight}
    errors = []
    with pytest.raises(RuntimeError) as info:
        b.load_state_dict(a.state_dict())
    errors.append(str(info.value))
    bad = a.state_dict()
    bad["fc1.weight"] = torch.zeros(3, 3)
    with pytest.raises(RuntimeError) as info:
        b.load_state_dict(bad, strict=False)
    errors.append(str(info.value).replace("ember", "torch"))
    renamed = {k.replace("fc2", "fc3"): v for k, v in a.state_dict().items()
               if not k.startswith("fc2")}
    errors.append(repr(b.load_state_dict(renamed, strict=False)))
    c = NetA()
    c.load_state_dict(a.state_dict(), assign=True)
    with torch.device("meta"):
        meta = NetA()
    meta.load_state_dict(a.state_dict(), assign=True)
    res["errors"] = errors
    res["assign"] = [c.fc1.weight.data_ptr() == a.fc1.weight.data_ptr(),
                     type(c.fc1.weight).__name__, meta.fc1.weight.requires_grad]
    res["meta_weight"] = meta.fc1.weight
    return res


def bilstm_crf_program(torch):
    """The BiLSTM-CRF tagger: the forward algorithm with log-sum-exp, the gold path score,
    Viterbi decoding before and after two epochs of SGD."""
    nn = torch.nn
    rng = np.random.default_rng(60)
    start, stop = 3, 4

    def log_sum_exp(vec):
        top = vec[0, torch.max(vec, 1)[1].item()]
        return top + torch.log(torch.sum(torch.exp(vec - top.view(1, -1).expand(1, vec.size(1)))))

    class Tagger(nn.Module):
        def __init__(self, vocab, tags, embedding_dim, hidden_dim):
            super().__init__()
            self.hidden_dim, self.tags = hidden_dim, tags
            self.word_embeds = nn.Embedding(vocab, embedding_dim)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, bidirectional=True)
            self.hidden2tag = nn.Linear(hidden_dim, tags)
            self.transitions = nn.Parameter(torch.randn(tags, tags))

        def features(self, sentence):
            hidden = (torch.zeros(2, 1, self.hidden_dim // 2),) * 2
            embeds = self.word_embeds(sentence).view(len(sentence), 1, -1)
            out, _ = self.lstm(embeds, hidden)
            return self.hidden2tag(out.view(len(sentence), self.hidden_dim))

        def forward_score(self, feats):
            forward_var = torch.full((1, self.tags), -10000.)
            forward_var[0][start] = 0.
            for feat in feats:
                alphas = [log_sum_exp(forward_var + self.transitions[tag].view(1, -1)
                                      + feat[tag].view(1, -1).expand(1, self.tags)).view(1)
                          for tag in range(self.tags)]
                forward_var = torch.cat(alphas).view(1, -1)
            return log_sum_exp(forward_var + self.transitions[stop])

        def gold_score(self, feats, tags):
            score = torch.zeros(1)
            tags = torch.cat([torch.tensor([start], dtype=torch.long), tags])
            for i, feat in enumerate(feats):
                score = score + self.transitions[tags[i + 1], tags[i]] + feat[tags[i + 1]]
            return score + self.transitions[stop, tags[-1]]

        def forward(self, sentence):
            forward_var = torch.full((1, self.tags), -10000.)
            forward_var[0][start] = 0
            pointers = []
            for feat in self.features(sentence):
                scores = forward_var + self.transitions
                best = scores.argmax(1)
                pointers.append(best.tolist())
                forward_var = (scores.gather(1, best.view(-1, 1)).view(-1) + feat).view(1, -1)
            terminal = forward_var + self.transitions[stop]
            best = terminal.argmax(1).item()
            path = [best]
            for step in reversed(pointers):
                best = step[best]
                path.append(best)
            return terminal[0][path[0]], path[::-1][1:]

    data = [("the wall street journal reported today that apple corporation made money".split(),
             [0, 1, 1, 1, 2, 2, 2, 0, 1, 2, 2]),
            ("georgia tech is a university in georgia".split(), [0, 1, 2, 2, 2, 2, 0])]
    words = {w: i for i, w in enumerate(dict.fromkeys(w for s, _ in data for w in s))}
    model = Tagger(len(words), 5, 5, 4)
    fill_(torch, model, rng)
    with torch.no_grad():
        model.transitions[start, :] = -10000
        model.transitions[:, stop] = -10000

    def encode(sentence):
        return torch.tensor([words[w] for w in sentence], dtype=torch.long)

    opt = torch.optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-4)
    with torch.no_grad():
        before = model(encode(data[0][0]))
    losses = []
    for _ in range(2):
        for sentence, tags in data:
            model.zero_grad()
            feats = model.features(encode(sentence))
            loss = model.forward_score(feats) - model.gold_score(feats, torch.tensor(tags))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    with torch.no_grad():
        after = model(encode(data[0][0]))
    return {"before": [before[0].item()], "before_path": before[1], "loss": losses,
            "after": [after[0].item()], "after_path": after[1], "transitions": model.transitions}


def values(value):
    """A tensor (any dtype, requiring grad or not) as a float64 NumPy array; others unchanged."""
    if hasattr(value, "detach"):
        return value.detach().float().numpy().astype(np.float64)
    if isinstance(value, list) and value and hasattr(value[0], "detach"):
        return [values(v) for v in value]
    return value


def assert_same_results(ours, theirs, rtol, atol):
    """Names, flags, strings and integers equal; numbers within the tolerances."""
    assert ours.keys() == theirs.keys()
    for key, expected in theirs.items():
        got, expected = values(ours[key]), values(expected)
        if isinstance(expected, list) and expected and isinstance(expected[0], (str, bool, int)):
            assert got == expected, key
        elif isinstance(expected, list) and expected and isinstance(expected[0], np.ndarray):
            assert len(got) == len(expected), key
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=key)
        else:
            np.testing.assert_allclose(np.asarray(got, dtype=np.float64),
                                       np.asarray(expected, dtype=np.float64),
                                       rtol=rtol, atol=atol, err_msg=key)


PROGRAMS = [forward_ad_program, forward_ad_layers_program, double_backward_program,
            extend_autograd_program, hooks_program, pruning_program, parametrization_program,
            ensembling_program, warmstart_program, bilstm_crf_program]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_program_matches_torch(program):
    assert_same_results(program(ember), program(torch), rtol=2e-4, atol=2e-5)
