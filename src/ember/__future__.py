"""Opt-in behaviours of future releases (``torch.__future__``): how ``Module.to()`` and the
other conversions replace parameters."""

__all__ = ["set_overwrite_module_params_on_conversion",
           "get_overwrite_module_params_on_conversion",
           "set_swap_module_params_on_conversion", "get_swap_module_params_on_conversion"]

_FLAGS = {"overwrite": False, "swap": False}


def set_overwrite_module_params_on_conversion(value):
    """Whether module conversions give parameters new Parameter objects (True) instead of
    changing the existing ones' data in place (False, the default)."""
    _FLAGS["overwrite"] = bool(value)


def get_overwrite_module_params_on_conversion():
    """See ``set_overwrite_module_params_on_conversion``."""
    return _FLAGS["overwrite"]


def set_swap_module_params_on_conversion(value):
    """Whether module conversions and ``load_state_dict`` swap the converted tensors into the
    existing parameter objects with ``utils.swap_tensors`` (keeping references valid)."""
    _FLAGS["swap"] = bool(value)


def get_swap_module_params_on_conversion():
    """See ``set_swap_module_params_on_conversion``."""
    return _FLAGS["swap"]
