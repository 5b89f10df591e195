"""The older hook-based spectral normalization (``nn.utils.spectral_norm``): before every
forward, ``module.<name>`` is recomputed as ``<name>_orig / sigma``, sigma estimated by power
iteration on the buffers ``<name>_u`` and ``<name>_v`` (one step per training forward)."""

import ember
from ember.nn.parameter import Parameter
from ember.nn.utils.parametrizations import unit_vector, weight_matrix
from ember.nn.utils.weight_norm import reject_uninitialized, remove_hook

__all__ = ["spectral_norm", "remove_spectral_norm", "SpectralNorm"]


class SpectralNorm:
    """The forward pre-hook that divides ``module.<name>_orig`` by its spectral norm."""

    _version = 1        # the state-dict format: ``<name>_orig``, ``<name>_u``, ``<name>_v``

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def compute_weight(self, module, do_power_iteration):
        """The normalized weight; with ``do_power_iteration``, u and v take their steps
        first (in place, outside autograd)."""
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = weight_matrix(weight, self.dim)
        if do_power_iteration:
            # out= writes, as PyTorch's: a transform (func.jvp) refuses in-place writes into
            # captured buffers, not out= ones
            normalize = ember.nn.functional.normalize
            with ember.no_grad():
                for _ in range(self.n_power_iterations):
                    normalize(mat.t().mv(u), dim=0, eps=self.eps, out=v)
                    normalize(mat.mv(v), dim=0, eps=self.eps, out=u)
            u, v = u.clone(), v.clone()
        return weight / u.dot(mat.mv(v))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        """Install the hook on ``module``: the weight moves to ``<name>_orig``."""
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        reject_uninitialized(weight, "SpectralNorm", "spectral normalization")
        with ember.no_grad():
            mat = weight_matrix(weight, dim)
            h, w = mat.shape
            u = unit_vector(weight.new_empty(h).normal_(0, 1), eps)
            v = unit_vector(weight.new_empty(w).normal_(0, 1), eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        module._register_state_dict_hook(_RecordVersion(fn))
        module._register_load_state_dict_pre_hook(_UpgradeOldStateDict(fn))
        return fn

    def remove(self, module):
        """Turn ``module.<name>`` back into a plain parameter holding the normalized weight."""
        with ember.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        del module._parameters[self.name + "_orig"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


class _RecordVersion:
    """State-dict hook: the format version in the module's metadata, under
    ``['spectral_norm']['<name>.version']``."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, module, state_dict, prefix, local_metadata):
        entry = local_metadata.setdefault("spectral_norm", {})
        key = self.fn.name + ".version"
        if key in entry:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        entry[key] = SpectralNorm._version


class _UpgradeOldStateDict:
    """Load pre-hook for state dicts older than version 1, which held ``<name>`` instead of
    ``<name>_v``: v becomes the least-squares solution of W v = u rescaled so that
    u . W v is the saved sigma (``<name>_orig / <name>``)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, state_dict, prefix, local_metadata, strict, missing_keys,
                 unexpected_keys, error_msgs):
        name = self.fn.name
        version = local_metadata.get("spectral_norm", {}).get(name + ".version")
        if version is not None and version >= 1:
            return
        key = prefix + name
        if version is None and key not in state_dict and all(
                key + s in state_dict for s in ("_orig", "_u", "_v")):
            return                  # a current state dict that lost its metadata
        absent = [key + s for s in ("_orig", "", "_u") if key + s not in state_dict]
        if absent:
            if strict:
                missing_keys.extend(absent)
            return
        with ember.no_grad():
            orig, u = state_dict[key + "_orig"], state_dict[key + "_u"]
            sigma = (orig / state_dict.pop(key)).mean()
            mat = weight_matrix(orig, self.fn.dim)
            v = ember.linalg.multi_dot([mat.t().mm(mat).pinverse(), mat.t(),
                                        u.unsqueeze(1)]).squeeze(1)
            state_dict[key + "_v"] = v * (sigma / u.dot(mat.mv(v)))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Normalize ``module.<name>`` by its spectral norm before every forward (PyTorch's older
    hook-based form; ``nn.utils.parametrizations.spectral_norm`` is the newer)."""
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo ``spectral_norm``: ``module.<name>`` becomes a plain parameter again."""
    remove_hook(module, SpectralNorm, name, "spectral_norm")
    for table, kind in ((module._state_dict_hooks, _RecordVersion),
                        (module._load_state_dict_pre_hooks, _UpgradeOldStateDict)):
        for key, hook in list(table.items()):
            if isinstance(hook, kind) and hook.fn.name == name:
                del table[key]
                break
    return module
