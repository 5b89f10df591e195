"""ember.nn.utils: gradient clipping, parameter vectors, parametrizations, RNN packing."""
