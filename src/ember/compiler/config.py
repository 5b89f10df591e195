"""``torch.compiler.config``: settings a program may set; with no compiler they are kept
and change nothing."""

job_id = None
dynamic_shapes = True
