"""Framework plumbing against PyTorch: TorchVersion comparisons, the thread-count setters'
errors and the fp32_precision settings (read in a fresh PyTorch process, as PyTorch refuses
some later reads of its legacy flags once the new ones are set). Skipped when PyTorch is not
installed."""

import subprocess
import sys

import pytest

import ember
from ember.backends import _fp32_precision, _precision
from ember.torch_version import TorchVersion

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_OTHERS = ["2.0", "2.9", "2.13.0", "2.13.0+cpu", "3", "abc", (1, 13), (2, 13, 0), [2, 14],
           (2, 13, 0, "x"), 3, None]


def _answers(cls, other):
    out = []
    for op in ("__eq__", "__lt__", "__ge__"):
        try:
            out.append(getattr(cls("2.13.0+cpu"), op)(other))
        except Exception as e:           # noqa: BLE001  (the error is the answer)
            out.append(type(e).__name__)
        out[-1] = "NotImplemented" if out[-1] is NotImplemented else out[-1]
    return out


@pytest.mark.parametrize("other", _OTHERS, ids=repr)
def test_torch_version_compares_like_pytorchs(other):
    assert _answers(TorchVersion, other) == _answers(torch.torch_version.TorchVersion, other)


@pytest.mark.parametrize("setter", ["set_num_threads", "set_num_interop_threads"])
@pytest.mark.parametrize("bad", [0, -2, 2.0, "2", True, None], ids=repr)
def test_thread_setters_reject_what_pytorch_rejects(setter, bad):
    with pytest.raises(RuntimeError) as theirs:
        getattr(torch, setter)(bad)
    with pytest.raises(RuntimeError) as ours:
        getattr(ember, setter)(bad)
    assert str(ours.value) == str(theirs.value)


_SEQUENCE = [("cuda.matmul", "tf32"), ("cuda.matmul", "ieee"), ("cuda.matmul", "none"),
             ("", "tf32"), ("", "ieee"), ("cudnn", "tf32"), ("mkldnn.matmul", "bf16"),
             ("cudnn.conv", "x"), ("cuda.matmul", "bf16"), ("", "bf16")]
_READ = ["", "cuda.matmul", "cudnn", "cudnn.conv", "cudnn.rnn", "mkldnn", "mkldnn.matmul",
         "mkldnn.conv", "mkldnn.rnn"]
_PROGRAM = """
import functools, sys
lib = __import__(sys.argv[1])
def obj(path):
    return functools.reduce(getattr, [p for p in path.split(".") if p], lib.backends)
for path, value in {seq!r}:
    try:
        setattr(obj(path), "fp32_precision", value)
        print([obj(p).fp32_precision for p in {read!r}])
    except Exception as e:
        print(type(e).__name__, e)
"""


def test_fp32_precision_settings_follow_pytorchs(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(_PROGRAM.format(seq=_SEQUENCE, read=_READ))
    src = str(__import__("pathlib").Path(ember.__file__).parents[1])

    def run(name):
        return subprocess.run([sys.executable, str(program), name], capture_output=True,
                              text=True, check=True, env={"PYTHONPATH": src}).stdout
    assert run("ember") == run("torch")
    assert _fp32_precision._STATE and _precision._STATE       # this process is untouched
