"""``ember.onnx``: the export guard model code reads, and an export that says it is missing."""

import pytest

import ember


def test_is_in_onnx_export_is_false():
    """No ONNX export ever runs in ember, so the guard is False."""
    assert ember.onnx.is_in_onnx_export() is False


def test_export_raises_exporter_error():
    """``export`` fails with the exporter's error type (a RuntimeError), saying why."""
    with pytest.raises(ember.onnx.OnnxExporterError, match="no ONNX exporter"):
        ember.onnx.export(ember.nn.Linear(2, 2), (ember.zeros(1, 2),), "model.onnx")
    assert issubclass(ember.onnx.OnnxExporterError, RuntimeError)
