"""ember.load reads files written by torch.save (fixtures made by tests/fixtures/)."""

import io

import numpy as np
import pytest

import ember
from tests.serialization._helpers import (
    FIXTURES, assert_tensor_equal, expected, fixture, lookup)

NAMES = ["model_state_dict", "optimizer_state", "nested", "legacy"]


def test_fixtures_were_made_by_pytorch_2():
    with open(f"{FIXTURES}/torch_version.txt") as f:
        assert f.read().startswith("2.")


@pytest.mark.parametrize("name,mmap", [(n, False) for n in NAMES]
                         + [(n, True) for n in NAMES if n != "legacy"])   # legacy: no mmap
def test_every_tensor_equals_the_recorded_values(name, mmap):
    obj = ember.load(fixture(name), mmap=mmap)
    want = expected(name)
    assert want
    for key, arr in want.items():
        assert_tensor_equal(lookup(obj, key), arr)


def test_views_load_as_views_of_one_storage():
    v = ember.load(fixture("nested"))["views"]
    v["base"][1, 2] = -7.0
    assert v["row"][2].item() == -7.0
    assert v["col"][1].item() == -7.0
    assert v["t"][2, 1].item() == -7.0
    assert v["strided"].stride() == (12, 3)
    assert v["expanded"].stride() == (0, 1)
    np.testing.assert_array_equal(v["expanded"].numpy(), np.tile(np.arange(3.0), (4, 1)))


def test_plain_objects_and_metadata():
    obj = ember.load(fixture("nested"))
    c = obj["containers"]
    assert type(c).__name__ == "OrderedDict" and list(c) == ["tuple", "list", "bytes",
                                                             "complex", "set"]
    assert c["tuple"] == (1, 2.5, "three", None, True)
    assert c["list"] == [[1, 2], {"k": "v"}]
    assert c["bytes"] == b"\x00\xff" and c["complex"] == 1 - 2j and c["set"] == {1, 2, 3}
    meta = obj["meta"]
    assert meta["dtype"] is ember.bfloat16
    assert meta["device"] == ember.device("cpu")
    assert meta["size"] == ember.Size([2, 3]) and type(meta["size"]) is ember.Size
    p = obj["param"]
    assert isinstance(p, ember.nn.Parameter) and p.requires_grad
    assert obj["odd"][0].shape == () and obj["odd"][0].item() == 2.5


def test_state_dict_loads_into_the_same_model():
    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = ember.nn.Conv2d(3, 4, 3)
            self.bn = ember.nn.BatchNorm2d(4)
            self.lstm = ember.nn.LSTM(4, 5, batch_first=True)
            self.head = ember.nn.Linear(5, 3)
            self.emb = ember.nn.Embedding(7, 4)

    sd = ember.load(fixture("model_state_dict"))
    assert sd._metadata[""] == {"version": 1}
    net = Net()
    net.load_state_dict(sd)
    want = expected("model_state_dict")
    np.testing.assert_array_equal(net.head.weight.detach().numpy(), want["head.weight"])
    assert net.bn.num_batches_tracked.item() == 1
    assert net.bn.num_batches_tracked.dtype is ember.int64


def test_optimizer_and_scheduler_states_load_into_ember():
    state = ember.load(fixture("optimizer_state"))
    assert state["epoch"] == 3
    params = [ember.nn.Parameter(ember.zeros(3, 2)), ember.nn.Parameter(ember.zeros(2))]
    opt = ember.optim.Adam(params, lr=0.5)
    opt.load_state_dict(state["adam"])
    group = opt.param_groups[0]
    assert group["betas"] == (0.8, 0.9) and group["weight_decay"] == 0.1
    assert group["lr"] == pytest.approx(0.005)
    assert opt.state[params[0]]["step"].item() == 3
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    sched.load_state_dict(state["scheduler"])
    assert sched.last_epoch == 3
    sgd = ember.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True)
    sgd.load_state_dict(state["sgd"])
    assert sgd.param_groups[0]["nesterov"] is True


def test_file_objects_and_bytes():
    with open(fixture("nested"), "rb") as f:
        a = ember.load(f)
    with open(fixture("nested"), "rb") as f:
        b = ember.load(io.BytesIO(f.read()))
    np.testing.assert_array_equal(a["views"]["t"].numpy(), b["views"]["t"].numpy())


class TestMapLocation:
    def test_cuda_saved_file_needs_a_map_location(self):
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA "
                                               "device but torch.cuda.is_available"):
            ember.load(fixture("cuda_saved"))

    @pytest.mark.parametrize("where", ["cpu", ember.device("cpu"), {"cuda:0": "cpu"},
                                       lambda storage, loc: storage,
                                       lambda storage, loc: storage.cpu()])
    def test_map_to_cpu(self, where):
        obj = ember.load(fixture("cuda_saved"), map_location=where)
        np.testing.assert_array_equal(obj["w"].numpy(), np.arange(6.0).reshape(2, 3))
        assert obj["i"].dtype is ember.int64 and obj["w"].device == ember.device("cpu")

    def test_callable_sees_the_saved_location(self):
        seen = []
        ember.load(fixture("cuda_saved"),
                   map_location=lambda storage, loc: seen.append(loc) or storage)
        assert seen == ["cuda:0", "cuda:0"]

    def test_callable_returning_none_restores_as_saved(self):
        with pytest.raises(RuntimeError, match="CUDA"):
            ember.load(fixture("cuda_saved"), map_location=lambda s, loc: None)

    def test_dict_without_the_location_restores_as_saved(self):
        with pytest.raises(RuntimeError, match="CUDA"):
            ember.load(fixture("cuda_saved"), map_location={"cuda:1": "cpu"})

    def test_bad_map_location(self):
        with pytest.raises(TypeError, match="map_location"):
            ember.load(fixture("nested"), map_location=3)
