"""What the architecture programs of round 25 (test_parity_programs_round25_architectures.py)
found, each pinned against PyTorch: add / sub / mul / div / floor_divide (and their aliases)
take a number as their input when the other operand is a number too (HF Longformer computes
``torch.div(seq_len, w, rounding_mode="trunc")`` on Python ints), and ``where`` saves only its
condition for backward, so its values may be written in place afterwards (Longformer masks the
corners of its band scores with ``t[...] = full_like(...).where(mask, t[...])``); likewise
masked_fill, masked_scatter, scatter, scatter_add, index_fill, lerp, addcmul and max / min
along a dim save only the inputs their gradients read. repeat_interleave records PyTorch's
composition (views, clone, expand; index_select for a tensor of repeats), which has no node
of its own. A TransformerEncoder that packs padded batches into nested tensors (eval, no
gradient) gives PyTorch's once-per-process warning that nested tensors are a prototype."""

import pytest

import ember
from tests.parity._compare import assert_same, dtype_name, first_line
from tests.parity._programs import warnings_of

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _described(t):
    return dtype_name(t.dtype), list(t.shape), t.tolist()


NUMBER_CALLS = [
    ("div", (12, 5), {"rounding_mode": "trunc"}),
    ("div", (-7, 2), {"rounding_mode": "floor"}),
    ("div", (-7, 2), {"rounding_mode": "trunc"}),
    ("div", (7, 2), {}),
    ("div", (7.5, 2), {"rounding_mode": "floor"}),
    ("div", (True, 2), {"rounding_mode": "trunc"}),
    ("div", (1, 2j), {}),
    ("div", (2 ** 40, 3), {"rounding_mode": "trunc"}),
    ("divide", (7, 2), {}),
    ("true_divide", (True, True), {}),
    ("add", (1, 2), {}),
    ("add", (1, 2), {"alpha": 3}),
    ("add", (True, True), {}),
    ("add", (1, 2.5), {}),
    ("sub", (1.5, 2), {}),
    ("subtract", (2, 3), {"alpha": 2}),
    ("mul", (2, 3.5), {}),
    ("mul", (True, False), {}),
    ("multiply", (2, 3), {}),
    ("floor_divide", (7, 2), {}),
    ("floor_divide", (7.5, -2), {}),
]


@pytest.mark.parametrize("name,args,kwargs", NUMBER_CALLS,
                         ids=[f"{n}{a}{sorted(k.items())}" for n, a, k in NUMBER_CALLS])
def test_arithmetic_takes_two_numbers_like_torch(name, args, kwargs):
    assert_same(lambda lib: _described(getattr(lib, name)(*args, **kwargs)))


def test_two_numbers_write_out_like_torch():
    def call(lib):
        out = lib.empty(())
        ret = lib.div(7, 2, out=out)
        return ret is out, _described(out)
    assert_same(call)


@pytest.mark.parametrize("name", ["maximum", "remainder", "atan2", "pow", "fmod", "eq",
                                  "bitwise_and", "hypot"])
def test_other_ops_still_refuse_two_numbers(name):
    answer = assert_same(lambda lib: getattr(lib, name)(3, 2), message=first_line)
    assert answer[0] == "TypeError"


def test_bad_rounding_mode_with_two_numbers_raises_like_torch():
    answer = assert_same(lambda lib: lib.div(12, 6, rounding_mode="bad"))
    assert answer[0] == "RuntimeError"


@pytest.mark.parametrize("changed", ["input", "other", "both"])
def test_where_values_may_change_in_place_before_backward(changed):
    def run(lib):
        base = lib.tensor([1.0, -2.0, 3.0, -4.0], requires_grad=True)
        x, y = base * 2, base * 3
        cond = lib.tensor([True, False, False, True])
        out = lib.where(cond, x, y)
        if changed in ("input", "both"):
            x.mul_(10)
        if changed in ("other", "both"):
            y.add_(1)
        (out * lib.arange(4.0)).sum().backward()
        return out.tolist(), base.grad.tolist(), type(out.grad_fn).__name__
    assert_same(run)


def test_where_condition_changed_in_place_fails_backward_like_torch():
    def run(lib):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        cond = x.detach() > 0
        out = lib.where(cond, x * 2, 0.0)
        cond.logical_not_()
        out.sum().backward()
        return x.grad.tolist()
    answer = assert_same(run, message=lambda m: m.split("[")[0])
    assert answer[0] == "RuntimeError"


def test_band_corners_masked_in_place_through_where_like_torch():
    def run(lib):
        q = lib.linspace(-1.0, 1.0, 24).reshape(2, 3, 4).requires_grad_()
        scores = q * 1.5
        corner = scores[:, :2, :3]
        mask = lib.ones(2, 3).tril().flip(dims=[0]).bool()
        scores[:, :2, :3] = lib.full_like(corner, -float("inf")).where(mask, corner)
        probs = scores.softmax(dim=-1)
        (probs * lib.arange(4.0)).sum().backward()
        return [round(v, 5) for v in probs.flatten().tolist()], \
            [round(v, 5) for v in q.grad.flatten().tolist()]
    assert_same(run)


def test_where_with_numbers_still_differentiates():
    def run(lib):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        out = lib.where(x > 0, x, 0.5) + lib.where(x < 0, -1.0, x * x)
        out.sum().backward()
        return out.tolist(), x.grad.tolist()
    assert_same(run)


def _encoder(lib):
    layer = lib.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = lib.nn.TransformerEncoder(layer, 2)
    with lib.no_grad():
        for p in enc.parameters():
            p.copy_(lib.linspace(-0.5, 0.5, p.numel()).reshape(p.shape))
    return enc


@pytest.mark.parametrize("case", ["packed", "train", "grad", "no_mask", "left_padded",
                                  "src_mask"])
def test_encoder_packing_warns_like_torch(case):
    def program(lib):
        enc = _encoder(lib).eval()
        x = lib.linspace(-1, 1, 2 * 4 * 8).reshape(2, 4, 8)
        pad = lib.tensor([[False, False, True, True], [False, False, False, False]])
        kwargs = {"src_key_padding_mask": pad}
        if case == "train":
            enc.train()
        elif case == "no_mask":
            kwargs = {}
        elif case == "left_padded":
            kwargs = {"src_key_padding_mask": pad.flip(-1)}
        elif case == "src_mask":
            kwargs["mask"] = lib.zeros(4, 4)
        if case == "grad":
            return enc(x, **kwargs)
        with lib.no_grad():
            enc(x, **kwargs)
            return enc(x, **kwargs)
    assert warnings_of(program, ember) == warnings_of(program, torch)
    packs = case == "packed"
    assert any("nested tensors" in m for _, m in warnings_of(program, ember)) == packs


# Ops whose gradients read only some of their inputs: PyTorch saves just those, so changing
# another input in place before backward is fine; changing a saved one still fails.
SAVES_SOME = {
    "masked_fill": lambda lib, x, o: x.masked_fill(o["mask"], 0.5),
    "masked_fill_tensor": lambda lib, x, o: x.masked_fill(o["mask"], o["w0"]),
    "masked_fill_value": lambda lib, x, o: o["y"].masked_fill(o["mask"], x[0]),
    "masked_scatter": lambda lib, x, o: o["y"].masked_scatter(o["mask"], x),
    "masked_scatter_self": lambda lib, x, o: x.masked_scatter(o["mask"], o["y"]),
    "scatter": lambda lib, x, o: o["y"].scatter(0, o["index"], x),
    "scatter_self": lambda lib, x, o: x.scatter(0, o["index"], o["y"]),
    "scatter_value": lambda lib, x, o: x.scatter(0, o["index"], 2.0),
    "scatter_add": lambda lib, x, o: o["y"].scatter_add(0, o["index"], x),
    "index_fill": lambda lib, x, o: x.index_fill(0, o["index"], -1.0),
    "index_fill_tensor": lambda lib, x, o: o["y"].index_fill(0, o["index"], x[1]),
    "lerp_number": lambda lib, x, o: lib.lerp(x, o["y"], 0.3),
    "lerp_end": lambda lib, x, o: lib.lerp(o["y"], x, 0.3),
    "lerp_tensor_weight": lambda lib, x, o: lib.lerp(x, o["y"], o["w"]),
    "lerp_weight": lambda lib, x, o: lib.lerp(o["y"], o["z"], x),
    "addcmul_self": lambda lib, x, o: lib.addcmul(x, o["y"], o["z"], value=2),
    "addcmul_factor": lambda lib, x, o: lib.addcmul(o["z"], x, o["y"]),
    "addcmul_both": lambda lib, x, o: lib.addcmul(o["z"], x, x),
    "where_input": lambda lib, x, o: lib.where(o["mask"], x, o["y"]),
    "max_dim": lambda lib, x, o: x.reshape(2, 2).max(dim=1).values,
    "min_dim": lambda lib, x, o: lib.min(x.reshape(2, 2), 0, keepdim=True)[0],
    "repeat_interleave": lambda lib, x, o: x.repeat_interleave(2),
    "repeat_interleave_dim": lambda lib, x, o: x.reshape(2, 2).repeat_interleave(
        lib.tensor([1, 3]), dim=1),
}


def _operands(lib):
    base = lib.tensor([0.5, -1.0, 2.0, -0.3], requires_grad=True)
    return base, {"mask": lib.tensor([True, False, True, False]),
                  "index": lib.tensor([3, 1, 0, 2]),
                  "y": lib.tensor([1.5, 2.0, -0.5, 0.25], requires_grad=True) * 1,
                  "z": lib.tensor([-2.0, 0.5, 1.0, 3.0], requires_grad=True) * 1,
                  "w": lib.tensor([0.1, 0.6, 0.3, 0.9]), "w0": lib.tensor(4.0)}


@pytest.mark.parametrize("changed", ["x", "y", "z", "mask", "index", "w"])
@pytest.mark.parametrize("name", sorted(SAVES_SOME))
def test_inputs_changed_in_place_after_a_call_backpropagate_like_torch(name, changed):
    def run(lib):
        base, others = _operands(lib)
        x = base * 1
        out = SAVES_SOME[name](lib, x, others)
        if changed == "x":
            x.mul_(3)
        elif changed in ("mask", "index"):
            others[changed].copy_(others[changed].flip(0))
        else:
            others[changed].add_(1)
        (out * lib.arange(1.0, 1.0 + out.numel()).reshape(out.shape)).sum().backward()
        return [round(v, 5) for v in base.grad.tolist()], type(out.grad_fn).__name__
    assert_same(run, message=lambda m: m.split("[")[0])


def _graph(fn):
    """The names of a graph's nodes, depth first (leaves' AccumulateGrad left out)."""
    names = []

    def walk(node, depth):
        if node is None or type(node).__name__ == "AccumulateGrad":
            return
        names.append("  " * depth + type(node).__name__)
        for nxt, _ in node.next_functions:
            walk(nxt, depth + 1)
    walk(fn, 0)
    return names


@pytest.mark.parametrize("call", [
    lambda lib, x: x.repeat_interleave(2),
    lambda lib, x: x.repeat_interleave(3, dim=0),
    lambda lib, x: lib.repeat_interleave(x, 2, dim=-1, output_size=6),
    lambda lib, x: x.repeat_interleave(0, dim=1),
    lambda lib, x: x.repeat_interleave(lib.tensor(2)),
    lambda lib, x: x.repeat_interleave(lib.tensor([1, 2]), dim=0),
    lambda lib, x: x.repeat_interleave(lib.tensor([2], dtype=lib.int32), dim=1),
    lambda lib, x: x.repeat_interleave(lib.tensor([0, 1, 2, 0, 1, 2])),
    lambda lib, x: x[0].repeat_interleave(2),
    lambda lib, x: x.t().repeat_interleave(2, dim=1),
    lambda lib, x: x.t().unsqueeze(0).transpose(0, 1).repeat_interleave(2, dim=1),
    lambda lib, x: x.t().repeat_interleave(lib.tensor([1, 2]), dim=1),
], ids=["int", "int_dim", "output_size", "zero", "tensor_0d", "tensor_dim", "int32_one",
        "tensor_flat", "vector", "transposed", "transposed_3d", "transposed_tensor"])
def test_repeat_interleave_records_torchs_composition(call):
    def run(lib):
        x = lib.arange(6.0).reshape(2, 3).requires_grad_()
        y = call(lib, x)
        (y * lib.arange(float(y.numel())).reshape(y.shape)).sum().backward()
        return _graph(y.grad_fn), y.tolist(), x.grad.tolist(), y.stride()
    assert_same(run)
