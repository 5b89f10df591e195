"""Legacy-format checkpoints loaded onto the GPU: the storage bytes follow the pickle, so
the copies to the device must wait until they are read."""

import io

import pytest

import ember

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("where", ["cuda", {"cpu": "cuda:0"}, lambda s, loc: s.cuda()])
def test_a_legacy_checkpoint_loads_its_values_onto_the_gpu(where):
    base = ember.arange(6.).reshape(2, 3)
    buf = io.BytesIO()
    ember.save({"base": base, "row": base[1], "w": ember.tensor([1.5, -2.0])}, buf,
               _use_new_zipfile_serialization=False)
    buf.seek(0)
    got = ember.load(buf, map_location=where)
    assert got["base"].is_cuda and got["row"].is_cuda
    assert got["base"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert got["w"].tolist() == [1.5, -2.0]
    got["base"][1, 0] = 100.0
    assert got["row"].tolist() == [100.0, 4.0, 5.0]     # still a view of one storage


@pytest.mark.parametrize("legacy", [False, True])
def test_a_storage_saved_by_itself_loads_onto_the_gpu_shared_with_its_tensors(legacy):
    x = ember.arange(4.)
    buf = io.BytesIO()
    ember.save({"s": x.storage(), "t": x[1:]}, buf, _use_new_zipfile_serialization=not legacy)
    buf.seek(0)
    got = ember.load(buf, map_location="cuda")
    assert got["s"].is_cuda and list(got["s"]) == [0.0, 1.0, 2.0, 3.0]
    got["t"][0] = 50.0
    assert list(got["s"]) == [0.0, 50.0, 2.0, 3.0]
