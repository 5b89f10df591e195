"""Hostile and damaged files: clear errors, no code run, no crash (and a fuzzer to show it)."""

import io
import os
import pickle
import random
import zipfile
from collections import OrderedDict

import pytest

import ember
from ember.serialization import _names as N
from ember.serialization._pickler import PyPickler, StorageTable, _StorageRef
from tests.serialization._helpers import checkpoint, fixture, pickled

DOCUMENTED = (RuntimeError, pickle.UnpicklingError, EOFError)


class Point:
    def __init__(self, x):
        self.x = x


class RunsCommand:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_pickle_calling_os_system_is_refused_and_not_run(tmp_path):
    marker = tmp_path / "pwned"
    data = checkpoint(pickled({"w": RunsCommand(marker)}))
    with pytest.raises(pickle.UnpicklingError) as info:
        ember.load(io.BytesIO(data))
    assert f"GLOBAL {os.system.__module__}.system" in str(info.value)
    assert "blocked" in str(info.value)
    assert not marker.exists()


def test_an_unknown_global_names_itself_and_add_safe_globals():
    data = checkpoint(pickled({"p": Point(3)}))
    with pytest.raises(pickle.UnpicklingError) as info:
        ember.load(io.BytesIO(data))
    msg = str(info.value)
    assert f"Unsupported global: GLOBAL {__name__}.Point" in msg
    assert "ember.serialization.add_safe_globals" in msg and "weights_only" in msg


def test_an_allowable_global_gets_pytorchs_two_options_message():
    buf = io.BytesIO()
    ember.save({"s": slice(1, 2)}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError) as info:
        ember.load(buf)
    msg = str(info.value)
    assert msg.startswith("Weights only load failed. This file can still be loaded, to do so "
                          "you have two options, ")
    assert ("\tWeightsUnpickler error: Unsupported global: GLOBAL slice was not an allowed "
            "global by default. Please use `ember.serialization.add_safe_globals([slice])`") in msg


def test_a_blocked_global_gets_pytorchs_short_message(tmp_path):
    data = checkpoint(pickled({"w": RunsCommand(tmp_path / "pwned")}))
    with pytest.raises(pickle.UnpicklingError) as info:
        ember.load(io.BytesIO(data))
    msg = str(info.value)
    assert msg.startswith("Weights only load failed. In PyTorch 2.6, ")
    assert "trusted source.\n\n\nTrying to load unsupported GLOBAL" in msg


def test_safe_globals_allow_a_class():
    data = checkpoint(pickled({"p": Point(3)}))
    with ember.serialization.safe_globals([Point]):
        assert ember.serialization.get_safe_globals() == [Point]
        assert ember.load(io.BytesIO(data))["p"].x == 3
    assert ember.serialization.get_safe_globals() == []
    ember.serialization.add_safe_globals([(Point, f"{__name__}.Point")])
    try:
        assert ember.load(io.BytesIO(data))["p"].x == 3
    finally:
        ember.serialization.clear_safe_globals()
    assert ember.serialization.get_safe_globals() == []
    assert ember.load(io.BytesIO(data), weights_only=False)["p"].x == 3


@pytest.mark.parametrize("protocol", [2, 4])
def test_get_unsafe_globals_in_checkpoint_lists_what_load_would_reject(protocol):
    buf = io.BytesIO()
    ember.save({"p": Point(1), "t": ember.ones(2), "f": [len, Point(2)], "od": OrderedDict()},
               buf, pickle_protocol=protocol)
    buf.seek(0)
    unsafe = ember.serialization.get_unsafe_globals_in_checkpoint
    assert sorted(unsafe(buf)) == sorted([f"{__name__}.Point", "builtins.len"])
    with ember.serialization.safe_globals([Point]):
        buf.seek(0)
        assert unsafe(buf) == ["builtins.len"]
    with pytest.raises(ValueError, match="Expected input to be a checkpoint returned by"):
        unsafe(io.BytesIO(b"not a zip"))


def test_pickle_load_args_with_weights_only_warn():
    buf = io.BytesIO()
    ember.save([1], buf)
    buf.seek(0)
    with pytest.warns(UserWarning, match="pickle_load_args only works if `weights_only=False`"):
        assert ember.load(buf, encoding="latin1") == [1]


@pytest.mark.parametrize("payload", [
    b"\x80\x02ctorch\nTensor\nJ\x00\xca\x9a;\x85R.",            # Tensor(10**9)
    b"\x80\x02ctorch\nTensor\n)\x81.",                            # Tensor.__new__(Tensor)
])
def test_tensor_classes_are_never_called(payload):
    with pytest.raises(pickle.UnpicklingError, match="unrecognized"):
        ember.load(io.BytesIO(checkpoint(payload)))


def test_weights_only_with_a_pickle_module_is_refused():
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        ember.load(io.BytesIO(b""), pickle_module=pickle, weights_only=True)


class _BadTensor:
    def __init__(self, size, stride, offset=0):
        self.args = (size, stride, offset)


class _LyingPickler(PyPickler):
    def reducer_override(self, obj):
        if isinstance(obj, _BadTensor):
            storage = self.table.locate(ember.zeros(4))[0]
            size, stride, offset = obj.args
            return (N.REBUILD_V2, (_StorageRef(storage), offset, size, stride, False,
                                   OrderedDict()))
        return super().reducer_override(obj)


def _lying_checkpoint(bad):
    table = StorageTable()
    buf = io.BytesIO()
    _LyingPickler(buf, table).dump({"t": bad})
    return checkpoint(buf.getvalue(), [(f"data/{s.key}", s.data()) for s in table.storages])


@pytest.mark.parametrize("size,stride,offset", [((5,), (1,), 0), ((2, 2), (3, 1), 0),
                                                ((4,), (1,), 1), ((2,), (4,), 0)])
def test_a_tensor_larger_than_its_storage_is_refused(size, stride, offset):
    data = _lying_checkpoint(_BadTensor(size, stride, offset))
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 16"):
        ember.load(io.BytesIO(data))


@pytest.mark.parametrize("size,stride", [((-1,), (1,)), ((2,), (-1,)), ((2,), (1, 1)),
                                         (("a",), (1,))])
def test_invalid_sizes_and_strides_are_refused(size, stride):
    with pytest.raises(DOCUMENTED, match="invalid tensor"):
        ember.load(io.BytesIO(_lying_checkpoint(_BadTensor(size, stride))))


def test_a_zero_stride_tensor_fits_any_nonempty_storage():
    t = ember.load(io.BytesIO(_lying_checkpoint(_BadTensor((1000,), (0,)))))["t"]
    assert t.shape == (1000,) and t.stride() == (0,)


def _saved(obj):
    buf = io.BytesIO()
    ember.save(obj, buf)
    return buf.getvalue()


def test_truncated_files():
    data = _saved({"w": ember.arange(100.0)})
    for cut in (0, 10, len(data) // 2, len(data) - 10):
        with pytest.raises(DOCUMENTED):
            ember.load(io.BytesIO(data[:cut]))


def test_a_corrupted_storage_fails_its_crc():
    data = bytearray(_saved({"w": ember.arange(100.0)}))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("archive/data/0")
    data[info.header_offset + 200] ^= 0xFF
    with pytest.raises(RuntimeError, match="CRC-32 mismatch"):
        ember.load(io.BytesIO(bytes(data)))


def test_a_corrupted_big_storage_fails_its_crc():
    data = bytearray(_saved({"w": ember.zeros(3 << 20, dtype=ember.uint8)}))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("archive/data/0")
    data[info.header_offset + 100 + (5 << 19)] ^= 1          # in the third 1 MiB chunk
    with pytest.raises(RuntimeError, match="CRC-32 mismatch"):
        ember.load(io.BytesIO(bytes(data)))


def test_a_missing_record():
    data = checkpoint(_saved_pickle_only())
    with pytest.raises(RuntimeError, match="failed locating file data/0"):
        ember.load(io.BytesIO(data))


def _saved_pickle_only():
    return zipfile.ZipFile(io.BytesIO(_saved(ember.ones(2)))).read("archive/data.pkl")


def test_a_storage_record_of_the_wrong_size():
    data = checkpoint(_saved_pickle_only(), [("data/0", b"\x00" * 4)])
    with pytest.raises(RuntimeError, match="holds 4 bytes but its storage needs 8"):
        ember.load(io.BytesIO(data))


def test_an_empty_file_raises_eof_error_as_in_pytorch():
    with pytest.raises(EOFError, match="the file is empty"):
        ember.load(io.BytesIO(b""))


@pytest.mark.parametrize("content,error", [
    (b"", "the file is empty"),
    (b"garbage" * 10, "invalid load key"),
    (b"PK\x03\x04" + b"\x00" * 60, "failed finding central directory"),
    (b"\x80\x02K\x05.", "Invalid magic number"),
])
def test_wrong_magic(content, error):
    with pytest.raises(DOCUMENTED, match=error):
        ember.load(io.BytesIO(content))


def test_legacy_tar_format_is_named():
    data = bytearray(1024)
    data[257:262] = b"ustar"
    with pytest.raises(RuntimeError, match="tar format"):
        ember.load(io.BytesIO(bytes(data)))


def test_unsupported_dtypes_are_named():
    data = checkpoint(b"\x80\x02ctorch\ncomplex32\nq\x00.")
    with pytest.raises(RuntimeError, match="dtype torch.complex32, which ember does not support"):
        ember.load(io.BytesIO(data))


# ----- fuzzing ----------------------------------------------------------------------------------

def _mutate(rng, data):
    data = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:                                   # flip a few bytes
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 1:                                 # truncate
        data = data[:rng.randrange(len(data))]
    elif kind == 2:                                 # duplicate a slice somewhere else
        i, j = sorted(rng.randrange(len(data)) for _ in range(2))
        k = rng.randrange(len(data))
        data[k:k] = data[i:j][:64]
    else:                                           # delete a slice
        i = rng.randrange(len(data))
        del data[i:i + rng.randint(1, 16)]
    return bytes(data)


def _load_survives(data, **kwargs):
    try:
        ember.load(io.BytesIO(data), **kwargs)
    except DOCUMENTED:
        pass


@pytest.mark.parametrize("name", ["nested", "optimizer_state", "legacy"])
def test_fuzz_whole_files(name):
    with open(fixture(name), "rb") as f:
        original = f.read()
    rng = random.Random(f"file-{name}")
    for _ in range(150):
        _load_survives(_mutate(rng, original))


@pytest.mark.parametrize("name", ["nested", "optimizer_state", "model_state_dict"])
def test_fuzz_pickles_inside_valid_archives(name):
    # rewrapping keeps the CRCs right, so the mutated pickle reaches the unpickler
    zf = zipfile.ZipFile(fixture(name))
    prefix = zf.namelist()[0].split("/")[0]
    pkl = zf.read(f"{prefix}/data.pkl")
    records = [(n.split("/", 1)[1], zf.read(n)) for n in zf.namelist()
               if "/data/" in n]
    rng = random.Random(f"pickle-{name}")
    for _ in range(300):
        data = checkpoint(_mutate(rng, pkl), records)
        _load_survives(data)


def test_fuzz_random_pickles_never_run_code(tmp_path):
    rng = random.Random("opcodes")
    pieces = [pickled(x) for x in ({"a": [1, 2.5, "x"]}, (None, True), OrderedDict(a=1),
                                   {1, 2}, b"xy", 1 + 2j)]
    evil = pickled(RunsCommand(tmp_path / "pwned"))
    for _ in range(400):
        body = b"".join(p[2:-1] for p in rng.sample(pieces + [evil], 3))
        _load_survives(checkpoint(b"\x80\x02" + _mutate(rng, body) + b"."))
    assert not (tmp_path / "pwned").exists()
