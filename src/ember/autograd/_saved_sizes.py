"""``grad_fn._saved_self_sym_sizes``: the input's size a PyTorch node keeps (as ints) where its
derivative needs only that, on the nodes whose op's first input is PyTorch's ``self``."""

# node name -> the ops whose node of that name has PyTorch's ``self`` as its first input (a
# node renamed after a composite, as matmul's UnsafeViewBackward0, keeps an intermediate's
# size, which ember has not)
_SELF_SIZES = {
    "ViewBackward0": {"view", "reshape", "flatten", "unflatten"},
    "UnsafeViewBackward0": {"_unsafe_view"},
    "ReshapeAliasBackward0": {"reshape", "flatten"},
    "ExpandBackward0": {"expand"},
    "SqueezeBackward0": {"squeeze"},
    "SqueezeBackward1": {"squeeze"},
    "SqueezeBackward2": {"squeeze"},
    "SelectBackward0": {"_getitem_select", "select"},
    "SliceBackward0": {"_getitem_slice", "narrow"},
    "UnfoldBackward0": {"_unfold"},
    "DiagonalBackward0": {"diagonal"},
    "SplitBackward0": {"split", "chunk"},
    "SplitWithSizesBackward0": {"split"},
    "SumBackward0": {"sum"},
    "SumBackward1": {"sum"},
    "MeanBackward1": {"mean"},
    "IndexSelectBackward0": {"index_select"},
}


def saved_self_sizes(node):
    """The size of ``node``'s input as PyTorch's node saves it, or None where it saves none."""
    ops = _SELF_SIZES.get(node.name())
    if ops is None or node.op.name not in ops or not node._in_meta or node._in_meta[0] is None:
        return None
    return tuple(node._in_meta[0][0])
