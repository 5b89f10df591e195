"""The flash-attention implementation registry of ``ember.nn.attention``
(``register_flash_attention_impl`` and friends).

A provider registers a callable under a name; ``activate_flash_attention_impl`` calls it and
keeps the handle it returns, whose ``remove()`` undoes the activation when another impl is
activated or ``restore_flash_attention_impl`` goes back to the default. PyTorch's own "FA3"
and "FA4" import their kernel packages (``flash_attn_interface``, ``flash_attn``); ember
cannot plug those CUDA kernels into its attention, so activating them fails."""

import importlib
import logging

__all__ = ["register_flash_attention_impl", "activate_flash_attention_impl",
           "list_flash_attention_impls", "current_flash_attention_impl",
           "restore_flash_attention_impl"]

logger = logging.getLogger(__name__)


def _external_impl(name, package):
    """The register function of a flash-attention package ember cannot use."""
    def register():
        importlib.import_module(package)        # ModuleNotFoundError, as PyTorch's, if absent
        raise RuntimeError(f"ember cannot activate the {name} flash attention impl: its "
                           f"kernels plug into PyTorch's dispatcher, which ember has not")
    return register


_IMPLS = {"FA3": _external_impl("FA3", "flash_attn_interface"),
          "FA4": _external_impl("FA4", "flash_attn")}
_ACTIVE = {"name": None, "handle": None}


def register_flash_attention_impl(impl, *, register_fn):
    """Register ``register_fn``, the callable that activates the flash-attention impl
    ``impl`` (it may return a handle with ``remove()``)."""
    _IMPLS[impl] = register_fn


def list_flash_attention_impls():
    """The names of all registered flash-attention impls."""
    return sorted(_IMPLS)


def current_flash_attention_impl():
    """The name of the activated flash-attention impl; None when none is."""
    return _ACTIVE["name"]


def activate_flash_attention_impl(impl):
    """Activate the registered flash-attention impl ``impl``, undoing the active one first."""
    _remove_active()                # (even when ``impl`` turns out unknown, as PyTorch does)
    register_fn = _IMPLS.get(impl)
    if register_fn is None:
        raise ValueError(f"Unknown flash attention impl '{impl}'. Available implementations: "
                         f"{list_flash_attention_impls()}")
    handle = register_fn()
    if handle is not None:
        _ACTIVE["name"], _ACTIVE["handle"] = impl, handle


def restore_flash_attention_impl(_raise_warn=True):
    """Undo the activated flash-attention impl, back to the default one."""
    if _ACTIVE["handle"] is None:
        if _raise_warn:
            logger.warning("Trying to restore default FA2 impl when no custom impl was "
                           "activated")
        return
    _remove_active()


def _remove_active():
    handle = _ACTIVE["handle"]
    _ACTIVE["name"] = _ACTIVE["handle"] = None
    if handle is not None:
        handle.remove()
