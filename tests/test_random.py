"""Random sampling: reproducible under manual_seed, right shapes, dtypes and ranges."""

import math

import numpy as np
import pytest

import ember


def test_manual_seed_reproduces_streams():
    ember.manual_seed(123)
    a = ember.rand(5).tolist(), ember.randn(3).tolist(), ember.randint(0, 10, (4,)).tolist()
    ember.manual_seed(123)
    b = ember.rand(5).tolist(), ember.randn(3).tolist(), ember.randint(0, 10, (4,)).tolist()
    assert a == b
    assert ember.initial_seed() == 123


def test_generator_objects_are_independent():
    g1 = ember.Generator().manual_seed(7)
    g2 = ember.Generator().manual_seed(7)
    ember.manual_seed(0)
    ember.rand(10)                      # the default generator does not affect g1/g2
    assert ember.rand(3, generator=g1).tolist() == ember.rand(3, generator=g2).tolist()


def test_generator_state_round_trip():
    g = ember.Generator().manual_seed(5)
    state = g.get_state()
    assert state.dtype is ember.uint8
    first = ember.randn(4, generator=g).tolist()
    g.set_state(state)
    assert ember.randn(4, generator=g).tolist() == first
    s = ember.get_rng_state()
    x = ember.rand(2).tolist()
    ember.set_rng_state(s)
    assert ember.rand(2).tolist() == x


def test_shapes_dtypes_and_ranges():
    ember.manual_seed(0)
    r = ember.rand(1000)
    assert r.dtype is ember.float32 and 0 <= r.numpy().min() and r.numpy().max() < 1
    assert ember.rand(2, 3, dtype=ember.float64).dtype is ember.float64
    n = ember.randn(20000).numpy()
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    i = ember.randint(3, 7, (1000,))
    assert i.dtype is ember.int64 and set(i.tolist()) == {3, 4, 5, 6}
    assert ember.randint(5, (3,)).numpy().max() < 5
    p = ember.randperm(10)
    assert sorted(p.tolist()) == list(range(10)) and p.dtype is ember.int64
    assert ember.rand(2, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        ember.rand(2, dtype=ember.int64)


def test_normal_forms():
    ember.manual_seed(0)
    x = ember.normal(2.0, 0.5, size=(20000,)).numpy()
    assert abs(x.mean() - 2) < 0.02 and abs(x.std() - 0.5) < 0.02
    m = ember.zeros(3)
    s = ember.tensor([1.0, 0.0, 2.0])
    y = ember.normal(m, s)
    assert y.shape == (3,) and y.tolist()[1] == 0.0
    assert ember.normal(ember.ones(2), 1.0).shape == (2,)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        ember.normal(0.0, -1.0, size=(2,))


def test_bernoulli_and_multinomial():
    ember.manual_seed(0)
    b = ember.bernoulli(ember.full((10000,), 0.3))
    assert set(np.unique(b.numpy())) <= {0.0, 1.0} and abs(b.numpy().mean() - 0.3) < 0.02
    assert ember.bernoulli(ember.zeros(5)).tolist() == [0.0] * 5
    with pytest.raises(RuntimeError):
        ember.bernoulli(ember.tensor([1.5]))
    w = ember.tensor([0.0, 1.0, 0.0, 3.0])
    draws = ember.multinomial(w, 1000, replacement=True).numpy()
    assert set(draws) <= {1, 3} and 0.65 < (draws == 3).mean() < 0.85
    no_rep = ember.multinomial(ember.ones(2, 5), 5)
    assert no_rep.shape == (2, 5) and sorted(no_rep.tolist()[0]) == [0, 1, 2, 3, 4]
    with pytest.raises(RuntimeError, match="without replacement"):
        ember.multinomial(ember.ones(3), 4)


def test_in_place_samplers():
    ember.manual_seed(0)
    t = ember.empty(1000)
    assert t.uniform_(-2, 3) is t and -2 <= t.numpy().min() and t.numpy().max() < 3
    assert t._version == 1
    t.normal_(5, 0.1)
    assert abs(t.numpy().mean() - 5) < 0.05
    i = ember.empty(100, dtype=ember.int64).random_(0, 3)
    assert set(i.tolist()) == {0, 1, 2}
    assert set(ember.empty(50).bernoulli_(0.5).tolist()) == {0.0, 1.0}
    assert ember.empty(100).exponential_().numpy().min() >= 0
    w = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.uniform_()
    with ember.no_grad():
        w.uniform_()


def test_multinomial_bad_weights_errors_depend_on_the_kernel_as_pytorch():
    def message(weights, n, replacement):
        with pytest.raises(RuntimeError) as info:
            ember.multinomial(ember.tensor(weights), n, replacement=replacement)
        return str(info.value)
    generic = "probability tensor contains either `inf`, `nan` or element < 0"
    assert message([-1.0, 1.0], 1, True) == generic
    assert message([-1.0, 1.0], 2, False) == generic
    assert message([1.0, -1.0], 3, True) == ("invalid multinomial distribution (encountering "
                                             "probability entry < 0)")
    assert message([float("nan"), 1.0], 3, True).endswith("entry < 0)")
    assert message([float("inf"), 1.0], 3, True).endswith("entry = infinity or NaN)")


def test_in_place_samplers_refuse_dtypes_pytorch_has_no_kernel_for():
    cases = [("normal_", (), ember.int64, '"normal_kernel_cpu" not implemented for \'Long\''),
             ("log_normal_", (), ember.bool, '"log_normal_cpu" not implemented for \'Bool\''),
             ("log_normal_", (), ember.complex64,
              '"log_normal_cpu" not implemented for \'ComplexFloat\''),
             ("geometric_", (0.5,), ember.bool, '"geometric_cpu" not implemented for \'Bool\'')]
    for name, args, dtype, message in cases:
        with pytest.raises(NotImplementedError) as info:
            getattr(ember.empty(3, dtype=dtype), name)(*args)
        assert str(info.value) == message
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        ember.empty(3, dtype=ember.int64).normal_(0, -1)       # arguments are checked first
    assert ember.empty(3, dtype=ember.complex64).normal_().dtype == ember.complex64
    assert ember.empty(50, dtype=ember.int8).geometric_(0.5).numpy().min() >= 1


def test_like_samplers():
    x = ember.zeros(2, 3, dtype=ember.float64)
    assert ember.rand_like(x).dtype is ember.float64 and ember.randn_like(x).shape == (2, 3)
    assert ember.randint_like(x, 5).dtype is ember.float64


def test_binomial_counts_successes():
    ember.manual_seed(0)
    draws = ember.binomial(ember.full((2000,), 10.0), ember.tensor([0.3]))
    assert draws.dtype == ember.float32 and draws.shape == (2000,)
    assert 0 <= draws.min().item() and draws.max().item() <= 10
    assert abs(draws.mean().item() - 3.0) < 0.15
    certain = ember.binomial(ember.tensor([4.0, 0.0]), ember.tensor([1.0, 1.0]))
    assert certain.tolist() == [4.0, 0.0]
    with pytest.raises(ValueError, match="binomial only supports floating-point dtypes for "
                                         "count, got: Long"):
        ember.binomial(ember.tensor([10]), ember.tensor([0.5]))


def test_binomial_outside_its_domain_gives_pytorchs_values():
    # no error: 0 for a count or probability <= 0, the count for a probability >= 1, NaN for
    # a NaN probability (PyTorch's own sampler never returns for a NaN count; ember gives it)
    nan = float("nan")
    count = ember.tensor([5.0, 5.0, -1.0, 2.5, 2.0, -2.0, nan, nan, float("inf")])
    prob = ember.tensor([-0.5, 1.5, 0.5, 1.0, nan, nan, 1.0, 0.0, 0.0])
    got = ember.binomial(count, prob).tolist()
    assert got[:4] == [0.0, 5.0, 0.0, 2.5] and math.isnan(got[4]) and got[5] == 0.0
    assert math.isnan(got[6]) and got[7:] == [0.0, 0.0]


@pytest.mark.parametrize("count, prob, error, message", [
    (ember.ones(2, dtype=ember.float64), ember.ones(2), RuntimeError,
     "Found dtype Float but expected Double"),
    (ember.ones(3), ember.ones(2), RuntimeError,
     "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0"),
    (ember.ones(2, dtype=ember.float16), ember.ones(2, dtype=ember.float16), NotImplementedError,
     "\"binomial_cpu\" not implemented for 'Half'"),
])
def test_binomial_errors(count, prob, error, message):
    with pytest.raises(error) as info:
        ember.binomial(count, prob)
    assert str(info.value) == message


def test_samples_of_0_dim_parameters_are_0_dim_tensors():
    ember.manual_seed(0)
    for sample in (ember.poisson(ember.tensor(3.)), ember.bernoulli(ember.tensor(0.5)),
                   ember.binomial(ember.tensor(5.), ember.tensor(0.5))):
        assert sample.shape == () and (sample + 1).shape == ()


def test_seed_and_state_errors_as_pytorch():
    with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
        ember.manual_seed(2 ** 64)
    assert ember.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    with pytest.raises(TypeError, match="^RNG state must be a torch.ByteTensor$"):
        ember.set_rng_state(ember.zeros(5))
    with pytest.raises(RuntimeError, match="^Expected a CPUGeneratorImplState of size 5056 "):
        ember.set_rng_state(ember.zeros(5, dtype=ember.uint8))
    with pytest.raises(RuntimeError, match="^Invalid mt19937 state$"):
        ember.set_rng_state(ember.zeros(5056, dtype=ember.uint8))
    with pytest.raises(TypeError, match="expected a torch.ByteTensor, but got list"):
        ember.Generator().set_state([1, 2])


def test_sampler_argument_and_dtype_errors_as_pytorch():
    cases = [
        (lambda: ember.rand(2, dtype=ember.int64), NotImplementedError,
         '"check_uniform_bounds" not implemented for \'Long\''),
        (lambda: ember.empty(2, dtype=ember.int64).uniform_(), NotImplementedError,
         '"check_uniform_bounds" not implemented for \'Long\''),
        (lambda: ember.empty(2).uniform_(2, 1), RuntimeError,
         "uniform_ expects to return a [from, to) range, but found from=2 > to=1"),
        (lambda: ember.empty(2).random_(5, 2), RuntimeError,
         "random_ expects 'from' to be less than 'to', but got from=5 >= to=2"),
        (lambda: ember.normal(0.0, -1.0, (2,)), RuntimeError,
         "normal expects std >= 0.0, but found std -1"),
        (lambda: ember.empty(2).normal_(0, -0.5), RuntimeError,
         "normal expects std >= 0.0, but found std -0.5"),
        (lambda: ember.bernoulli(ember.full((2,), 1.5)), RuntimeError,
         "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
         "message be improved?  If so, please report an enhancement request to PyTorch.)"),
        (lambda: ember.bernoulli(ember.ones(2, dtype=ember.int64)), NotImplementedError,
         '"bernoulli_tensor_cpu_p_" not implemented for \'Long\''),
        (lambda: ember.bernoulli(ember.zeros(2, dtype=ember.complex64)), NotImplementedError,
         '"bernoulli_tensor_cpu_self_" not implemented for \'ComplexFloat\''),
        (lambda: ember.zeros(2, dtype=ember.complex128).bernoulli_(0.5), NotImplementedError,
         '"bernoulli_scalar_cpu_" not implemented for \'ComplexDouble\''),
        (lambda: ember.zeros(2).bernoulli_(ember.zeros(2, dtype=ember.complex64)),
         NotImplementedError, '"bernoulli_tensor_cpu_p_" not implemented for \'ComplexFloat\''),
        (lambda: ember.zeros(2, dtype=ember.complex64).exponential_(), RuntimeError,
         "Exponential distribution is a continuous probability distribution. dtype must be a "
         "floating point but you specified ComplexFloat"),
        (lambda: ember.zeros(2, dtype=ember.complex128).cauchy_(), RuntimeError,
         "Cauchy distribution is a continuous probability distribution. dtype must be a "
         "floating point but you specified c10::complex<double>"),
        (lambda: ember.randperm(3, dtype=ember.complex64), NotImplementedError,
         '"randperm" not implemented for \'ComplexFloat\''),
        (lambda: ember.multinomial(ember.tensor([1, 2]), 1), RuntimeError,
         "multinomial only supports floating-point dtypes for input, got: Long"),
        (lambda: ember.empty(2).geometric_(1.0), RuntimeError,
         "geometric_ expects p to be in (0, 1), but got p=1"),
        (lambda: ember.empty(2).exponential_(-1), RuntimeError,
         "exponential_ expects lambda > 0.0, but found lambda=-1"),
        (lambda: ember.empty(2, dtype=ember.int64).exponential_(), RuntimeError,
         "Exponential distribution is a continuous probability distribution. dtype must be a "
         "floating point but you specified Long"),
        (lambda: ember.empty(2, dtype=ember.int64).cauchy_(), RuntimeError,
         "Cauchy distribution is a continuous probability distribution. dtype must be a "
         "floating point but you specified long int"),
        (lambda: ember.empty(2).log_normal_(1, 0), RuntimeError,
         "log_normal_ expects std > 0.0, but found std=0"),
        (lambda: ember.poisson(ember.ones(2, dtype=ember.int64)), NotImplementedError,
         '"poisson_cpu" not implemented for \'Long\''),
        (lambda: ember.poisson(-ember.ones(2)), RuntimeError,
         "invalid Poisson rate, expected rate to be non-negative"),
    ]
    for call, error, message in cases:
        with pytest.raises(error) as info:
            call()
        assert str(info.value) == message
    assert ember.bernoulli(ember.ones(2, dtype=ember.int64), p=1.0).tolist() == [1, 1]
    assert ember.empty(2).uniform_(1, 1).tolist() == [1.0, 1.0]


def test_multinomial_without_replacement_runs_into_zero_weights():
    # PyTorch draws the positive categories first, then those of weight 0 (no error)
    ember.manual_seed(0)
    for _ in range(20):
        got = ember.multinomial(ember.tensor([0.0, 10.0, 0.0, 5.0]), 4).tolist()
        assert sorted(got[:2]) == [1, 3] and sorted(got) == [0, 1, 2, 3]


def test_generator_argument_must_be_a_generator():
    for draw in (lambda: ember.randperm(4, generator=3), lambda: ember.rand(2, generator="x"),
                 lambda: ember.empty(3).normal_(generator=3)):
        with pytest.raises(TypeError, match="argument 'generator' must be torch.Generator, "
                                            "not (int|str)"):
            draw()


@pytest.mark.parametrize("low, high, dtype, message", [
    (0, 300, ember.uint8, "to - 1 is out of bounds for unsigned char"),
    (-1, 3, ember.uint8, "from is out of bounds for unsigned char"),
    (0, 5, ember.bool, "to - 1 is out of bounds for bool"),
    (-300, 5, ember.int8, "from is out of bounds for signed char"),
    (0, 2 ** 40, ember.int32, "to - 1 is out of bounds for int"),
    (0, 2 ** 20, ember.float16, r"to - 1 is out of bounds for c10::Half"),
])
def test_randint_refuses_bounds_the_dtype_cannot_hold(low, high, dtype, message):
    with pytest.raises(RuntimeError, match=message):
        ember.randint(low, high, (3,), dtype=dtype)


def test_random_bounds_checks_keep_full_ranges_and_cover_random_():
    assert ember.randint(0, 256, (50,), dtype=ember.uint8).dtype is ember.uint8
    assert ember.randint(-128, 128, (50,), dtype=ember.int8).dtype is ember.int8
    assert ember.empty(4, dtype=ember.uint8).random_().dtype is ember.uint8
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for unsigned char"):
        ember.empty(2, dtype=ember.uint8).random_(0, 300)
    with pytest.raises(RuntimeError, match="check_random_bounds handles only integral"):
        ember.randint(0, 3, (2,), dtype=ember.complex64)
    with pytest.raises(RuntimeError, match=r"Trying to create tensor with negative dimension "
                                           r"-1: \[-1\]"):
        ember.randperm(-1)


@pytest.mark.parametrize("seed", [True, 2.0, "3", None])
def test_generator_manual_seed_takes_only_integers(seed):
    with pytest.raises(RuntimeError,
                       match=f"^manual_seed expected a long, but got {type(seed).__name__}$"):
        ember.Generator().manual_seed(seed)
    with pytest.raises(RuntimeError, match="^manual_seed expected a long, but got Tensor$"):
        ember.Generator().manual_seed(ember.tensor(4))


def test_module_manual_seed_converts_with_int():
    ember.manual_seed(1.5)
    assert ember.initial_seed() == 1
    ember.manual_seed("7")
    assert ember.initial_seed() == 7


def test_cpu_state_of_the_wrong_size_refused_even_when_readable():
    state = ember.Generator().get_state()
    with pytest.raises(RuntimeError, match="^Expected a CPUGeneratorImplState of size 5056 but "
                                           "found the input RNG state size to be 5055$"):
        ember.Generator().set_state(state[:-1])
