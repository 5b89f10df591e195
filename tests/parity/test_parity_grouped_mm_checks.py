"""F.grouped_mm's argument checks against torch's: dtypes, ranks, layouts, offsets, bias and
out_dtype, each refused with torch's message (and in its order)."""

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _call(lib, shapes, dtype="float32", offs=(2, 4), offs_dtype="int32", **kwargs):
    mats = [lib.ones(s, dtype=getattr(lib, dtype)) for s in shapes]
    if offs is not None:
        offs = lib.tensor(offs, dtype=getattr(lib, offs_dtype))
    if kwargs.get("bias") is not None:
        kwargs["bias"] = lib.ones(kwargs["bias"])
    if kwargs.get("out_dtype") is not None:
        kwargs["out_dtype"] = getattr(lib, kwargs["out_dtype"])
    try:
        out = lib.nn.functional.grouped_mm(*mats, offs=offs, **kwargs)
    except RuntimeError as error:
        return str(error)
    return tuple(out.shape), str(out.dtype).split(".")[-1], out.sum().item()


CASES = [
    ({"bias": (2, 16)}), ({"out_dtype": "float32", "dtype": "bfloat16"}),
    ({"out_dtype": "float64"}), ({"dtype": "float64"}), ({"offs_dtype": "int64"}),
    ({"offs": ((2, 4),)}), ({"offs": (4,)}), ({"shapes": ((4, 7), (2, 7, 16))}),
    ({"shapes": ((4, 8), (2, 8, 15))}), ({"shapes": ((4, 8), (2, 6, 16))}),
    ({"shapes": ((8,), (2, 8, 16))}), ({"shapes": ((2, 4, 8), (3, 8, 16)), "offs": None}),
    ({"shapes": ((2, 4, 8), (2, 8, 16))}), ({"shapes": ((4, 8), (8, 16)), "offs": None}),
    ({"dtype": "bfloat16"}), ({"out_dtype": "float32"}),
    ({"bias": (2, 16), "offs_dtype": "int64"}), ({"bias": (2, 16), "out_dtype": "float64"}),
]


@pytest.mark.parametrize("case", CASES)
def test_grouped_mm_checks_as_torch(case):
    case = dict(case)
    shapes = case.pop("shapes", ((4, 8), (2, 8, 16)))
    assert _call(ember, shapes, **case) == _call(torch, shapes, **case)
