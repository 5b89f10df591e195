"""ember.hub: the download cache and local hubconf.py models."""

import hashlib
import zipfile

import pytest

import ember
from ember import hub


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    monkeypatch.setattr(hub, "_HUB_DIR", [None])
    return tmp_path


def test_the_cache_directory_follows_pytorch(home, monkeypatch):
    assert hub.get_dir() == str(home / "torch_home" / "hub")
    hub.set_dir(home / "elsewhere")
    assert hub.get_dir() == str(home / "elsewhere")
    monkeypatch.delenv("TORCH_HOME")
    monkeypatch.setattr(hub, "_HUB_DIR", [None])
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "xdg"))
    assert hub.get_dir() == str(home / "xdg" / "torch" / "hub")


def test_load_state_dict_from_url_downloads_once(home):
    source = home / "weights-abc.pt"
    ember.save({"w": ember.arange(3.0)}, source)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    named = home / f"weights-{digest[:8]}.pt"
    named.write_bytes(source.read_bytes())
    state = hub.load_state_dict_from_url(named.as_uri(), progress=False, check_hash=True)
    assert state["w"].tolist() == [0.0, 1.0, 2.0]
    cached = home / "torch_home" / "hub" / "checkpoints" / named.name
    assert cached.exists()
    named.unlink()                                  # read from the cache from now on
    assert hub.load_state_dict_from_url(named.as_uri(), progress=False)["w"].tolist() == \
        [0.0, 1.0, 2.0]


def test_a_bad_hash_leaves_nothing_behind(home):
    source = home / "weights-0000ffff.pt"
    ember.save({"w": ember.ones(2)}, source)
    with pytest.raises(RuntimeError, match='^invalid hash value .expected "0000ffff"'):
        hub.load_state_dict_from_url(source.as_uri(), progress=False, check_hash=True)
    assert list((home / "torch_home" / "hub" / "checkpoints").iterdir()) == []


def test_a_legacy_zipped_checkpoint_is_extracted(home):
    inner = home / "model.pt"
    ember.save({"w": ember.ones(2)}, inner)
    packed = home / "model.zip"
    with zipfile.ZipFile(packed, "w") as archive:
        archive.write(inner, "model.pt")
    state = hub.load_state_dict_from_url(packed.as_uri(), progress=False)
    assert state["w"].tolist() == [1.0, 1.0]


def test_models_from_a_local_hubconf(tmp_path):
    (tmp_path / "hubconf.py").write_text(
        "import ember\n\n\ndef tiny(width=2):\n    '''A tiny linear model.'''\n"
        "    return ember.nn.Linear(width, 1)\n")
    model = hub.load(str(tmp_path), "tiny", width=3, source="local")
    assert model.weight.shape == (1, 3)
    assert "tiny" in hub.list(str(tmp_path))
    assert hub.help(str(tmp_path), "tiny") == "A tiny linear model."
    with pytest.raises(RuntimeError, match="Cannot find callable missing in hubconf"):
        hub.load(str(tmp_path), "missing", source="local")
    with pytest.raises(RuntimeError, match="fetching GitHub repositories is not provided"):
        hub.load("owner/repo", "tiny")
    with pytest.raises(ValueError, match='Unknown source: "ftp"'):
        hub.load(str(tmp_path), "tiny", source="ftp")
