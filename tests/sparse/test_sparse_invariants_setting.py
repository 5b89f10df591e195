"""``sparse.check_sparse_tensor_invariants``: the setting it records, and PyTorch's warning
from sparse constructors until a program chooses one."""

import warnings

import pytest

import ember
from ember.sparse import _invariants

IMPLICIT = "Sparse invariant checks are implicitly disabled."


@pytest.fixture
def unchosen(monkeypatch):
    """A process in which no program has chosen the setting yet."""
    monkeypatch.setattr(_invariants.check_sparse_tensor_invariants, "_enabled", [False])
    monkeypatch.setattr(_invariants.check_sparse_tensor_invariants, "_chosen", [False])


def _warnings_of(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make()
    return [str(w.message) for w in caught]


def _coo(**kwargs):
    return ember.sparse_coo_tensor(ember.tensor([[0, 2]]), ember.tensor([1.0, 2.0]), (3,),
                                   **kwargs)


def test_constructors_warn_once_until_a_setting_is_chosen(unchosen):
    first = _warnings_of(_coo)
    assert len(first) == 1 and first[0].startswith(IMPLICIT)
    assert _warnings_of(_coo) == []                                 # once a process
    assert _coo().to_dense().tolist() == [1.0, 0.0, 2.0]


@pytest.mark.parametrize("make", [
    lambda: ember.sparse_csr_tensor(ember.tensor([0, 1]), ember.tensor([0]), ember.tensor([1.0]),
                                    (1, 1)),
    lambda: ember.sparse_compressed_tensor(ember.tensor([0, 1]), ember.tensor([0]),
                                           ember.tensor([1.0]), (1, 1), layout=ember.sparse_csc),
])
def test_compressed_constructors_warn_before_the_beta_warning(unchosen, make):
    messages = _warnings_of(make)
    assert messages[0].startswith(IMPLICIT) and "in beta state" in messages[1]


@pytest.mark.parametrize("make", [
    lambda: _coo(check_invariants=False),
    lambda: _coo(check_invariants=True),
    lambda: ember.zeros(2, 3, layout=ember.sparse_coo),
    lambda: ember.ones(3).to_sparse(),
    lambda: ember.nn.functional.embedding(ember.tensor([0]), ember.ones(2, 2, requires_grad=True),
                                          sparse=True).sum().backward(),
])
def test_explicit_choices_and_internal_constructions_do_not_warn(unchosen, make):
    assert not any(m.startswith(IMPLICIT) for m in _warnings_of(make))


@pytest.mark.parametrize("choose", [
    lambda: ember.sparse.check_sparse_tensor_invariants.enable(),
    lambda: ember.sparse.check_sparse_tensor_invariants.disable(),
    lambda: ember.sparse.check_sparse_tensor_invariants(False).__enter__(),
])
def test_choosing_a_setting_silences_the_warning(unchosen, choose):
    choose()
    assert _warnings_of(_coo) == []


def test_the_context_manager_restores_the_setting(unchosen):
    checks = ember.sparse.check_sparse_tensor_invariants
    with checks(True):
        assert checks.is_enabled()
    assert not checks.is_enabled()
    checks.enable()
    with checks(enable=False):
        assert not checks.is_enabled()
    assert checks.is_enabled()


def test_indices_are_checked_whatever_the_setting(unchosen):
    ember.sparse.check_sparse_tensor_invariants.disable()
    with pytest.raises(RuntimeError, match="size is inconsistent with indices"):
        ember.sparse_coo_tensor(ember.tensor([[5]]), ember.tensor([1.0]), (3,))
