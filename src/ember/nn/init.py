"""ember.nn.init: parameter initialization, in place and without recording gradients."""
