"""ember.__version__ is a TorchVersion: a str that compares as a version number."""

import builtins

import pytest

import ember
from ember.torch_version import TorchVersion


def test_version_is_a_torch_version_string():
    assert isinstance(ember.__version__, TorchVersion) and isinstance(ember.__version__, str)
    assert ember.__version__ == "0.1.0" and ember.version.__version__ == ember.__version__
    assert hash(ember.__version__) == hash("0.1.0") and ember.__version__ in {"0.1.0"}


@pytest.fixture(params=["packaging", "fallback"])
def parser(request, monkeypatch):
    if request.param == "fallback":
        real_import = builtins.__import__

        def no_packaging(name, *args, **kwargs):
            if name.startswith("packaging"):
                raise ImportError(name)
            return real_import(name, *args, **kwargs)
        monkeypatch.setattr(builtins, "__import__", no_packaging)
    else:
        pytest.importorskip("packaging")
    return request.param


def test_compares_as_a_version_with_strings_tuples_and_lists(parser):
    v = TorchVersion("2.13.0+cpu")
    assert v >= "2.0" and v > "2.9" and v < "3" and v <= "2.13.0+cpu"   # "2.9" < "2.13"
    assert v > (1, 13) and v >= (2, 13) and v < [2, 14] and not v < (2, 13)
    assert TorchVersion("2.0") == "2.0.0" and TorchVersion("0.1.0") >= (0, 1)


def test_non_versions_compare_as_strings_or_not_at_all(parser):
    v = TorchVersion("2.13.0")
    assert v != "abc" and not v >= "abc" and v < "abc"      # plain string order
    assert v != 3 and v != None                             # noqa: E711
    for other in (3, None, (2, 13, 0, "x")):
        with pytest.raises(TypeError, match="not supported between instances of "
                                            "'TorchVersion'"):
            v >= other
