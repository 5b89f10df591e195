"""``torch.nn.factory_kwargs``: the factory keywords a module passes on to its tensors."""

_FACTORY_KEYS = {"device", "dtype", "memory_format"}


def factory_kwargs(kwargs):
    """The ``device``/``dtype``/``memory_format`` entries of ``kwargs``, merged with those of
    its ``factory_kwargs`` entry; any other key, or one given twice, raises TypeError."""
    if kwargs is None:
        return {}
    simple = {k: v for k, v in kwargs.items() if k != "factory_kwargs"}
    unexpected = simple.keys() - _FACTORY_KEYS
    if unexpected:
        raise TypeError(f"unexpected kwargs {unexpected}")
    merged = dict(simple)
    for key, value in (kwargs.get("factory_kwargs") or {}).items():
        if key in simple:
            raise TypeError(f"{key} specified twice, in **kwargs and in factory_kwargs")
        merged[key] = value
    return merged
