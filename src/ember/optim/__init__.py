"""ember.optim: optimizers and learning-rate schedules (``torch.optim``)."""

from ember.optim.optimizer import Optimizer
from ember.optim.sgd import SGD
from ember.optim.adam import Adam, AdamW
