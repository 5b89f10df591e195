"""Format details: byte order, legacy files, locations ember cannot restore to."""

import io
import zipfile

import numpy as np
import pytest

import ember
from tests.serialization._helpers import checkpoint, fixture


def _records(obj):
    buf = io.BytesIO()
    ember.save(obj, buf)
    zf = zipfile.ZipFile(buf)
    return {n.split("/", 1)[1]: zf.read(n) for n in zf.namelist()}


def test_a_big_endian_checkpoint_is_byteswapped():
    rec = _records({"f": ember.arange(4.0, dtype=ember.float64), "i": ember.arange(3)})
    swapped = {k: (np.frombuffer(v, "<f8").astype(">f8").tobytes() if k == "data/0" else
                   np.frombuffer(v, "<i8").astype(">i8").tobytes() if k == "data/1" else v)
               for k, v in rec.items() if k.startswith(".") or k.startswith("data/")}
    data = checkpoint(rec["data.pkl"], [("byteorder", b"big"), *swapped.items()])
    out = ember.load(io.BytesIO(data))
    assert out["f"].tolist() == [0.0, 1.0, 2.0, 3.0] and out["i"].tolist() == [0, 1, 2]


def test_an_unknown_byte_order_is_refused():
    rec = _records(ember.ones(2))
    data = checkpoint(rec["data.pkl"], [("byteorder", b"middle"), ("data/0", rec["data/0"])])
    with pytest.raises(RuntimeError, match="Unknown endianness type: middle"):
        ember.load(io.BytesIO(data))


def test_legacy_files_load_with_views_and_map_location():
    out = ember.load(fixture("legacy"), map_location="cpu")
    out["w"][2, 0] = -5.0
    assert out["row"][0].item() == -5.0            # a view of the same storage
    assert out["n"] == [1, "x"] and out["b"].dtype is ember.bfloat16


def test_legacy_files_refuse_mmap():
    with pytest.raises(RuntimeError, match="mmap can only be used with files saved with") as e:
        ember.load(fixture("legacy"), mmap=True)
    assert f"`torch.save({fixture('legacy')}, _use_new_zipfile_serialization=True)" \
        in str(e.value)                                 # names the file, as PyTorch does


@pytest.mark.parametrize("where", ["mps", {"cpu": "xla:0"}])
def test_a_location_ember_cannot_restore_is_named(where):
    with pytest.raises(RuntimeError, match="don't know how to restore data location"):
        ember.load(fixture("nested"), map_location=where)


def test_pytorch_whole_module_pickles_map_to_ember_classes():
    # a torch.save(model) file names torch.nn classes; with weights_only=False ember resolves
    # them to its own (here: the object graph of a pickled Linear, written by ember itself)
    model = ember.nn.Linear(2, 3)
    buf = io.BytesIO()
    ember.save(model, buf)
    zf = zipfile.ZipFile(buf)
    pkl = zf.read("archive/data.pkl").replace(b"ember.nn.modules.linear",
                                              b"torch.nn.modules.linear")
    data = checkpoint(pkl, [(n.split("/", 1)[1], zf.read(n)) for n in zf.namelist()
                            if "/data/" in n])
    assert b"ember.nn.modules.linear" not in pkl
    loaded = ember.load(io.BytesIO(data), weights_only=False)
    assert type(loaded) is ember.nn.Linear
    np.testing.assert_array_equal(loaded.weight.detach().numpy(),
                                  model.weight.detach().numpy())


def test_serialization_constants_and_restore_helpers(tmp_path):
    S = ember.serialization
    assert S.DEFAULT_PROTOCOL == 2 and issubclass(S.SourceChangeWarning, Warning)
    assert S.location_tag(ember.arange(3.0).untyped_storage()) == "cpu"
    base = ember.arange(6.0)
    ember.save({"w": base, "v": base[2:4]}, tmp_path / "c.pt")
    seen = []

    def to_cpu(storage, location):              # fairseq's map_location
        seen.append(S.location_tag(storage))
        return S.default_restore_location(storage, "cpu")

    got = ember.load(tmp_path / "c.pt", map_location=to_cpu)
    assert got["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and seen == ["cpu"]
    assert got["v"].storage_offset() == 2


def test_mmap_options_private_by_default_shared_writes_reach_the_file(tmp_path):
    import mmap
    S = ember.serialization
    path = tmp_path / "m.pt"
    ember.save({"w": ember.arange(4.0)}, path)
    assert S.get_default_mmap_options() == mmap.MAP_PRIVATE
    ember.load(path, mmap=True)["w"][0] = 7.0
    assert ember.load(path)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    with S.set_default_mmap_options(mmap.MAP_SHARED):
        assert S.get_default_mmap_options() == mmap.MAP_SHARED
        ember.load(path, mmap=True)["w"][0] = 7.0
    assert S.get_default_mmap_options() == mmap.MAP_PRIVATE
    assert ember.load(path, mmap=True)["w"].tolist() == [7.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="expected mmap.MAP_PRIVATE or mmap.MAP_SHARED, but "
                                         "got 5"):
        S.set_default_mmap_options(5)
