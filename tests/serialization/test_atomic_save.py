"""ember.save to a path is atomic: a failure or a kill mid-save leaves the old file intact."""

import os
import pickle
import signal
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
import ember.serialization


def _first_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    ember.save({"w": ember.arange(5.0)}, path)
    return path, path.read_bytes()


def test_an_unpicklable_object_leaves_the_previous_file(tmp_path):
    path, before = _first_checkpoint(tmp_path)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        ember.save({"w": ember.ones(3), "f": lambda x: x}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]
    np.testing.assert_array_equal(ember.load(path)["w"].numpy(), np.arange(5.0))


def test_a_writer_failing_midway_leaves_the_previous_file(tmp_path, monkeypatch):
    path, before = _first_checkpoint(tmp_path)

    def broken(fp, records, **options):
        fp.write(b"PK\x03\x04 partial")
        raise OSError("disk full")

    monkeypatch.setattr(ember.serialization, "write_archive", broken)
    with pytest.raises(OSError, match="disk full"):
        ember.save({"w": ember.ones(3)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["ckpt.pt"]


def test_a_kill_midway_leaves_the_previous_file(tmp_path):
    path, before = _first_checkpoint(tmp_path)
    script = textwrap.dedent(f"""
        import os, sys, time
        import ember, ember.serialization as S
        real = S.write_archive
        def slow(fp, records, **options):
            fp.write(b"PK partial data")
            fp.flush()
            print("writing", flush=True)
            time.sleep(60)
        S.write_archive = slow
        ember.save({{"w": ember.ones(3)}}, {str(path)!r})
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout.readline() == b"writing\n"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert path.read_bytes() == before
    leftovers = [n for n in os.listdir(tmp_path) if n != "ckpt.pt"]
    assert all(n.startswith(".ckpt.pt.") and n.endswith(".tmp") for n in leftovers)


def test_a_new_file_gets_the_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    ember.save(1, tmp_path / "new.pt")
    assert stat.S_IMODE(os.stat(tmp_path / "new.pt").st_mode) == 0o666 & ~umask


def test_an_existing_file_keeps_its_permissions(tmp_path):
    path, _ = _first_checkpoint(tmp_path)
    os.chmod(path, 0o600)
    ember.save(2, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert ember.load(path) == 2


def test_saving_through_a_symlink_replaces_the_target(tmp_path):
    path, _ = _first_checkpoint(tmp_path)
    link = tmp_path / "latest.pt"
    link.symlink_to(path)
    ember.save(3, link)
    assert link.is_symlink() and ember.load(path) == 3


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(RuntimeError, match="Parent directory .* does not exist"):
        ember.save(1, tmp_path / "nope" / "x.pt")


def test_big_saves_start_the_disk_writes_every_step(tmp_path, monkeypatch):
    from ember.serialization import _atomic
    started = []
    monkeypatch.setattr(_atomic, "WRITEBACK_STEP", 4096)
    monkeypatch.setattr(_atomic, "_sync_file_range",
                        lambda: lambda fd, offset, nbytes, flags: started.append(offset))
    x = ember.arange(10_000, dtype=ember.float32)          # one 40 000-byte record
    ember.save({"x": x}, tmp_path / "x.pt")
    size = os.path.getsize(tmp_path / "x.pt")
    assert started[0] == 0 and len(started) >= size // 4096 - 1
    assert all(4096 <= b - a < 2 * 4096 for a, b in zip(started, started[1:]))
    assert ember.equal(ember.load(tmp_path / "x.pt")["x"], x)


def test_saves_work_without_sync_file_range(tmp_path, monkeypatch):
    from ember.serialization import _atomic
    monkeypatch.setattr(_atomic, "WRITEBACK_STEP", 4096)
    monkeypatch.setattr(_atomic, "_sync_file_range", lambda: None)
    x = ember.arange(10_000, dtype=ember.float32)
    ember.save({"x": x}, tmp_path / "x.pt")
    ember.save({"x": x}, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    assert ember.equal(ember.load(tmp_path / "x.pt")["x"], x)
    assert ember.equal(ember.load(tmp_path / "old.pt", weights_only=False)["x"], x)
