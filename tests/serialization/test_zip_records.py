"""The checkpoint zip's records: CRC-32s computed in slices on threads, zip64 fields, records
written without CRC-32s or without data, and the byte order of files without a record."""

import io
import os
import random
import struct
import threading
import zipfile
import zlib

import numpy as np
import pytest

import ember
import ember.serialization as S
from ember.serialization import _crc, _zip


@pytest.fixture
def small_slices(monkeypatch):
    """CRC-32s computed over 1000-byte slices, so small records take the threaded path."""
    monkeypatch.setattr(_crc, "SLICE", 1000)
    monkeypatch.setattr(_crc, "THREADED_MIN", 0)


def _saved(obj, **options):
    buf = io.BytesIO()
    ember.save(obj, buf, **options)
    return buf.getvalue()


def _infos(data):
    return {i.filename.split("/", 1)[1]: i for i in zipfile.ZipFile(io.BytesIO(data)).infolist()}


def test_joined_crcs_equal_zlibs_crc_of_the_whole():
    rng = random.Random(0)
    for _ in range(100):
        a, b = rng.randbytes(rng.randrange(0, 3000)), rng.randbytes(rng.randrange(0, 3000))
        assert _crc.combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
    assert _crc.combine(zlib.crc32(b"abc"), 0, 0) == zlib.crc32(b"abc")


def test_a_sliced_crc_equals_zlibs(small_slices):
    data = os.urandom(10_500)
    checksum = _crc.SlicedCrc()
    checksum.add_slices(memoryview(data))
    assert len(checksum._parts) == 11
    assert checksum.value() == zlib.crc32(data)


def test_loads_survive_set_num_threads_on_another_thread(small_slices, tmp_path):
    path = tmp_path / "x.pt"
    x = ember.arange(20_000, dtype=ember.float32)
    ember.save({"x": x}, path)
    failures, before = [], ember.get_num_threads()

    def load_repeatedly():
        try:
            for _ in range(20):
                assert ember.equal(ember.load(path)["x"], x)
        except Exception as e:          # noqa: BLE001  (reported below)
            failures.append(e)

    threads = [threading.Thread(target=load_repeatedly) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            ember.set_num_threads(1 if ember.get_num_threads() == 2 else 2)
    finally:
        for t in threads:
            t.join()
        ember.set_num_threads(before)
    assert failures == []


def test_big_records_get_their_true_crc_and_load_back(small_slices):
    x = ember.arange(3000, dtype=ember.float32)
    data = _saved({"x": x})
    info = _infos(data)["data/0"]
    assert info.CRC == zlib.crc32(x.numpy().tobytes())
    assert zipfile.ZipFile(io.BytesIO(data)).testzip() is None
    assert ember.equal(ember.load(io.BytesIO(data))["x"], x)


def test_a_record_over_one_slice_gets_its_true_crc_from_the_threads():
    x = ember.arange(_crc.SLICE // 4 + 1, dtype=ember.float32)     # one slice and 4 bytes
    info = _infos(_saved({"x": x}))["data/0"]
    assert info.CRC == zlib.crc32(x.numpy().tobytes())


def test_a_corrupted_byte_in_a_middle_slice_fails_the_check(small_slices):
    data = bytearray(_saved({"x": ember.arange(3000, dtype=ember.float32)}))
    info = _infos(bytes(data))["data/0"]
    start = _data_start(data, info)
    data[start + 5500] ^= 1
    with pytest.raises(RuntimeError, match="CRC-32 mismatch"):
        ember.load(io.BytesIO(bytes(data)))


def _data_start(data, info):
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    return info.header_offset + 30 + name_len + extra_len


def test_records_data_is_aligned_to_64_bytes():
    data = _saved({"a": ember.ones(3), "b": ember.zeros(5, dtype=ember.int64)})
    for info in _infos(data).values():
        assert _data_start(data, info) % 64 == 0


@pytest.mark.parametrize("limit", ["sizes", "entries"])
def test_zip64_fields_are_written_and_read(monkeypatch, limit):
    if limit == "sizes":
        monkeypatch.setattr(_zip, "_ZIP64_LIMIT", 100)
    else:
        monkeypatch.setattr(_zip, "_ENTRIES_LIMIT", 3)
    sd = {"w": ember.arange(300.0), "b": ember.ones(3, dtype=ember.int64)}
    data = _saved(sd)
    assert (b"PK\x06\x06" in data) and (b"PK\x06\x07" in data)    # zip64 end + locator
    z = zipfile.ZipFile(io.BytesIO(data))
    assert z.testzip() is None
    if limit == "sizes":
        assert _infos(data)["data/0"].file_size == 1200
        assert struct.pack("<HH", 1, 24) in data                   # sizes and offset
    out = ember.load(io.BytesIO(data))
    assert ember.equal(out["w"], sd["w"]) and ember.equal(out["b"], sd["b"])


def test_crc32_options_off_writes_zero_crcs_that_load_unchecked():
    assert S.get_crc32_options() is True
    S.set_crc32_options(False)
    try:
        assert S.get_crc32_options() is False
        data = _saved({"x": ember.arange(4.0)})
    finally:
        S.set_crc32_options(True)
    assert {i.CRC for i in _infos(data).values()} == {0}
    assert ember.equal(ember.load(io.BytesIO(data))["x"], ember.arange(4.0))


def test_skip_data_writes_sizes_without_data():
    sd = {"x": ember.arange(1.0, 5.0), "i": ember.ones(2, dtype=ember.int64)}
    with S.skip_data():
        data = _saved(sd)
    infos = _infos(data)
    assert (infos["data/0"].file_size, infos["data/0"].CRC) == (16, 0)
    out = ember.load(io.BytesIO(data))
    assert out["x"].tolist() == [0.0] * 4 and out["i"].dtype == ember.int64
    with S.skip_data():                 # loads sizes and dtypes, reads no data
        again = ember.load(io.BytesIO(_saved(sd)))
    assert again["x"].shape == (4,) and again["i"].dtype == ember.int64
    with pytest.raises(RuntimeError, match="Cannot use skip_data=True with "
                                           "_use_new_zipfile_serialization=False"):
        with S.skip_data():
            ember.save(sd, io.BytesIO(), _use_new_zipfile_serialization=False)


def test_skip_data_is_restored_after_the_block_and_per_thread():
    from ember.serialization._options import skipping_data
    with S.skip_data(materialize_fake_tensors=True):
        with S.skip_data():
            pass
        assert skipping_data()
    assert not skipping_data()


@pytest.mark.parametrize("endianness, swapped", [
    (None, False), (S.LoadEndianness.LITTLE, False), (S.LoadEndianness.NATIVE, False),
    (S.LoadEndianness.BIG, True)])
def test_files_without_a_byteorder_record_load_in_the_default_order(endianness, swapped):
    x = np.arange(1.0, 4.0, dtype=np.float32)
    data = _saved({"x": ember.from_numpy(x)}, _disable_byteorder_record=True)
    assert "byteorder" not in _infos(data)
    S.set_default_load_endianness(endianness)
    try:
        assert S.get_default_load_endianness() is endianness
        loaded = ember.load(io.BytesIO(data))["x"].numpy()
    finally:
        S.set_default_load_endianness(None)
    np.testing.assert_array_equal(loaded, x.byteswap() if swapped else x)


def test_default_load_endianness_takes_only_the_enum_or_none():
    with pytest.raises(TypeError, match="Invalid argument type in function "
                                        "set_default_load_endianness"):
        S.set_default_load_endianness("big")
    assert S.get_default_load_endianness() is None
