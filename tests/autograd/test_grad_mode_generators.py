"""Grad-mode decorators on generator functions, and inference_mode(False) nesting."""

import ember


def leaf():
    return ember.ones(2, requires_grad=True)


def test_no_grad_decorator_applies_inside_a_generator_body_only():
    w = leaf()

    @ember.no_grad()
    def gen():
        got = yield ember.is_grad_enabled()
        yield got, (w * 2).requires_grad
        return "done"

    it = gen()
    assert next(it) is False and ember.is_grad_enabled()
    assert it.send(5) == (5, False) and ember.is_grad_enabled()
    try:
        next(it)
    except StopIteration as stop:
        assert stop.value == "done"
    assert gen.__name__ == "gen"


def test_enable_grad_and_inference_mode_decorate_generators():
    @ember.enable_grad()
    def on():
        while True:
            yield ember.is_grad_enabled()

    @ember.inference_mode()
    def infer():
        yield ember.is_inference_mode_enabled(), ember.ones(1).is_inference()

    with ember.no_grad():
        it = on()
        assert next(it) is True and not ember.is_grad_enabled()
        it.close()
    assert list(infer()) == [(True, True)] and not ember.is_inference_mode_enabled()


def test_exception_thrown_into_decorated_generator_runs_in_its_mode():
    @ember.no_grad()
    def gen():
        try:
            yield 1
        except ValueError as exc:
            yield str(exc), ember.is_grad_enabled()

    it = gen()
    next(it)
    assert it.throw(ValueError("boom")) == ("boom", False)
    assert ember.is_grad_enabled()


def test_inference_mode_false_enables_grad_even_inside_no_grad():
    w = leaf()
    with ember.no_grad():
        with ember.inference_mode(False):
            assert ember.is_grad_enabled() and (w * 2).requires_grad
        assert not ember.is_grad_enabled()
    with ember.inference_mode():
        with ember.inference_mode(False):
            assert ember.is_grad_enabled() and not ember.is_inference_mode_enabled()
        assert not ember.is_grad_enabled()
