"""A layer's functional form, looked up in ember.nn.functional when the layer runs."""

from ember.nn import functional as F

__all__ = ["functional_form"]


class functional_form:
    """Class attribute naming a function of ember.nn.functional (``_fn = functional_form("relu")``).

    Read at each call rather than bound when the class is made: ember installs guards that offer
    F.relu to ``__torch_function__`` handlers, and torch function modes their stand-ins, in the
    functional namespace after the layers exist; nn.ReLU must call what F.relu is then, as
    PyTorch's calls F.relu.
    """

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __get__(self, instance, owner=None):
        return getattr(F, self.name)
