"""``torch._dynamo.config``: the settings programs commonly change. They are kept and change
nothing, since ember compiles nothing; other names can be set as well."""

cache_size_limit = 8
recompile_limit = 8
accumulated_cache_size_limit = 256
suppress_errors = False
verbose = False
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
optimize_ddp = True
automatic_dynamic_shapes = True
assume_static_by_default = True
