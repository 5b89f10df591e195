"""ember.version (torch.version): the build facts, and that asking for the CUDA version
never imports CuPy."""

import re
import subprocess
import sys
import types
from pathlib import Path

import ember
from ember import version


def test_the_constant_facts():
    assert version.__version__ == ember.__version__ == "0.1.0"
    assert version.debug is False
    assert version.hip is None and version.rocm is None and version.xpu is None
    assert set(version.__all__) <= set(dir(version))
    from ember.version import __version__, git_version
    assert __version__ == "0.1.0" and git_version == version.git_version


def test_cuda_is_none_until_cupy_is_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert version.cuda is None


def test_cuda_is_cupys_runtime_version(monkeypatch):
    runtime = types.SimpleNamespace(runtimeGetVersion=lambda: 12080)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert version.cuda == "12.8"
    runtime.runtimeGetVersion = lambda: 13000
    assert version.cuda == "13.0"

    def broken():
        raise RuntimeError("no driver")
    runtime.runtimeGetVersion = broken
    assert version.cuda is None


def test_asking_never_imports_cupy():
    src = str(Path(ember.__file__).parent.parent)
    code = ("import sys, ember.version as v; v.cuda; v.git_version; "
            "print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": src}, check=True)
    assert out.stdout.strip() == "False"


def test_git_version_is_the_checkouts_commit():
    sha = version.git_version
    assert sha == "Unknown" or re.fullmatch(r"[0-9a-f]{40}", sha)
    root = Path(version.__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return
    if head.returncode == 0:
        assert sha == head.stdout.strip()


def test_git_version_reads_refs_and_packed_refs(tmp_path):
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text("# pack-refs\n" + "a" * 40 + " refs/heads/main\n")
    assert version._git_dir(tmp_path / "src" / "pkg") == git
    assert version._ref(git, "refs/heads/main") == "a" * 40
    (git / "refs" / "heads" / "main").write_text("b" * 40 + "\n")
    assert version._ref(git, "refs/heads/main") == "b" * 40
    assert version._ref(git, "refs/heads/other") is None


def test_unknown_names_raise_attribute_error():
    try:
        version.nonexistent
    except AttributeError as e:
        assert str(e) == "module 'ember.version' has no attribute 'nonexistent'"
    else:
        raise AssertionError("no AttributeError")
