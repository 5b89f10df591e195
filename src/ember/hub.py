"""``torch.hub``: checkpoints downloaded once into a cache, and models from a ``hubconf.py``.

The cache is PyTorch's own (``$TORCH_HOME/hub``, else ``$XDG_CACHE_HOME/torch/hub``, else
``~/.cache/torch/hub``), so a checkpoint either library downloaded serves both. Downloads go
to a temporary file beside their destination and are renamed into place once complete (and
their SHA-256 checked, when asked), so an interrupted download never leaves a truncated
checkpoint in the cache. Models load from a local directory's ``hubconf.py``
(``source="local"``); fetching GitHub repositories is not provided.
"""

import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import zipfile
from urllib.parse import urlparse
from urllib.request import Request, urlopen

__all__ = ["get_dir", "set_dir", "download_url_to_file", "load_state_dict_from_url", "load",
           "list", "help"]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
MODULE_HUBCONF = "hubconf.py"
_HUB_DIR = [None]
_CHUNK = 128 * 1024


def get_dir():
    """The directory hub caches in (``set_dir``'s, else PyTorch's default)."""
    if _HUB_DIR[0] is not None:
        return _HUB_DIR[0]
    home = os.getenv("TORCH_HOME") or os.path.join(
        os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "torch")
    return os.path.join(os.path.expanduser(home), "hub")


def set_dir(d):
    """Make hub cache in ``d``."""
    _HUB_DIR[0] = os.path.expanduser(os.fspath(d))


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Download ``url`` to the file ``dst``, atomically; raise if its SHA-256 does not start
    with ``hash_prefix``."""
    dst = os.path.expanduser(os.fspath(dst))
    folder = os.path.dirname(os.path.abspath(dst))
    os.makedirs(folder, exist_ok=True)
    request = Request(url, headers={"User-Agent": "ember.hub"})
    with urlopen(request) as response:
        total = response.headers.get("Content-Length") if hasattr(response, "headers") else None
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=os.path.basename(dst) + ".",
                                   suffix=".partial")
        try:
            with os.fdopen(fd, "wb") as out, _progress(progress, total) as bar:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
            if hash_prefix is not None:
                got = digest.hexdigest()
                if got[:len(hash_prefix)] != hash_prefix:
                    raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got '
                                       f'"{got}")')
            os.replace(tmp, dst)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def _progress(enabled, total):
    from tqdm import tqdm
    return tqdm(total=int(total) if total else None, disable=not enabled, unit="B",
                unit_scale=True, unit_divisor=1024)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=False):
    """The object saved at ``url`` (a state dict, usually), downloaded into
    ``<hub dir>/checkpoints`` the first time and read from there afterwards."""
    model_dir = os.path.join(get_dir(), "checkpoints") if model_dir is None else model_dir
    os.makedirs(model_dir, exist_ok=True)
    filename = file_name or os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, filename)
    if not os.path.exists(cached):
        sys.stderr.write(f'Downloading: "{url}" to {cached}\n')
        match = HASH_REGEX.search(filename) if check_hash else None
        download_url_to_file(url, cached, match.group(1) if match else None, progress)
    cached = _unzipped_legacy(cached, model_dir)
    from ember.serialization import load as _load
    return _load(cached, map_location=map_location, weights_only=weights_only)


def _unzipped_legacy(path, folder):
    """A checkpoint of PyTorch's old zipped format (a zip archive of one file) extracted
    beside it; any other file (the zip checkpoint format has several members) as it is."""
    if not zipfile.is_zipfile(path):
        return path
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
        if len(members) != 1 or members[0].is_dir():
            return path
        archive.extractall(folder)
        return os.path.join(folder, members[0].filename)


def _hubconf(repo_dir):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{MODULE_HUBCONF} not found in {repo_dir}")
    spec = importlib.util.spec_from_file_location("hubconf", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, repo_dir)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(repo_dir)
    return module


def _local(repo_or_dir, source):
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source != "local":
        raise RuntimeError("ember.hub loads models from a local directory's hubconf.py "
                           "(source='local'); fetching GitHub repositories is not provided")
    return repo_or_dir


def _entrypoint(module, model):
    fn = getattr(module, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def load(repo_or_dir, model, *args, source="github", trust_repo="check", force_reload=False,
         verbose=True, skip_validation=False, **kwargs):
    """``model(*args, **kwargs)``, the entrypoint of that name in ``hubconf.py``."""
    module = _hubconf(_local(repo_or_dir, source))
    return _entrypoint(module, model)(*args, **kwargs)


def list(github, force_reload=False, skip_validation=False, trust_repo="check",
         verbose=True):                         # noqa: A001  (PyTorch's name)
    """The entrypoints ``hubconf.py`` offers (its public callables); ``github`` may name a
    local directory."""
    module = _hubconf(_local(github, "local" if os.path.isdir(github) else "github"))
    return [name for name in dir(module)
            if callable(getattr(module, name)) and not name.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False,
         trust_repo="check"):                      # noqa: A001  (PyTorch's name)
    """The docstring of entrypoint ``model``; ``github`` may name a local directory."""
    module = _hubconf(_local(github, "local" if os.path.isdir(github) else "github"))
    return _entrypoint(module, model).__doc__
