"""``torch._inductor.config``: the settings programs commonly change. They are kept and
change nothing, since ember compiles nothing; other names can be set as well."""

coordinate_descent_tuning = False
fx_graph_cache = True
max_autotune = False
freezing = False
epilogue_fusion = True


class triton:
    """Settings of the Triton code generation."""

    unique_kernel_names = False
    cudagraphs = False
    cudagraph_trees = True
