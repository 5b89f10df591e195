"""utils._pytree: flatten, unflatten, map over nested containers."""

from collections import OrderedDict, namedtuple

from ember.utils import _pytree as pytree


def test_roundtrip_keeps_structure_and_order():
    Point = namedtuple("Point", "x y")
    tree = {"b": (1, [2, None]), "a": Point(3, OrderedDict(k=4))}
    leaves, spec = pytree.tree_flatten(tree)
    assert leaves == [1, 2, None, 3, 4]
    assert pytree.tree_unflatten(leaves, spec) == tree
    assert pytree.tree_map(lambda v: v if v is None else v * 10, tree)["a"].x == 30


def test_structure_comparison_and_prefix_broadcast():
    assert pytree.tree_structure((1, [2])) == pytree.tree_structure((5, [6]))
    assert pytree.tree_structure((1, [2])) != pytree.tree_structure((1, (2,)))
    assert pytree.broadcast_prefix((0, None), (1, [2, 3])) == [0, None, None]
    assert pytree.broadcast_prefix((0, 1), (1,)) is None
