"""Argument TypeErrors for arguments passed by keyword (see NOTE [Keyword arguments in
TypeErrors] in ember/ops/_call_site.py): no position, keywords named in "invalid
combination" (the messages were taken from PyTorch 2.13), and the positional wording where
the call cannot be read."""

import pytest

import ember

KEYWORDS = {"dim": "a"}          # read back from the variable by the error path
_RIC = "() received an invalid combination of arguments - got "


def _message(call):
    x = ember.arange(16.).reshape(4, 4)
    with pytest.raises(TypeError) as info:
        call(x)
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize("call, message", [
    (lambda x: x.cumsum(dim="a"), "cumsum(): argument 'dim' must be int, not str"),
    (lambda x: ember.cumsum(x, axis="a"), "cumsum(): argument 'dim' must be int, not str"),
    (lambda x: x.tril_(diagonal=1.5), "tril_(): argument 'diagonal' must be int, not float"),
    (lambda x: x.permute(dims=("a", 0)),
     "permute(): argument 'dims' must be tuple of ints, not tuple"),
    (lambda x: x.sum(dim=["a"], keepdim=True),
     "sum(): argument 'dim' must be tuple of ints, not list"),
    (lambda x: x.nansum(dim="a"), "nansum(): argument 'dim' must be tuple of ints, not str"),
    (lambda x: x.rot90(k="a"), "rot90(): argument 'k' must be int, not str"),
    (lambda x: x.diagflat(offset="a"), "diagflat(): argument 'offset' must be int, not str"),
    (lambda x: x.median(dim="a"), "median(): argument 'dim' must be int, not str"),
    (lambda x: ember.cat([x, x], dim="a"), "cat(): argument 'dim' must be int, not str"),
    (lambda x: ember.Tensor.cumsum(x, dim="a"), "cumsum(): argument 'dim' must be int, not str"),
])
def test_keyword_argument_is_named_without_position(call, message):
    assert _message(call) == message


@pytest.mark.parametrize("call, got", [
    (lambda x: ember.sum(x, dim="a"), "(Tensor, dim=str)"),
    (lambda x: x.sum(dim="a"), "(dim=str, )"),
    (lambda x: ember.sum(input=x, dim="a"), "(dim=str, input=Tensor, )"),
    (lambda x: x.narrow(0, 0, length="a"), "(int, int, length=str)"),
    (lambda x: ember.narrow(x, dim=0, start="a", length=1),
     "(Tensor, length=int, start=str, dim=int)"),
    (lambda x: x.movedim(source="a", destination=0), "(destination=int, source=str, )"),
    (lambda x: x.max(dim="a"), "(dim=str, )"),
    (lambda x: ember.max(x, dim="a"), "(Tensor, dim=str)"),
    (lambda x: x.sum(axis=1.5), "(axis=float, )"),
    (lambda x: ember.Tensor.sum(x, dim="a"), "(dim=str, )"),
])
def test_invalid_combination_lists_keywords_by_name(call, got):
    message = _message(call)
    assert _RIC + got + ", but expected one of:" in message


@pytest.mark.parametrize("call, message", [
    (lambda x: x.rot90("a"), "rot90(): argument 'k' (position 1) must be int, not str"),
    (lambda x: ember.rot90(x, "a"), "rot90(): argument 'k' (position 2) must be int, not str"),
    (lambda x: x.rot90(1, "a"),
     "rot90(): argument 'dims' (position 2) must be tuple of ints, not str"),
    (lambda x: x.diagflat("a"), "diagflat(): argument 'offset' (position 1) must be int, not str"),
    (lambda x: x.max("a", True), "max(): argument 'dim' (position 1) must be int, not str"),
    (lambda x: x.max("a"), "max" + _RIC + "(str), but expected one of:"),
    (lambda x: x.mode("a"), "mode(): argument 'dim' (position 1) must be int, not str"),
    (lambda x: ember.amax(x, "a"),
     "amax(): argument 'dim' (position 2) must be tuple of ints, not str"),
    (lambda x: x.sum("a", True),
     "sum(): argument 'dim' (position 1) must be tuple of ints, not str"),
    # PyTorch's Python methods pass keywords on by position
    (lambda x: x.unflatten(dim="a", sizes=(2, 2)),
     "unflatten(): argument 'dim' (position 1) must be int, not str"),
    (lambda x: ember.nn.functional.softmax(x, dim="a"),
     "softmax(): argument 'dim' (position 1) must be int, not str"),
    # f(**kwargs): the keywords are read back from the instructions that built the mapping
    (lambda x: x.cumsum(**{"dim": "a"}),
     "cumsum(): argument 'dim' must be int, not str"),
    (lambda x: ember.cumsum(*[x], **KEYWORDS),
     "cumsum(): argument 'dim' must be int, not str"),
    # ... or not, where they are not simple: the positional wording stays
    (lambda x: x.cumsum(**({"dim": "a"} if x.ndim else {})),
     "cumsum(): argument 'dim' (position 1) must be int, not str"),
])
def test_method_forms_and_positional_wording(call, message):
    assert _message(call) == message


def test_valid_calls_are_unaffected():
    x = ember.arange(16.).reshape(4, 4)
    assert x.max(dim=1).values.tolist() == [3., 7., 11., 15.]
    assert x.rot90(k=1, dims=[0, 1])[0].tolist() == [3., 7., 11., 15.]
    assert ember.diagflat(ember.tensor([1, 2]), offset=1).tolist() == [[0, 1, 0], [0, 0, 2],
                                                                        [0, 0, 0]]
    assert x.nansum(dim=(0, True)).item() == 120.


def test_calls_through_functools_partial_keep_the_positional_wording():
    import functools
    x = ember.ones(2, 3)
    for call in (lambda: functools.partial(ember.sum, x, "a")(keepdim=True),
                 lambda: functools.partial(ember.sum, x)("a", keepdim=True)):
        with pytest.raises(TypeError, match=r"^sum\(\): argument 'dim' \(position 2\) must be "
                                            r"tuple of ints, not str$"):
            call()
