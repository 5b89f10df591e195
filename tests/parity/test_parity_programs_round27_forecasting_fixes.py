"""What the forecasting programs of round 27 (test_parity_programs_round27_forecasting.py and its
_models and _freq siblings) found, each pinned against PyTorch: casting a module to a complex
dtype (FITS's ``nn.Linear(...).to(torch.cfloat)``) warns with PyTorch's whole message, the
request to file an issue included."""

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _module_to_warnings(lib, *args, **kwargs):
    """The (category, message) pairs ``nn.Linear(2, 3).to(*args, **kwargs)`` warns with."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib.nn.Linear(2, 3).to(*args, **kwargs)
    return [(w.category.__name__, str(w.message)) for w in caught]


@pytest.mark.parametrize("how", ["cfloat", "cdouble", "double", "kw_cfloat", "device_cfloat"])
def test_complex_module_warning_like_torch(how):
    def call(lib):
        if how == "kw_cfloat":
            return _module_to_warnings(lib, dtype=lib.cfloat)
        if how == "device_cfloat":
            return _module_to_warnings(lib, "cpu", lib.cfloat)
        return _module_to_warnings(lib, getattr(lib, how))
    ours, theirs = call(ember), call(torch)
    assert ours == theirs
    assert bool(theirs) == ("cfloat" in how or how == "cdouble")


def test_complex_module_warning_points_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ember.nn.Linear(2, 3).to(ember.cfloat)
    assert [w.filename for w in caught] == [__file__]
