"""``where`` with a uint8 condition warns as PyTorch does: once a process, or at every call
under set_warn_always (the warning used to sit in the cached dtype rule, so it came once per
dtype combination instead)."""

import warnings

import ember


def _calls():
    mask = ember.tensor([[1, 1, 0], [1, 0, 0]], dtype=ember.uint8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = ember.where(mask, ember.ones(2, 3, dtype=ember.float64), 0.0)
        b = ember.where(mask, ember.ones(2, 3), ember.zeros(2, 3))
        c = ember.where(mask[:, 1:2], 1.0, 0.0)
    assert a.tolist() == [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert b.tolist() == a.tolist()
    assert c.tolist() == [[1.0], [0.0]]
    return [str(w.message) for w in caught]


def test_uint8_condition_warns_once_a_process():
    messages = _calls()
    assert len(messages) == 1 and messages[0].startswith("where received a uint8 condition")
    assert _calls() == []


def test_uint8_condition_warns_every_call_under_warn_always():
    ember.set_warn_always(True)
    try:
        assert len(_calls()) == 3
    finally:
        ember.set_warn_always(False)
