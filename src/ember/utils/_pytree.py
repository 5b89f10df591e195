"""Pytrees: nested tuples, lists, dicts and named tuples with tensors (or anything) as leaves.

``tree_flatten`` gives the leaves left to right and a ``TreeSpec`` that ``tree_unflatten``
rebuilds the structure from; ``tree_map`` applies a function to every leaf. As in PyTorch,
``None`` is a leaf and dicts keep their insertion order. Other containers become nodes with
``register_pytree_node``.
"""

from collections import OrderedDict, namedtuple

__all__ = ["TreeSpec", "LeafSpec", "tree_flatten", "tree_unflatten", "tree_map", "tree_leaves",
           "tree_structure", "tree_map_only", "tree_all", "tree_any", "register_pytree_node",
           "treespec_pprint"]

# type -> (flatten(node) -> (children, context), unflatten(children, context) -> node)
SUPPORTED_NODES = {}


def register_pytree_node(cls, flatten_fn, unflatten_fn, **_):
    """Make instances of ``cls`` pytree nodes: ``flatten_fn(node) -> (children, context)``,
    ``unflatten_fn(children, context) -> node``."""
    SUPPORTED_NODES[cls] = (flatten_fn, unflatten_fn)


register_pytree_node(tuple, lambda t: (list(t), None), lambda c, _: tuple(c))
register_pytree_node(list, lambda t: (list(t), None), lambda c, _: list(c))
register_pytree_node(dict, lambda d: (list(d.values()), list(d)),
                     lambda c, keys: dict(zip(keys, c)))
register_pytree_node(OrderedDict, lambda d: (list(d.values()), list(d)),
                     lambda c, keys: OrderedDict(zip(keys, c)))


def _is_namedtuple(cls):
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def _node_type(x):
    cls = type(x)
    if cls in SUPPORTED_NODES:
        return cls
    if _is_namedtuple(cls):
        return namedtuple
    return None


def _flatten_node(kind, x):
    if kind is namedtuple:
        return list(x), type(x)
    return SUPPORTED_NODES[kind][0](x)


def _unflatten_node(kind, children, context):
    if kind is namedtuple:
        return context(*children)
    return SUPPORTED_NODES[kind][1](children, context)


class TreeSpec:
    """The structure of a pytree: the node type, its context (dict keys) and child specs."""

    def __init__(self, type, context, children_specs):
        self.type = type
        self.context = context
        self.children_specs = children_specs
        self.num_leaves = sum(c.num_leaves for c in children_specs)

    @property
    def num_children(self):
        return len(self.children_specs)

    def is_leaf(self):
        return self.type is None

    def __eq__(self, other):
        return (isinstance(other, TreeSpec) and self.type is other.type
                and self.context == other.context
                and self.children_specs == other.children_specs)

    def __repr__(self):
        return self._repr(0)

    def _repr(self, indent):
        """As PyTorch writes it: each child after the first on its own line, indented by
        two spaces per level of nesting."""
        if self.is_leaf():
            return "*"
        children = (",\n" + " " * (indent + 2)).join(c._repr(indent + 2)
                                                     for c in self.children_specs)
        return f"TreeSpec({self.type.__name__}, {self.context}, [{children}])"

    def unflatten(self, leaves):
        """Rebuild the pytree from its leaves."""
        return tree_unflatten(leaves, self)


class LeafSpec(TreeSpec):
    """The spec of a single leaf."""

    def __init__(self):
        super().__init__(None, None, [])
        self.num_leaves = 1


_LEAF = LeafSpec()


def tree_flatten(tree, is_leaf=None):
    """The leaves of ``tree`` (left to right) and its ``TreeSpec``."""
    leaves = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _flatten(tree, leaves, is_leaf):
    kind = None if is_leaf is not None and is_leaf(tree) else _node_type(tree)
    if kind is None:
        leaves.append(tree)
        return _LEAF
    children, context = _flatten_node(kind, tree)
    return TreeSpec(kind, context, [_flatten(c, leaves, is_leaf) for c in children])


def tree_unflatten(leaves, treespec):
    """The pytree with structure ``treespec`` holding ``leaves``."""
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but "
                         f"the spec refers to a pytree that holds {treespec.num_leaves} items "
                         f"({treespec}).")
    return _unflatten(iter(leaves), treespec)


def _unflatten(it, spec):
    if spec.is_leaf():
        return next(it)
    children = [_unflatten(it, c) for c in spec.children_specs]
    return _unflatten_node(spec.type, children, spec.context)


def tree_leaves(tree, is_leaf=None):
    """The leaves of ``tree``, left to right."""
    return tree_flatten(tree, is_leaf)[0]


class _Star:
    def __repr__(self):
        return "*"


def treespec_pprint(treespec):
    """``treespec`` written as its pytree with ``*`` for each leaf: ``{'a': *, 'b': (*, *)}``."""
    return repr(tree_unflatten([_Star()] * treespec.num_leaves, treespec))


def tree_structure(tree, is_leaf=None):
    """The ``TreeSpec`` of ``tree``."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """``tree`` with every leaf replaced by ``func(leaf, *matching leaves of rests)``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [tree_leaves(r, is_leaf) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_only(cls, func, tree, is_leaf=None):
    """``tree_map`` applied only to leaves that are instances of ``cls``."""
    return tree_map(lambda x: func(x) if isinstance(x, cls) else x, tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    """Whether ``pred`` holds for every leaf."""
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    """Whether ``pred`` holds for some leaf."""
    return any(map(pred, tree_leaves(tree, is_leaf)))


def broadcast_prefix(prefix, tree, is_leaf=None):
    """The leaves of ``prefix`` repeated to match ``tree``'s leaves, where ``prefix``'s
    structure is a prefix of ``tree``'s (a leaf of ``prefix`` covers a whole subtree);
    None when the structures do not match."""
    out = []
    if not _broadcast(prefix, tree, out, is_leaf):
        return None
    return out


def _broadcast(prefix, tree, out, is_leaf):
    kind = _node_type(prefix)
    if kind is None:
        out.extend([prefix] * tree_structure(tree, is_leaf).num_leaves)
        return True
    if _node_type(tree) is not kind:
        return False
    pc, pctx = _flatten_node(kind, prefix)
    tc, tctx = _flatten_node(kind, tree)
    if len(pc) != len(tc) or pctx != tctx:
        return False
    return all(_broadcast(p, t, out, is_leaf) for p, t in zip(pc, tc))
