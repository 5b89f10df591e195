"""Layers call their functional form as it is when they run (nn.Dropout calls F.dropout), so a
``__torch_function__`` handler or a torch function mode sees ``dropout`` as in PyTorch."""

import ember
from ember import nn
from ember.overrides import TorchFunctionMode


class Logged(ember.Tensor):
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


class LoggingMode(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(func.__name__)
        return func(*args, **(kwargs or {}))


def _net():
    return nn.Sequential(nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.5), nn.ReLU()).eval()


def test_a_subclass_handler_sees_the_layers_functions():
    Logged.seen = []
    x = ember.arange(16.0).reshape(1, 1, 4, 4)
    out = _net()(x.as_subclass(Logged))
    assert Logged.seen == ["max_pool2d", "flatten", "dropout", "relu"]
    assert type(out) is Logged and out.tolist() == [[5.0, 7.0, 13.0, 15.0]]


def test_a_mode_sees_the_layers_functions():
    x = ember.arange(16.0).reshape(1, 1, 4, 4)
    with LoggingMode() as mode:
        out = _net()(x)
    assert mode.seen == ["max_pool2d", "flatten", "dropout", "relu"]
    assert out.tolist() == [[5.0, 7.0, 13.0, 15.0]]


def test_layer_classes_still_name_their_function():
    assert nn.Dropout._fn is nn.functional.dropout
    assert nn.MaxPool2d._function is nn.functional.max_pool2d
