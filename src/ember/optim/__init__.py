"""ember.optim: optimizers and learning-rate schedules (``torch.optim``)."""

from ember.optim.optimizer import Optimizer
from ember.optim.adadelta import Adadelta
from ember.optim.adafactor import Adafactor
from ember.optim.adagrad import Adagrad
from ember.optim.adam import Adam, AdamW
from ember.optim.adamax import Adamax
from ember.optim.asgd import ASGD
from ember.optim.lbfgs import LBFGS
from ember.optim.muon import Muon
from ember.optim.nadam import NAdam
from ember.optim.radam import RAdam
from ember.optim.rmsprop import RMSprop
from ember.optim.rprop import Rprop
from ember.optim.sgd import SGD
from ember.optim.sparse_adam import SparseAdam
from ember.optim._swap import swap_in_optimizer_params_and_state
from ember.optim import lr_scheduler  # noqa: F401
from ember.optim import swa_utils  # noqa: F401
