"""nn.modules.utils: the int-or-tuple parsers custom layers import, and stripping a prefix
(``module.``) from a state dict and its metadata."""

import collections
import importlib.util

import pytest

import ember
from ember.nn.modules.utils import (_list_with_default, _ntuple, _pair, _quadruple,
                                    _reverse_repeat_tuple, _single, _triple,
                                    consume_prefix_in_state_dict_if_present)


def test_tuple_parsers():
    assert (_pair(3), _pair((1, 2)), _triple([1, 2, 3]), _single(4)) == \
        ((3, 3), (1, 2), (1, 2, 3), (4,))
    assert _quadruple(0) == (0, 0, 0, 0) and _ntuple(2)("ab") == ("a", "b")
    assert _pair.__name__ == "_pair" and _ntuple(2, "x").__name__ == "x"
    assert _reverse_repeat_tuple((1, 2), 2) == (2, 2, 1, 1)
    assert _list_with_default([None, 3], (5, 6, 7, 8)) == [7, 3]
    with pytest.raises(ValueError, match="Input dimension should be at least 3"):
        _list_with_default([None, 3], (5,))


def test_consume_prefix_renames_keys_and_metadata():
    sd = collections.OrderedDict([("module.a", 1), ("module.b.c", 2), ("x", 3)])
    sd._metadata = collections.OrderedDict([("module", {"version": 1}),
                                            ("module.b", {"version": 1}), ("", {})])
    consume_prefix_in_state_dict_if_present(sd, "module.")
    assert list(sd.items()) == [("x", 3), ("a", 1), ("b.c", 2)]
    assert dict(sd._metadata) == {"": {"version": 1}, "b": {"version": 1}}


def test_modules_package_binds_utils():
    """``torch.nn.modules.utils._pair`` is reached as an attribute, without an import of
    its own (a fresh run of the package's __init__, as the import in this file binds it)."""
    path = ember.nn.modules.__file__
    spec = importlib.util.spec_from_file_location("ember.nn.modules", path)
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    assert fresh.utils is ember.nn.modules.utils and fresh.utils._pair(2) == (2, 2)
    assert "utils" not in fresh.__all__
