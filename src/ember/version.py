"""``ember.version`` (``torch.version``): ember's version, the CUDA runtime it runs on, the
git commit it was built from, and PyTorch's other build facts.

``cuda`` is CuPy's CUDA runtime version ("12.8") once CuPy has been imported (by using a
GPU), else None: asking never imports CuPy, so CPU-only programs stay free of it.
``git_version`` is the commit of the git checkout ember is imported from, or "Unknown".
"""

import functools
import sys
from pathlib import Path

__all__ = ["__version__", "debug", "cuda", "git_version", "hip", "rocm", "xpu"]  # noqa: F822

debug = False
hip = None
rocm = None
xpu = None


def _cuda():
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    try:
        v = cupy.cuda.runtime.runtimeGetVersion()
    except Exception:           # a CuPy without a usable runtime: no CUDA version to tell
        return None
    return f"{v // 1000}.{v % 1000 // 10}"


def _git_dir(start):
    """The git directory of the checkout holding ``start``, or None."""
    for folder in (start, *start.parents):
        dot = folder / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():                       # a worktree: "gitdir: <path>"
            text = dot.read_text().strip()
            if text.startswith("gitdir:"):
                return (folder / text[len("gitdir:"):].strip()).resolve()
    return None


def _ref(git, name):
    """The commit a ref names, from its file or packed-refs, in ``git`` or its common dir."""
    places = [git]
    common = git / "commondir"
    if common.is_file():
        places.append((git / common.read_text().strip()).resolve())
    for place in places:
        loose = place / name
        if loose.is_file():
            return loose.read_text().strip()
        packed = place / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                sha, _, ref = line.partition(" ")
                if ref == name:
                    return sha
    return None


@functools.cache
def _git_version():
    try:
        git = _git_dir(Path(__file__).resolve().parent)
        if git is None:
            return "Unknown"
        head = (git / "HEAD").read_text().strip()
        sha = _ref(git, head[4:].strip()) if head.startswith("ref:") else head
    except OSError:
        return "Unknown"
    return sha or "Unknown"


def __getattr__(name):
    if name == "__version__":
        import ember
        return ember.__version__
    if name == "cuda":
        return _cuda()
    if name == "git_version":
        return _git_version()
    raise AttributeError(f"module 'ember.version' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(__all__))
