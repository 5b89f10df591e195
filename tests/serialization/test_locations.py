"""torch.serialization's location registry (register_package) and its small helpers."""

import io
import os
import types
import warnings

import pytest

import ember
import ember.serialization as S
from ember.serialization import _locations


@pytest.fixture
def registry():
    """The location registry, restored after the test."""
    before = list(_locations._registry)
    yield _locations._registry
    _locations._registry[:] = before


def test_a_registered_restorer_runs_before_the_cpus_and_may_decline(registry):
    seen = []

    def restorer(storage, location):
        seen.append((storage.nbytes(), location))
        return None

    S.register_package(5, lambda storage: None, restorer)
    out = ember.load(io.BytesIO(_saved({"x": ember.arange(3.0)})))
    assert seen == [(12, "cpu")]
    assert out["x"].tolist() == [0.0, 1.0, 2.0]


def test_a_registered_restorer_after_the_cpus_is_not_asked_for_cpu_storages(registry):
    seen = []
    S.register_package(15, lambda storage: None, lambda s, loc: seen.append(loc))
    ember.load(io.BytesIO(_saved({"x": ember.arange(3.0)})))
    assert seen == []


def test_a_registered_tagger_names_the_location_saved(registry):
    S.register_package(1, lambda storage: "cpu:7", lambda storage, location: None)
    assert S.location_tag(ember.ones(2).untyped_storage()) == "cpu:7"
    data = _saved({"x": ember.ones(2)})
    assert b"cpu:7" in _pickle_of(data)


def test_register_package_refuses_what_it_cannot_call(registry):
    with pytest.raises(TypeError, match="must be callable"):
        S.register_package(1, "tagger", lambda s, loc: None)


def _saved(obj):
    buf = io.BytesIO()
    ember.save(obj, buf)
    return buf.getvalue()


def _pickle_of(data):
    import zipfile
    z = zipfile.ZipFile(io.BytesIO(data))
    return z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))


def test_validate_cuda_device():
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        S.validate_cuda_device("cpu")
    if not ember.cuda.is_available():
        with pytest.raises(RuntimeError, match="torch.cuda.is_available\\(\\) is False"):
            S.validate_cuda_device("cuda:0")
    with pytest.raises(RuntimeError, match="HPU device module is not registered"):
        S.validate_hpu_device("hpu:0")


def test_check_module_version_greater_or_equal():
    module = types.ModuleType("m")
    module.__version__ = "1.12.0"
    assert S.check_module_version_greater_or_equal(module, (1, 9))
    assert not S.check_module_version_greater_or_equal(module, (1, 13))
    module.__version__ = "1.2.x"
    with pytest.raises(RuntimeError, match="'m' module version string is malformed '1.2.x' "
                                           "and cannot be compared with tuple \\(1, 2, 3\\)"):
        S.check_module_version_greater_or_equal(module, (1, 2, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert S.check_module_version_greater_or_equal(module, (1, 2, 3), False)
    assert "continuing assuming that requirement is met" in str(caught[0].message)


def test_mkdtemp_removes_its_folder():
    with S.mkdtemp() as path:
        open(os.path.join(path, "f"), "w").close()
        assert os.path.isdir(path)
    assert not os.path.exists(path)


def test_storage_type_helpers():
    assert S.normalize_storage_type(ember.FloatStorage) is ember.FloatStorage
    assert S.storage_to_tensor_type(ember.ones(2, dtype=ember.float64).storage()) \
        is ember.DoubleTensor
    assert (S.LONG_SIZE, S.INT_SIZE, S.SHORT_SIZE) == (4, 4, 2)      # standard sizes
    assert S.PROTOCOL_VERSION == 1001 and S.STORAGE_KEY_SEPARATOR == ","
    assert "weights_only" in S.UNSAFE_MESSAGE
