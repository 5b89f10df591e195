"""The miscellaneous probes of the nn.Module fuzzer (test_parity_module_fuzz_round35.py): each
builds its own small situation (hooks, state dicts, containers, parametrize, clip_grad, ...)
around a module of the tree and returns what it saw."""

import copy
import random

from tests.parity._module_fuzz_round35_common import _arr, _classes, _err, _linear, _norm


def misc_step(rng, m, name, vseed, flag, flag2, mod):  # noqa: C901 - one branch per probe
    what = rng.choice(["sd_positional", "load_version", "load_post_return", "private_sd_hook",
                       "global_bw", "param_int", "buffer_bad", "named_memo", "seq_slice",
                       "seq_add", "mlist_neg", "mdict_update", "pdict_tensor", "plist_tensor",
                       "load_non_mapping", "load_missing_sub", "get_extra", "train_bad",
                       "register_bad_name", "backward_hook_mix", "str_keys", "reg_hooks",
                       "load_into_none", "load_nonpersistent", "load_cast",
                       "load_param_assign", "parametrize_sd", "fwd_kwargs",
                       "always_call_error", "bw_two_inputs", "mlist_repr", "clip_mixed",
                       "clip_value_mixed", "parametrize_more", "call_bare_return",
                       "zero_grad_graph", "apply_recurse", "to_empty",
                       "sd_hooks_prefix"])

    def misc(lib, env):  # noqa: C901 - one branch per probe
        nn = lib.nn
        Custom = _classes(lib)[0]
        root = env["root"]
        want = {"seq_slice": nn.Sequential, "seq_add": nn.Sequential,
                "mlist_neg": nn.ModuleList, "mdict_update": nn.ModuleDict,
                "pdict_tensor": nn.ParameterDict, "plist_tensor": nn.ParameterList}.get(what)
        fits = [x for x in env["mods"] if want is None or isinstance(x, want)]
        if not fits:
            return "skip"
        target = fits[m % len(fits)]
        if what == "sd_positional":
            d = type(root.state_dict())()
            out = target.state_dict(d, "pre.")
            return list(out), out is d
        if what == "load_version":
            d = target.state_dict()
            d._metadata = {"": {"version": 0}}
            return repr(target.load_state_dict(d, strict=flag))
        if what == "load_post_return":
            h = target.register_load_state_dict_post_hook(lambda mm, k: 1)
            try:
                return repr(target.load_state_dict(target.state_dict()))
            finally:
                h.remove()
        if what == "private_sd_hook":
            h = target._register_state_dict_hook(lambda mm, d, p, meta: {"x": 1})
            try:
                return list(root.state_dict())
            finally:
                h.remove()
        if what == "global_bw":
            seen = []
            h = nn.modules.module.register_module_full_backward_hook(
                lambda mm, gi, go: seen.append((env["name_of"](mm), len(gi), len(go))))
            try:
                x = lib.ones(2, 3, requires_grad=True)
                out = target(x)
                if isinstance(out, lib.Tensor) and out.requires_grad:
                    out.sum().backward()
            finally:
                h.remove()
            return seen
        if what == "param_int":
            return _norm(lib, nn.Parameter(lib.ones(2, dtype=lib.int64)), root)
        if what == "buffer_bad":
            return target.register_buffer(name, 3)
        if what == "named_memo":
            return [n for n, _ in target.named_modules(memo={root}, prefix="p")]
        if what == "seq_slice" and isinstance(target, nn.Sequential):
            return repr(target[1:]), repr(target[::-1]), len(target[:0])
        if what == "seq_add" and isinstance(target, nn.Sequential):
            return repr(target + nn.Sequential(nn.Identity())), repr(target * 2)
        if what == "mlist_neg" and isinstance(target, nn.ModuleList):
            return _norm(lib, target[-1], root), repr(target[-2:])
        if what == "mdict_update" and isinstance(target, nn.ModuleDict):
            target.update([("k9", nn.Identity()), ("k0", nn.Identity())])
            return list(target.keys())
        if what == "pdict_tensor" and isinstance(target, nn.ParameterDict):
            target["t"] = lib.ones(3)
            target["n"] = None
            target["i"] = 4
            return [(k, type(v).__name__) for k, v in target.items()], repr(target)
        if what == "plist_tensor" and isinstance(target, nn.ParameterList):
            target.append(lib.ones(3))
            target.append(None)
            target.append("s")
            return [type(v).__name__ for v in target], repr(target)
        if what == "load_non_mapping":
            return target.load_state_dict([("w", lib.ones(3))])
        if what == "load_missing_sub":
            d = {k: v for k, v in root.state_dict().items() if "." not in k}
            res = root.load_state_dict(d, strict=flag)
            return list(res.missing_keys), list(res.unexpected_keys)
        if what == "get_extra":
            return target.get_extra_state()
        if what == "train_bad":
            return target.train("yes")
        if what == "register_bad_name":
            meth = rng_meth = ["register_buffer", "register_parameter", "add_module"][
                vseed % 3]
            return getattr(target, rng_meth)(3, None), meth
        if what == "backward_hook_mix":
            h1 = target.register_full_backward_hook(lambda *a: None)
            try:
                return target.register_backward_hook(lambda *a: None)
            finally:
                h1.remove()
        if what == "reg_hooks":
            seen = []
            mm_ = nn.modules.module
            hs = [mm_.register_module_buffer_registration_hook(
                      lambda mo, n, b: seen.append(("b", n)) or (None if b is None else b * 2)),
                  mm_.register_module_module_registration_hook(
                      lambda mo, n, x: seen.append(("m", n))),
                  mm_.register_module_parameter_registration_hook(
                      lambda mo, n, p: seen.append(("p", n)))]
            try:
                target.register_buffer("rb", lib.ones(2))
                target.rp = nn.Parameter(lib.ones(2))
                target.rm = nn.Identity()
                target.rm = None
                target.rp = None
                target.rb = lib.zeros(1)
                target.rb2 = nn.Buffer(lib.ones(1))
            finally:
                for h in hs:
                    h.remove()
            return seen
        if what == "load_into_none":
            target.register_buffer("nb", None)
            target.register_parameter("np_", None)
            d = target.state_dict()
            d["nb"] = lib.ones(2)
            d["np_"] = lib.ones(2)
            res = target.load_state_dict(d, strict=flag, assign=flag2)
            return list(res.missing_keys), list(res.unexpected_keys)
        if what == "load_nonpersistent":
            target.register_buffer("npb", lib.zeros(2), persistent=False)
            d = target.state_dict()
            d["npb"] = lib.ones(2)
            res = target.load_state_dict(d, strict=flag, assign=flag2)
            return list(res.missing_keys), list(res.unexpected_keys), _arr(target.npb)
        if what == "load_cast":
            d = {k: (v.double() if v.is_floating_point() else v.float()) if isinstance(
                v, lib.Tensor) else v for k, v in target.state_dict().items()}
            target.load_state_dict(d, strict=False, assign=flag)
            return [(k, _norm(lib, v, root)) for k, v in target.state_dict(
                keep_vars=True).items()]
        if what == "load_param_assign":
            d = {k: nn.Parameter(v.clone(), requires_grad=False) if isinstance(
                v, lib.Tensor) and v.is_floating_point() else v
                for k, v in target.state_dict().items()}
            target.load_state_dict(d, strict=False, assign=True)
            return [(k, _norm(lib, v, root)) for k, v in target.state_dict(
                keep_vars=True).items()]
        if what == "parametrize_sd":
            P = nn.utils.parametrize
            lin = _linear(lib, random.Random(vseed))

            class Neg(nn.Module):
                def forward(self, x):
                    return -x

                def right_inverse(self, x):
                    return -x
            P.register_parametrization(lin, "weight", Neg())
            if flag:
                P.register_parametrization(lin, "weight", Neg())
            keys = list(lin.state_dict())
            d = {k: v * 3 for k, v in lin.state_dict().items()}
            lin.load_state_dict(d)
            lin.weight = lib.ones(3, 3)
            out = (keys, _arr(lin.weight), repr(lin), [n for n, _ in lin.named_parameters()])
            P.remove_parametrizations(lin, "weight", leave_parametrized=flag2)
            return out + (list(lin.state_dict()), _arr(lin.weight), repr(lin))
        if what == "fwd_kwargs":
            seen = []
            h1 = target.register_forward_pre_hook(
                lambda mo, a, k: seen.append(("pre", len(a), sorted(k))) or ((), {
                    "input" if not isinstance(mo, Custom) else "x": a[0] * 2}),
                with_kwargs=True)
            h2 = target.register_forward_hook(
                lambda mo, a, k, o: seen.append(("post", len(a), sorted(k))) or o + 1,
                with_kwargs=True)
            try:
                return _norm(lib, target(lib.ones(2, 3)), root), seen
            finally:
                h1.remove()
                h2.remove()
        if what == "always_call_error":
            seen = []

            def bad(mo, a):
                raise ValueError("pre failed")
            h1 = target.register_forward_pre_hook(bad)
            h2 = target.register_forward_hook(
                lambda mo, a, o: seen.append(("always", o)), always_call=True)
            h3 = target.register_forward_hook(lambda mo, a, o: seen.append("never"))
            try:
                target(lib.ones(2, 3))
            finally:
                h1.remove()
                h2.remove()
                h3.remove()
                env["log"].append(seen)
        if what == "bw_two_inputs":
            seen = []

            class Two(nn.Module):
                def forward(self, a, b):
                    return a * b, a + 1
            two = Two()
            two.register_full_backward_pre_hook(
                lambda mo, go: seen.append(("pre", [None if g is None else _arr(g)
                                                    for g in go])))
            two.register_full_backward_hook(
                lambda mo, gi, go: seen.append(("bw", [None if g is None else _arr(g)
                                                       for g in gi])) or
                ((None, gi[1] * 2) if flag else None))
            a = lib.ones(2, requires_grad=True)
            b = lib.full((2,), 3.0, requires_grad=flag2)
            x, y = two(a, b)
            (x.sum() + (y.sum() if flag else 0)).backward()
            return seen, _arr(a.grad), None if b.grad is None else _arr(b.grad)
        if what == "mlist_repr":
            ml = nn.ModuleList([_linear(lib, random.Random(1)) for _ in range(vseed % 4)]
                               + [nn.Identity()] * (vseed % 3)
                               + [_linear(lib, random.Random(1))] * (m % 3))
            seq = nn.Sequential(*[nn.ReLU() for _ in range(m % 4)])
            return repr(ml), repr(nn.Sequential(ml, seq)), repr(ml[1:]), repr(ml + ml)
        if what == "clip_mixed":
            ps = [nn.Parameter(lib.ones(3)), nn.Parameter(lib.ones(2, dtype=lib.float64)),
                  nn.Parameter(lib.ones(2, dtype=lib.float16)), nn.Parameter(lib.ones(1))]
            for i, p in enumerate(ps):
                if (i + vseed) % 4:
                    p.grad = lib.full_like(p, float(i + 1))
            if m % 5 == 0:
                ps[0].grad = lib.tensor([float("inf"), 1.0, 1.0])
            norm_type = [2, 1, "inf", 0.5, -1.0][m % 5]
            norm_type = float(norm_type)
            kw = {"foreach": [None, True, False][vseed % 3],
                  "error_if_nonfinite": flag}
            if flag2:
                total = nn.utils.clip_grad_norm_(ps, 1.5, norm_type=norm_type, **kw)
            else:
                total = nn.utils.clip_grad_norm_(ps[0], 0.5, norm_type, **kw)
            return _norm(lib, total, root), [None if p.grad is None else _arr(p.grad)
                                             for p in ps]
        if what == "clip_value_mixed":
            ps = [nn.Parameter(lib.arange(-3.0, 3.0)), nn.Parameter(lib.ones(2))]
            ps[0].grad = lib.arange(-3.0, 3.0)
            nn.utils.clip_grad_value_(ps if flag else ps[0], 1.5 if flag2 else -1,
                                      foreach=[None, True, False][vseed % 3])
            return _arr(ps[0].grad)
        if what == "parametrize_more":
            P = nn.utils.parametrize
            lin = _linear(lib, random.Random(vseed))

            class Sym(nn.Module):
                def forward(self, x):
                    return x.triu() + x.triu(1).mT
            tname = "bias" if flag else "weight"
            P.register_parametrization(lin, tname, Sym() if not flag else nn.Identity(),
                                       unsafe=flag2)
            out = [repr(lin), list(lin.state_dict()), [n for n, _ in lin.named_parameters()],
                   type(lin).__name__, P.is_parametrized(lin), P.is_parametrized(lin, "bias"),
                   _norm(lib, lin.parametrizations[tname].original, root)]
            with P.cached():
                a = getattr(lin, tname)
                out.append(a is getattr(lin, tname))
            out.append(_norm(lib, lin(lib.ones(2, 3)), root))
            d = copy.deepcopy(lin)
            out.append(repr(d))
            P.remove_parametrizations(lin, tname)
            out.append((type(lin).__name__, repr(lin)))
            try:
                P.remove_parametrizations(lin, tname)
            except Exception as exc:  # noqa: BLE001
                out.append(_err(exc))
            return out
        if what == "call_bare_return":
            seen = []
            h = target.register_forward_pre_hook(lambda mo, a: a[0] + 1)
            h2 = target.register_forward_hook(lambda mo, a, o: seen.append(_arr(a[0])))
            try:
                return _norm(lib, target(lib.ones(2, 3)), root), seen
            finally:
                h.remove()
                h2.remove()
        if what == "zero_grad_graph":
            ps = [p for p in target.parameters() if p.requires_grad]
            for p in ps:
                p.grad = (p.detach() * 2).requires_grad_()
                p.grad = p.grad * 1
            target.zero_grad(set_to_none=False)
            return [(p.grad.requires_grad, p.grad.grad_fn is None, _arr(p.grad)) for p in ps]
        if what == "apply_recurse":
            return _norm(lib, target._apply(lambda t: t * 0 + 1, recurse=False), root)
        if what == "to_empty":
            target.to_empty(device="cpu", recurse=flag)
            with lib.no_grad():
                for t in [*target.parameters(), *target.buffers()]:
                    t.fill_(1)      # (uninitialized memory)
                    if t.grad is not None:
                        t.grad.fill_(1)
            return [(n, tuple(t.shape), str(t.dtype).split(".")[-1])
                    for n, t in target.state_dict().items() if isinstance(t, lib.Tensor)]
        if what == "sd_hooks_prefix":
            seen = []
            hs = []
            for n, x in root.named_modules():
                hs.append(x.register_state_dict_pre_hook(
                    lambda mo, prefix, kv, n=n: seen.append(("pre", n, prefix, kv))))
                hs.append(x.register_state_dict_post_hook(
                    lambda mo, d, prefix, meta, n=n: seen.append(("post", n, prefix,
                                                                  len(d)))))
            try:
                root.state_dict(prefix="top.", keep_vars=flag)
            finally:
                for h in hs:
                    h.remove()
            return seen
        if what == "str_keys":
            return sorted(k for k in root.state_dict(keep_vars=True)
                          if not isinstance(k, str))
        return "skip"
    return f"misc {what} on mods[{m}]", misc
