"""Round 32: functorch and layout leftovers against torch 2.13 -- second derivatives through a
reflect/replicate/circular pad (jacrev(jacrev), hessian, jacfwd(jacrev)); the memory layout of
the pooling family's outputs and input gradients (channels_last in 2-D, channels_last_3d where
PyTorch's 3-D kernels keep it, a channels-innermost 3-D input in 1-D); resize_, resize_as_ and
detach_ under vmap. Each program runs with ember and with torch; values, strides, warnings and
error messages are compared."""

import warnings

import numpy as np
import pytest

import ember
from tests.parity._programs import plain

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity


def _outcome(lib, program):
    """``program(lib)``'s value or error, and the vmap fallback warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = "ok", plain(program(lib))
        except Exception as e:      # (both libraries' errors are compared, named alike)
            result = type(e).__name__, str(e).replace("ember/", "torch/")
    shown = [str(w.message).split(" (Triggered internally")[0] for w in caught
             if "performance drop" in str(w.message)]
    return result, shown


def _same(program):
    ours, theirs = _outcome(ember, program), _outcome(torch, program)
    assert ours == theirs


# --- 1. second derivatives through a non-constant pad ------------------------------------------

PADS = [((2, 3, 5), (2, 1)), ((3, 5), (1, 2)), ((1, 2, 4, 5), (2, 1, 1, 0)),
        ((2, 4, 5), (0, 1, 2, 1)), ((1, 1, 3, 3, 4), (1, 1, 0, 2, 1, 0))]


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", PADS)
@pytest.mark.parametrize("transform", ["jacrev2", "hessian", "jacfwd_jacrev"])
def test_second_derivatives_through_pad(shape, pad, mode, transform):
    x = np.random.default_rng(len(shape)).standard_normal(shape)

    def program(lib):
        F, fn = lib.nn.functional, lib.func

        def f(t):
            return F.pad(t, pad, mode=mode).sin().sum()
        g = {"jacrev2": lambda: fn.jacrev(fn.jacrev(f)), "hessian": lambda: fn.hessian(f),
             "jacfwd_jacrev": lambda: fn.jacfwd(fn.jacrev(f))}[transform]()
        return g(lib.tensor(x))
    _same(program)


# --- 2. pooling layouts --------------------------------------------------------------------------

def _pools(lib, k):
    F = lib.nn.functional
    return {
        "avg": lambda t: getattr(F, f"avg_pool{k}d")(t, 2),
        "avg_overlap": lambda t: getattr(F, f"avg_pool{k}d")(t, 3, stride=1, padding=1),
        "max": lambda t: getattr(F, f"max_pool{k}d")(t, 2),
        "max_indices": lambda t: getattr(F, f"max_pool{k}d")(t, 2, return_indices=True),
        "adaptive_avg": lambda t: getattr(F, f"adaptive_avg_pool{k}d")(t, 4),
        "adaptive_avg_one": lambda t: getattr(F, f"adaptive_avg_pool{k}d")(t, 1),
        "adaptive_max": lambda t: getattr(F, f"adaptive_max_pool{k}d")(t, 4),
        "adaptive_max_one": lambda t: getattr(F, f"adaptive_max_pool{k}d")(t, 1),
        "lp": lambda t: getattr(F, f"lp_pool{k}d")(t, 2.0, 2),
    }


def _input(lib, k, layout, requires_grad):
    shape = {1: (2, 6, 3), 2: (2, 3, 6, 6), 3: (2, 3, 6, 6, 6)}[k]
    x = lib.tensor(np.random.default_rng(k).standard_normal(shape))
    if k == 1:
        x = x.transpose(1, 2) if layout == "channels_last" else x.transpose(1, 2).contiguous()
    elif layout == "channels_last":
        x = x.contiguous(memory_format=lib.channels_last if k == 2 else lib.channels_last_3d)
    return x.requires_grad_(requires_grad)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("name", ["avg", "avg_overlap", "max", "max_indices", "adaptive_avg",
                                  "adaptive_avg_one", "adaptive_max", "adaptive_max_one", "lp"])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("grad", ["none", "backward", "create_graph"])
def test_pooling_output_and_gradient_strides(k, name, layout, grad):
    def program(lib):
        x = _input(lib, k, layout, grad != "none")
        out = _pools(lib, k)[name](x)
        y = out[0] if isinstance(out, tuple) else out
        seen = [y.stride(), y]
        if isinstance(out, tuple):
            seen.append(out[1].stride())
        if grad != "none":
            (g,) = lib.autograd.grad(y.pow(2).sum(), x, create_graph=grad == "create_graph")
            seen += [g.stride(), g]
            if grad == "create_graph" and g.requires_grad:
                (gg,) = lib.autograd.grad(g.pow(2).sum(), x)
                seen += [gg.stride(), gg]
        return seen
    _same(program)


def test_max_pool1d_without_grad_is_row_major_with_grad_under_no_grad():
    def program(lib):
        x = _input(lib, 1, "channels_last", True)
        with lib.no_grad():
            off = lib.nn.functional.max_pool1d(x, 2).stride()
        return [off, lib.nn.functional.max_pool1d(x, 2).stride(),
                lib.nn.functional.max_pool1d(x.detach(), 2).stride()]
    _same(program)


def test_max_pool1d_of_a_forward_mode_tangent_takes_the_kernel_with_indices():
    # (PyTorch's own 1-D kernel, row-major, only runs with no tangent: jvp and make_dual keep
    # the channels-innermost layout, as with grad)
    def program(lib):
        x = _input(lib, 1, "channels_last", False)
        seen = []

        def f(t):
            y = lib.nn.functional.max_pool1d(t, 2)
            seen.append(y.stride())
            return y
        out, tangent = lib.func.jvp(f, (x,), (lib.ones_like(x),))
        fwd = lib.autograd.forward_ad
        with fwd.dual_level():
            y = lib.nn.functional.max_pool1d(fwd.make_dual(x, lib.ones_like(x)), 2)
            dual = [y.stride(), fwd.unpack_dual(y).tangent.stride(), y]
        return [seen, out.stride(), tangent.stride(), out, tangent] + dual
    _same(program)


UPSAMPLING = {1: ["nearest", "linear", "area"], 2: ["nearest", "nearest-exact", "bilinear",
                                                     "bicubic", "area"],
              3: ["nearest", "trilinear", "area"]}


@pytest.mark.parametrize("k,mode", [(k, m) for k in UPSAMPLING for m in UPSAMPLING[k]])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("grad_layout", ["contiguous", "channels_last"])
def test_interpolate_output_and_gradient_strides(k, mode, layout, grad_layout):
    """The upsampling backwards lay the gradient out as the incoming one (area's, adaptive
    pooling's, as the input: not matched yet, so only its values are compared)."""
    def program(lib):
        x = _input(lib, k, layout, True)
        y = lib.nn.functional.interpolate(x, scale_factor=2 if mode != "area" else 0.5,
                                          mode=mode)
        go = lib.ones(y.shape, dtype=y.dtype)
        if grad_layout == "channels_last":
            go = go.transpose(1, 2).contiguous().transpose(1, 2) if k == 1 else go.contiguous(
                memory_format=lib.channels_last if k == 2 else lib.channels_last_3d)
        (g,) = lib.autograd.grad(y, x, go)
        return [y.stride(), y, g, None if mode == "area" else g.stride()]
    _same(program)


# --- 3. resize_, resize_as_ and detach_ under vmap ---------------------------------------------

VMAPPED = {
    "resize_same": lambda lib: lambda v: v.clone().resize_(3),
    "resize_smaller": lambda lib: lambda v: v.clone().resize_(2),
    "resize_2d": lambda lib: lambda v: v.clone().resize_(1, 3),
    "resize_tuple": lambda lib: lambda v: v.clone().resize_((3, 1)),
    "resize_empty": lambda lib: lambda v: v.clone().resize_(0),
    "resize_contiguous": lambda lib: lambda v: v.clone().resize_(
        2, memory_format=lib.contiguous_format),
    "resize_channels_last": lambda lib: lambda v: v.clone().resize_(
        1, 1, 1, 3, memory_format=lib.channels_last),
    "resize_view": lambda lib: lambda v: v.view(3).resize_(2),
    "resize_unbatched": lambda lib: lambda v: lib.zeros(4).resize_(v.shape) + v,
    "resize_requires_grad": lambda lib: lambda v: v.resize_(2),
    "resize_as_smaller": lambda lib: lambda v: v.clone().resize_as_(lib.zeros(2)),
    "resize_as_same": lambda lib: lambda v: v.clone().resize_as_(lib.zeros(3)),
    "detach_clone": lambda lib: lambda v: v.clone().detach_(),
    "detach_product": lambda lib: lambda v: (v * 2).detach_(),
    "detach_input": lambda lib: lambda v: v.detach_(),
    "detach_unbatched": lambda lib: lambda v: lib.zeros(3).detach_() + v,
}


@pytest.mark.parametrize("name", sorted(VMAPPED))
def test_vmapped_resize_and_detach(name):
    def program(lib):
        x = lib.arange(6.0).reshape(2, 3)
        if name == "resize_requires_grad":
            x.requires_grad_()
        return lib.func.vmap(VMAPPED[name](lib))(x)
    _same(program)


def test_vmapped_resize_of_an_input_resizes_it():
    def program(lib):
        x = lib.arange(6.0).reshape(2, 3)
        out = lib.func.vmap(lambda v: v.resize_(2))(x)
        return [tuple(x.shape), out, x]
    _same(program)


@pytest.mark.parametrize("what", ["resize", "resize_as", "detach"])
def test_nested_vmap_resize_and_detach(what):
    def program(lib):
        f = {"resize": lambda v: v.clone().resize_(2),
             "resize_as": lambda v: v.clone().resize_as_(lib.zeros(2)),
             "detach": lambda v: v.clone().detach_()}[what]
        return lib.func.vmap(lib.func.vmap(f))(lib.arange(24.0).reshape(3, 2, 4))
    _same(program)


@pytest.mark.parametrize("case", ["slice", "view", "reshape", "expand", "unbind", "detached"])
def test_detach_of_a_view_raises_without_grad(case):
    def program(lib):
        x = lib.zeros(2, 3)
        t = {"slice": lambda: x[:1], "view": lambda: x.view(6), "reshape": lambda: x.reshape(6),
             "expand": lambda: x[0].expand(2, 3), "unbind": lambda: x.unbind(0)[0],
             "detached": lambda: x.detach()}[case]()
        return t.detach_()
    _same(program)
