"""Samplers' and RNG state's argument checks, ``out=`` handling and errors, as PyTorch's."""

import pytest

import ember


def test_cpu_rng_state_has_pytorchs_fixed_size():
    sizes = set()
    for seed in (0, 7, 2 ** 64 - 1):
        ember.manual_seed(seed)
        ember.rand(3)
        sizes.add(tuple(ember.get_rng_state().shape))
    assert sizes == {(5056,)}
    state = ember.get_rng_state()
    first = ember.rand(4)
    ember.set_rng_state(state)
    assert ember.equal(first, ember.rand(4))


def test_short_rng_state_gives_pytorchs_size_error():
    with pytest.raises(RuntimeError, match="^Expected a CPUGeneratorImplState of size 5056 but "
                                           "found the input RNG state size to be 10$"):
        ember.set_rng_state(ember.get_rng_state()[:10])


def test_graphsafe_state_is_not_supported_on_cpu():
    g = ember.Generator()
    with pytest.raises(NotImplementedError, match="^graphsafe_get_state is not supported"):
        g.graphsafe_get_state()
    with pytest.raises(NotImplementedError, match="^graphsafe_set_state is not supported"):
        g.graphsafe_set_state(g)


@pytest.mark.parametrize("call,error,message", [
    (lambda: ember.randint(5, 3), TypeError,
     "randint(): argument 'size' (position 2) must be tuple of ints, not int"),
    (lambda: ember.normal(0.0, 1.0, 3), TypeError,
     "normal(): argument 'size' must be tuple of ints, not int"),
    (lambda: ember.randperm(129, dtype=ember.int8), RuntimeError,
     "value cannot be converted to type int8_t without overflow"),
    (lambda: ember.randperm(2050, dtype=ember.float16), RuntimeError,
     "n cannot be greater than 2049 for Half type."),
    (lambda: ember.randperm(3, dtype=ember.bool), NotImplementedError,
     "\"randperm\" not implemented for 'Bool'"),
    (lambda: ember.normal(ember.zeros(2), -1.0), RuntimeError,
     "normal expects std >= 0.0, but found std -1"),
    (lambda: ember.normal(0.0, float("nan"), (2,)), RuntimeError,
     "normal expects std >= 0.0, but found std nan"),
    (lambda: ember.normal(ember.zeros(2), ember.tensor([1.0, float("nan")])), RuntimeError,
     "normal expects all elements of std >= 0.0"),
    (lambda: ember.normal(ember.zeros(2, dtype=ember.long), ember.ones(2)), NotImplementedError,
     "\"normal_kernel_cpu\" not implemented for 'Long'"),
    (lambda: ember.normal(1.0, ember.ones(2, dtype=ember.long)), NotImplementedError,
     "\"normal_kernel_cpu\" not implemented for 'Long'"),
    (lambda: ember.normal(ember.zeros(2), ember.ones(3)), RuntimeError,
     "The size of tensor a (2) must match the size of tensor b (3) at non-singleton "
     "dimension 0"),
    (lambda: ember.rand(2, out=ember.empty(2, dtype=ember.long)), NotImplementedError,
     "\"check_uniform_bounds\" not implemented for 'Long'"),
    (lambda: ember.rand(2, dtype=ember.float32, out=ember.empty(2, dtype=ember.float64)),
     RuntimeError, "dtype Float does not match dtype of out parameter (Double)"),
    (lambda: ember.multinomial(ember.ones(3), 2, out=ember.empty(2, dtype=ember.int32)),
     RuntimeError, "multinomial expects Long tensor out, got: Int"),
])
def test_sampler_errors_as_pytorch(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_randperm_fills_the_narrowest_dtypes_that_fit():
    assert sorted(ember.randperm(128, dtype=ember.int8).tolist()) == list(range(128))
    assert sorted(ember.randperm(256, dtype=ember.uint8).tolist()) == list(range(256))


@pytest.mark.parametrize("make,dtype", [
    (lambda o: ember.rand(2, out=o), ember.float64),
    (lambda o: ember.randn(2, out=o), ember.float64),
    (lambda o: ember.randint(0, 5, (2,), out=o), ember.int32),
    (lambda o: ember.randint(0, 5, (2,), out=o), ember.float64),
    (lambda o: ember.randperm(2, out=o), ember.int32),
    (lambda o: ember.normal(0.0, 1.0, (2,), out=o), ember.float64),
    (lambda o: ember.normal(ember.zeros(2), ember.ones(2), out=o), ember.float64),
    (lambda o: ember.bernoulli(ember.full((2,), 0.5), out=o), ember.int64),
])
def test_sampler_out_keeps_its_dtype(make, dtype):
    out = ember.empty(2, dtype=dtype)
    assert make(out) is out and out.dtype is dtype and out.shape == (2,)


def test_normal_out_is_written_in_place():
    buf = ember.full((4,), 1000.0)
    view = buf[:2]
    ember.normal(0.0, 1.0, (4,), out=buf)
    assert bool((view.abs() < 100).all())
