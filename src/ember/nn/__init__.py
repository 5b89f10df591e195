"""ember.nn: modules, parameters, layers and losses (``torch.nn``)."""

from ember.nn.parameter import Parameter
from ember.nn.modules import *  # noqa: F401,F403
from ember.nn.modules.module import Module
from ember.nn import attention, functional, grad, init, utils  # noqa: F401
from ember.nn import parallel  # noqa: F401
from ember.nn.parallel import DataParallel  # noqa: F401
from ember.nn._factory import factory_kwargs  # noqa: F401
