"""The spec generator for uint16/uint32/uint64 ("barebones" dtypes in PyTorch 2.13).

Each case runs one user-level program on a wide unsigned tensor. ``python -m
tests.parity.unsigned_table_round33`` prints PyTorch's answer for every case and dtype (the
result's values and dtype, or the error's type and message); the parity test
``test_parity_unsigned_round33.py`` asserts ember gives the same answers.
"""

U_DTYPES = ("uint16", "uint32", "uint64")


def _x(t, u):
    return t.tensor([5, 3, 7], dtype=getattr(t, u))


def _y(t, u):
    return t.tensor([2, 3, 1], dtype=getattr(t, u))


def _other_u(t, u):
    return "uint32" if u != "uint32" else "uint16"


# second operands of binary ops: name -> fn(t, u)
SECOND = {
    "same": lambda t, u: _y(t, u),
    "int": lambda t, u: 2,
    "float": lambda t, u: 2.5,
    "bool": lambda t, u: True,
    "0dim_int64": lambda t, u: t.tensor(2),
    "0dim_float": lambda t, u: t.tensor(2.5),
    "int64": lambda t, u: t.tensor([2, 3, 1]),
    "float32": lambda t, u: t.tensor([2.0, 3.0, 1.0]),
    "uint8": lambda t, u: t.tensor([2, 3, 1], dtype=t.uint8),
    "other_u": lambda t, u: t.tensor([2, 3, 1], dtype=getattr(t, _other_u(t, u))),
}

BINARY = {
    "add": lambda t, a, b: t.add(a, b),
    "sub": lambda t, a, b: t.sub(a, b),
    "mul": lambda t, a, b: t.mul(a, b),
    "div": lambda t, a, b: t.div(a, b),
    "div_trunc": lambda t, a, b: t.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda t, a, b: t.div(a, b, rounding_mode="floor"),
    "floordiv": lambda t, a, b: a // b,
    "remainder": lambda t, a, b: a % b,
    "fmod": lambda t, a, b: t.fmod(a, b),
    "pow": lambda t, a, b: a ** b,
    "and": lambda t, a, b: a & b,
    "or": lambda t, a, b: a | b,
    "xor": lambda t, a, b: a ^ b,
    "lshift": lambda t, a, b: a << b,
    "rshift": lambda t, a, b: a >> b,
    "eq": lambda t, a, b: a == b,
    "ne": lambda t, a, b: a != b,
    "lt": lambda t, a, b: a < b,
    "le": lambda t, a, b: a <= b,
    "gt": lambda t, a, b: a > b,
    "ge": lambda t, a, b: a >= b,
    "maximum": lambda t, a, b: t.maximum(a, b),
    "minimum": lambda t, a, b: t.minimum(a, b),
    "radd": lambda t, a, b: b + a,
    "rsub": lambda t, a, b: b - a,
    "iadd": lambda t, a, b: a.clone().add_(b),
    "imul": lambda t, a, b: a.clone().mul_(b),
}

UNARY = {
    "neg": lambda t, x: -x,
    "abs": lambda t, x: x.abs(),
    "invert": lambda t, x: ~x,
    "sign": lambda t, x: x.sign(),
    "sqrt": lambda t, x: x.sqrt(),
    "exp": lambda t, x: x.exp(),
    "square": lambda t, x: x.square(),
    "reciprocal": lambda t, x: x.reciprocal(),
    "ceil": lambda t, x: x.ceil(),
    "floor": lambda t, x: x.floor(),
    "round": lambda t, x: x.round(),
    "trunc": lambda t, x: x.trunc(),
    "isnan": lambda t, x: x.isnan(),
    "isinf": lambda t, x: x.isinf(),
    "isfinite": lambda t, x: x.isfinite(),
    "logical_not": lambda t, x: x.logical_not(),
    "logical_and": lambda t, x: t.logical_and(x, x),
    "clone": lambda t, x: x.clone(),
    "sum": lambda t, x: x.sum(),
    "sum_dim": lambda t, x: x.sum(0),
    "prod": lambda t, x: x.prod(),
    "cumsum": lambda t, x: x.cumsum(0),
    "cumprod": lambda t, x: x.cumprod(0),
    "mean": lambda t, x: x.mean(),
    "mean_f32": lambda t, x: x.mean(dtype=t.float32),
    "std": lambda t, x: x.float().std(),
    "min": lambda t, x: x.min(),
    "max": lambda t, x: x.max(),
    "max_dim": lambda t, x: x.max(0).values,
    "amax": lambda t, x: x.amax(),
    "amin": lambda t, x: x.amin(),
    "aminmax": lambda t, x: t.aminmax(x).min,
    "argmax": lambda t, x: x.argmax(),
    "argmin": lambda t, x: x.argmin(),
    "sort": lambda t, x: x.sort().values,
    "argsort": lambda t, x: x.argsort(),
    "topk": lambda t, x: x.topk(2).values,
    "kthvalue": lambda t, x: x.kthvalue(2).values,
    "median": lambda t, x: x.median(),
    "unique": lambda t, x: t.unique(x),
    "any": lambda t, x: x.any(),
    "all": lambda t, x: x.all(),
    "count_nonzero": lambda t, x: t.count_nonzero(x),
    "nonzero": lambda t, x: x.nonzero(),
    "clamp_int": lambda t, x: x.clamp(2, 6),
    "clamp_min": lambda t, x: x.clamp(min=4),
    "clamp_max": lambda t, x: x.clamp(max=4),
    "clamp_float": lambda t, x: x.clamp(2.5, 6.5),
    "clamp_tensor": lambda t, x: x.clamp(x - x, x),
    "where_xy": lambda t, x: t.where(x > 4, x, x * 0),
    "where_scalar": lambda t, x: t.where(x > 4, x, 0),
    "where_int64": lambda t, x: t.where(x > 4, x, t.tensor([1, 1, 1])),
    "masked_fill": lambda t, x: x.masked_fill(x > 4, 0),
    "masked_select": lambda t, x: x.masked_select(x > 4),
    "gather": lambda t, x: x.gather(0, t.tensor([2, 0])),
    "scatter": lambda t, x: x.scatter(0, t.tensor([2, 0]), x[:2]),
    "scatter_value": lambda t, x: x.scatter(0, t.tensor([2, 0]), 9),
    "scatter_add": lambda t, x: x.scatter_add(0, t.tensor([2, 0]), x[:2]),
    "index_select": lambda t, x: x.index_select(0, t.tensor([2, 0])),
    "index_add": lambda t, x: x.index_add(0, t.tensor([2, 0]), x[:2]),
    "index_copy": lambda t, x: x.index_copy(0, t.tensor([2, 0]), x[:2]),
    "index_fill": lambda t, x: x.index_fill(0, t.tensor([2, 0]), 4),
    "index_put": lambda t, x: x.index_put((t.tensor([2, 0]),), x[:2]),
    "index_put_acc": lambda t, x: x.index_put((t.tensor([2, 0]),), x[:2], accumulate=True),
    "getitem": lambda t, x: x[t.tensor([2, 0])],
    "setitem": lambda t, x: _setitem(x),
    "take": lambda t, x: x.take(t.tensor([2, 0])),
    "cat": lambda t, x: t.cat([x, x]),
    "stack": lambda t, x: t.stack([x, x]),
    "fill_": lambda t, x: x.clone().fill_(4),
    "zero_": lambda t, x: x.clone().zero_(),
    "copy_": lambda t, x: x.clone().copy_(t.tensor([1, 2, 3])),
    "copy_into_f": lambda t, x: t.zeros(3).copy_(x),
    "to_float": lambda t, x: x.to(t.float32),
    "to_int64": lambda t, x: x.to(t.int64),
    "float": lambda t, x: x.float(),
    "type_str": lambda t, x: x.type(),
    "flip": lambda t, x: x.flip(0),
    "roll": lambda t, x: x.roll(1),
    "repeat": lambda t, x: x.repeat(2),
    "tril": lambda t, x: x.reshape(1, 3).expand(3, 3).tril(),
    "diag": lambda t, x: t.diag(x),
    "reshape_t": lambda t, x: x.reshape(3, 1).t().contiguous(),
    "matmul": lambda t, x: x @ x,
    "dot": lambda t, x: t.dot(x, x),
    "bincount": lambda t, x: t.bincount(x),
    "searchsorted": lambda t, x: t.searchsorted(x.sort().values, x),
    "equal": lambda t, x: t.equal(x, x),
    "allclose": lambda t, x: t.allclose(x, x),
    "isclose": lambda t, x: t.isclose(x, x),
    "lerp": lambda t, x: t.lerp(x, x, 0.5),
    "isin": lambda t, x: t.isin(x, x[:1]),
    "full_like": lambda t, x: t.full_like(x, 4),
    "zeros_like": lambda t, x: t.zeros_like(x),
    "arange": lambda t, x: t.arange(3, dtype=x.dtype),
    "item": lambda t, x: x[0].item(),
    "tolist": lambda t, x: x.tolist(),
    "bitwise_not": lambda t, x: t.bitwise_not(x),
    "relu": lambda t, x: t.relu(x),
    "diff": lambda t, x: t.diff(x),
    "cummax": lambda t, x: t.cummax(x, 0).values,
    "logsumexp": lambda t, x: t.logsumexp(x, 0),
    "trace": lambda t, x: t.diag(x).trace(),
    "nansum": lambda t, x: t.nansum(x),
    "msort": lambda t, x: t.msort(x),
    "unique_consecutive": lambda t, x: t.unique_consecutive(x),
    "histc": lambda t, x: t.histc(x, 3),
    "where_mask": lambda t, x: t.where(_mask(t), x, x),
    "where_mask_scalar": lambda t, x: t.where(_mask(t), x, 0),
    "masked_fill_mask": lambda t, x: x.masked_fill(_mask(t), 0),
    "masked_select_mask": lambda t, x: x.masked_select(_mask(t)),
    "setitem_mask": lambda t, x: _setitem_mask(t, x),
    "setitem_index": lambda t, x: _setitem_index(t, x),
    "setitem_basic": lambda t, x: _setitem_basic(x),
    "clamp_tensors": lambda t, x: x.clamp(x, x),
    "clamp_min_tensor": lambda t, x: x.clamp(min=x),
    "cummin": lambda t, x: t.cummin(x, 0).values,
    "mode": lambda t, x: t.mode(x).values,
    "nanmedian": lambda t, x: t.nanmedian(x),
    "max_binary": lambda t, x: t.max(x, x),
    "triu": lambda t, x: x.reshape(1, 3).expand(3, 3).triu(),
    "unique_counts": lambda t, x: t.unique(x, return_counts=True),
    "sum_float": lambda t, x: x.sum(dtype=t.float32),
    "mul_scalar_inplace": lambda t, x: x.clone().mul_(2),
    "bitwise_and_inplace": lambda t, x: x.clone().bitwise_and_(x),
    "signbit": lambda t, x: t.signbit(x),
    "positive": lambda t, x: t.positive(x),
    "frac": lambda t, x: t.frac(x),
    "nan_to_num": lambda t, x: t.nan_to_num(x),
    "mm": lambda t, x: _m(x) @ _m(x),
    "bmm": lambda t, x: t.bmm(_m(x)[None], _m(x)[None]),
    "mv": lambda t, x: _m(x) @ x,
    "min_dim": lambda t, x: x.min(0).values,
    "median_dim": lambda t, x: x.median(0).values,
    "scatter_reduce": lambda t, x: x.scatter_reduce(0, t.tensor([2, 0]), x[:2], "sum"),
    "pow_scalar_base": lambda t, x: 2 ** x,
    "pow_float_exp": lambda t, x: x ** 2.0,
    "rpow_float": lambda t, x: 2.5 ** x,
    "logical_or": lambda t, x: t.logical_or(x, x),
    "logical_xor": lambda t, x: t.logical_xor(x, x),
    "masked_scatter": lambda t, x: x.masked_scatter(_mask(t), x),
    "put_": lambda t, x: x.clone().put_(t.tensor([2, 0]), x[:2]),
    "kron": lambda t, x: t.kron(x, x),
    "outer": lambda t, x: t.outer(x, x),
    "cumsum_u": lambda t, x: t.cumsum(x, 0, dtype=x.dtype),
    "sum_u": lambda t, x: x.sum(dtype=x.dtype),
    "prod_u": lambda t, x: x.prod(dtype=x.dtype),
    "rot90": lambda t, x: _m(x).rot90(),
    "diagonal": lambda t, x: _m(x).diagonal(),
    "diag_embed": lambda t, x: t.diag_embed(x),
    "tensordot": lambda t, x: t.tensordot(_m(x), _m(x), 1),
    "einsum": lambda t, x: t.einsum("i,i->", x, x),
    "sgn": lambda t, x: x.sgn(),
    "argwhere": lambda t, x: t.argwhere(x),
    "heaviside": lambda t, x: t.heaviside(x, x),
    "gcd": lambda t, x: t.gcd(x, x),
    "lcm": lambda t, x: t.lcm(x, x),
    "copysign": lambda t, x: t.copysign(x, x),
    "hypot": lambda t, x: t.hypot(x, x),
    "lshift_scalar_self": lambda t, x: 1 << x,
    "fmax": lambda t, x: t.fmax(x, x),
    "fmin": lambda t, x: t.fmin(x, x),
    "clamp_max_tensor": lambda t, x: x.clamp(max=x),
    "clip": lambda t, x: x.clip(1, 4),
    "clamp_min_fn": lambda t, x: t.clamp_min(x, 2),
    "clamp_max_fn": lambda t, x: t.clamp_max(x, 2),
    "clamp_min_fn_tensor": lambda t, x: t.clamp_min(x, x),
    "clamp_": lambda t, x: x.clone().clamp_(1, 4),
    "relu_": lambda t, x: x.clone().relu_(),
    "where_bool_self": lambda t, x: t.where(x.bool(), x, x),
    "bool": lambda t, x: x.bool(),
    "var": lambda t, x: x.var(),
    "norm": lambda t, x: x.norm(),
    "div_trunc_float_tensor": lambda t, x: t.div(x, t.tensor([1.0, 2.0, 3.0]),
                                                 rounding_mode="trunc"),
    "floordiv_float": lambda t, x: x // 2.5,
    "repeat_interleave": lambda t, x: x.repeat_interleave(2),
    "index_2d": lambda t, x: _m(x)[t.tensor([2, 0]), t.tensor([2, 0])],
    "bucketize": lambda t, x: t.bucketize(x, x.sort().values),
    "softmax": lambda t, x: t.softmax(x, 0),
    "pad": lambda t, x: t.nn.functional.pad(x, (1, 1)),
    "cross": lambda t, x: t.linalg.cross(x, x),
    # (review) an index's dtype is checked before the kernel; flips of size-1 dims; composites
    "gather_u_index": lambda t, x: x.gather(0, _i(t, x)),
    "scatter_u_index": lambda t, x: x.scatter(0, _i(t, x), x[:2]),
    "index_select_u_index": lambda t, x: x.index_select(0, _i(t, x)),
    "index_select_int32": lambda t, x: x.index_select(0, _i(t, x).int()),
    "index_fill_int32": lambda t, x: x.index_fill(0, _i(t, x).int(), 1),
    "take_u_index": lambda t, x: x.take(_i(t, x)),
    "take_empty": lambda t, x: x.take(t.tensor([], dtype=t.int64)),
    "flip_size1_dim": lambda t, x: x.reshape(1, 3).flip(0),
    "flip_dims": lambda t, x: x.reshape(1, 3).flip(0, 1),
    "flip_empty": lambda t, x: x[:0].reshape(0, 3).flip(1),
    "flip_0d": lambda t, x: x[0].flip(0),
    "count_nonzero_dim": lambda t, x: t.count_nonzero(_m(x), dim=1),
    "count_nonzero_dims": lambda t, x: t.count_nonzero(_m(x), dim=(0, 1)),
    "trapezoid": lambda t, x: t.trapezoid(x),
    "trapezoid_empty": lambda t, x: t.trapezoid(x[:0]),
    "cumulative_trapezoid": lambda t, x: t.cumulative_trapezoid(x),
    "multi_dot": lambda t, x: t.linalg.multi_dot([_m(x), _m(x), _m(x)]),
    "chain_matmul": lambda t, x: t.chain_matmul(_m(x), _m(x)),
    "chain_matmul_one": lambda t, x: t.chain_matmul(_m(x)),
    "conv1d": lambda t, x: t.nn.functional.conv1d(x.reshape(1, 1, 3), x[:2].reshape(1, 1, 2)),
    "conv2d": lambda t, x: t.nn.functional.conv2d(_m(x)[None, None], _m(x)[None, None]),
    "conv_transpose1d": lambda t, x: t.nn.functional.conv_transpose1d(x.reshape(1, 1, 3),
                                                                       x[:2].reshape(1, 1, 2)),
    "conv_tbc": lambda t, x: t.conv_tbc(x.reshape(3, 1, 1), x[:2].reshape(2, 1, 1), x[:1]),
    "lu_unpack": lambda t, x: t.lu_unpack(_m(x), t.tensor([1, 2, 3], dtype=t.int32)),
    "matrix_power_0": lambda t, x: t.linalg.matrix_power(_m(x), 0),
    "matrix_power_1": lambda t, x: t.linalg.matrix_power(_m(x), 1),
    "matrix_power_2": lambda t, x: t.linalg.matrix_power(_m(x), 2),
    "matrix_power_3_batched": lambda t, x: t.matrix_power(_m(x)[None], 3),
    "pad_reflect": lambda t, x: t.nn.functional.pad(x[None], (1, 1), mode="reflect"),
    "pad_replicate": lambda t, x: t.nn.functional.pad(_m(x)[None], (1, 1, 1, 1),
                                                      mode="replicate"),
    "pad_circular": lambda t, x: t.nn.functional.pad(x[None, None], (1, 1), mode="circular"),
    "max_pool1d_indices": lambda t, x: t.nn.functional.max_pool1d(x[None], 2,
                                                                  return_indices=True),
    "max_pool2d_indices": lambda t, x: t.nn.functional.max_pool2d(_m(x)[None], 2,
                                                                  return_indices=True),
    "hash_tensor": lambda t, x: t.hash_tensor(x),
    "hash_tensor_dim": lambda t, x: t.hash_tensor(_m(x), dim=1),
    "hardtanh": lambda t, x: t.nn.functional.hardtanh(x),
    "hardtanh_positive": lambda t, x: t.nn.functional.hardtanh(x, 0.0, 4.0),
    "relu6": lambda t, x: t.nn.functional.relu6(x),
    # (review) argument errors come before the kernel's refusal; checks of values after it
    "mm_shapes": lambda t, x: t.mm(x[None], x[None]),
    "mm_mixed_dtype": lambda t, x: t.mm(_m(x), _m(x).float()),
    "matmul_shapes": lambda t, x: x[None] @ x[None],
    "conv1d_channels": lambda t, x: t.nn.functional.conv1d(x.reshape(1, 3, 1),
                                                           x[:2].reshape(2, 1, 1)),
    "tril_1d": lambda t, x: x.tril(),
    "tril_1d_inplace": lambda t, x: x.clone().tril_(),
    "masked_fill_long_mask": lambda t, x: x.masked_fill(t.tensor([1, 0, 1]), 0),
    "multi_dot_one": lambda t, x: t.linalg.multi_dot([_m(x)]),
    "gather_out_of_range": lambda t, x: x.gather(0, t.tensor([7])),
    "take_out_of_range": lambda t, x: x.take(t.tensor([7])),
}


def _i(t, x):
    return t.tensor([2, 0], dtype=x.dtype)


def _m(x):
    return x.reshape(3, 1).expand(3, 3).contiguous()


def _mask(t):
    return t.tensor([True, False, True])


def _setitem_mask(t, x):
    y = x.clone()
    y[_mask(t)] = 1
    return y


def _setitem_basic(x):
    y = x.clone()
    y[0:2] = 1
    y[2] = 4
    y[None, 1:] = x[:2]
    return y


def _setitem_index(t, x):
    y = x.clone()
    y[t.tensor([0, 2])] = 1
    return y


def _setitem(x):
    y = x.clone()
    y[y > 4] = 1
    return y


def cases():
    """{case name: fn(t) -> result} for every case and unsigned dtype."""
    out = {}
    for u in U_DTYPES:
        for op, f in BINARY.items():
            for k, s in SECOND.items():
                out[f"{u}:{op}:{k}"] = (lambda t, f=f, s=s, u=u: f(t, _x(t, u), s(t, u)))
        for op, f in UNARY.items():
            out[f"{u}:{op}"] = (lambda t, f=f, u=u: f(t, _x(t, u)))
    return out


def describe(result):
    """A comparable description: (values, dtype name) of a tensor, else its text."""
    if hasattr(result, "stride"):
        return result.tolist(), str(result.dtype).split(".")[-1]
    if isinstance(result, tuple):
        return tuple(describe(r) for r in result)
    return repr(result).replace("torch.", "ember.")


def answer(lib, fn):
    """``describe(fn(lib))``, or (error type name, first line of its message)."""
    try:
        return describe(fn(lib))
    except Exception as error:      # noqa: BLE001 (every error is part of the table)
        return type(error).__name__, str(error).split("\n")[0]


def main():
    """Print PyTorch's answer for every case (the table)."""
    import torch
    for name, fn in cases().items():
        print(f"{name:36s} {answer(torch, fn)}")


if __name__ == "__main__":
    main()
