"""Keyword names, ``out=`` and small public names an API-coverage audit compared with
PyTorch: the same calls are accepted (or refused) by both, with the same results."""

import numpy as np
import pytest

import ember
from tests.parity._compare import outcome

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.parity

_SQ = [[2.0, 1.0], [1.0, 3.0]]


def _outcome(fn):
    """The (first) result's values rounded to 4 places, or "TypeError"."""
    return outcome(fn, catch=TypeError, message=None, describe=_rounded)


def _rounded(result):
    """The (first) result as float64 values rounded to 4 places."""
    if isinstance(result, tuple):
        result = result[0]
    return np.round(np.asarray(result.detach().cpu() if hasattr(result, "detach") else result,
                               dtype=np.float64), 4).tolist()


def _calls(lib):
    sq, v = lib.tensor(_SQ), lib.tensor([3.0, 4.0])
    L = lib.linalg
    return {
        "cholesky(input=)": lambda: L.cholesky(input=sq),
        "cholesky(A=)": lambda: L.cholesky(A=sq),
        "eigvalsh(input=)": lambda: L.eigvalsh(input=sq),
        "matrix_norm(input=)": lambda: L.matrix_norm(input=sq),
        "norm(input=)": lambda: L.norm(input=sq),
        "norm(A=)": lambda: L.norm(A=sq),
        "pinv(input=)": lambda: L.pinv(input=sq),
        "matrix_power(input=)": lambda: L.matrix_power(input=sq, n=2),
        "vector_norm(input=)": lambda: L.vector_norm(input=v),
        "vector_norm(x=)": lambda: L.vector_norm(x=v),
        "lstsq(input=, b=)": lambda: L.lstsq(input=sq, b=sq).solution,
        "inv(A=)": lambda: L.inv(A=sq),
        "searchsorted(input=)": lambda: lib.searchsorted(v, input=lib.tensor([3.5])),
        "searchsorted(values=)": lambda: lib.searchsorted(v, values=lib.tensor([3.5])),
        "conj_physical(out=)": lambda: lib.conj_physical(v, out=lib.empty(2)),
        "narrow_copy(out=)": lambda: lib.narrow_copy(sq, 1, 0, 1, out=lib.empty(0)),
        "new_full(pin_memory=)": lambda: v.new_full((2,), 1.0, pin_memory=False),
        "from_dlpack(copy=)": lambda: lib.from_dlpack(v, device="cpu", copy=True),
    }


def test_same_calls_are_accepted_with_the_same_results():
    ours = {k: _outcome(f) for k, f in _calls(ember).items()}
    theirs = {k: _outcome(f) for k, f in _calls(torch).items()}
    assert ours == theirs


def test_matrix_exp_float32():
    ours = ember.linalg.matrix_exp(ember.tensor(_SQ)).numpy()
    np.testing.assert_allclose(ours, torch.linalg.matrix_exp(torch.tensor(_SQ)).numpy(),
                               rtol=5e-6)


def test_result_type_keywords():
    assert str(ember.result_type(tensor=ember.tensor([1]), other=2.5)).split(".")[-1] == \
        str(torch.result_type(tensor=torch.tensor([1]), other=2.5)).split(".")[-1]


def _rnn_checks(lib):
    lstm = lib.nn.LSTM(3, 4, proj_size=2)
    gru = lib.nn.GRU(3, 4, batch_first=True, bidirectional=True)
    x = lib.zeros(5, 2, 3)
    out = [lstm.get_expected_hidden_size(x, None), lstm.get_expected_cell_size(x, None),
           gru.get_expected_hidden_size(lib.zeros(2, 5, 3), None),
           gru.get_expected_hidden_size(lib.zeros(5, 3), lib.tensor([3, 2]))]
    for fn in (lambda: lstm.check_forward_args(x, (lib.zeros(1, 2, 2), lib.zeros(1, 2, 5)), None),
               lambda: gru.check_forward_args(lib.zeros(2, 5, 3), lib.zeros(1, 2, 4), None),
               lambda: lstm.check_input(lib.zeros(5, 2, 4), None)):
        try:
            fn()
            out.append(None)
        except RuntimeError as e:
            out.append(str(e))
    h = lib.arange(6.0).reshape(1, 3, 2)
    out.append(gru.permute_hidden(h, lib.tensor([2, 0, 1])).tolist())
    return out


def test_rnn_public_checks():
    assert _rnn_checks(ember) == _rnn_checks(torch)
