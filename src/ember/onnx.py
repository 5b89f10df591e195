"""``torch.onnx``, as far as model code reads it: ``is_in_onnx_export()`` guards (fairseq's and
Hugging Face's attention layers branch on it) are always False, since ember has no ONNX
exporter; ``export`` says so with PyTorch's exporter error type."""

__all__ = ["OnnxExporterError", "export", "is_in_onnx_export"]


class OnnxExporterError(RuntimeError):
    """Errors raised by the ONNX exporter (PyTorch's ``torch.onnx.OnnxExporterError``)."""


def is_in_onnx_export():
    """Whether an ONNX export is running: never, in ember."""
    return False


def export(model, args=(), f=None, **kwargs):
    """Unsupported: ember cannot trace a model into an ONNX graph."""
    raise OnnxExporterError("ember has no ONNX exporter: export the model with PyTorch "
                            "(its state_dict loads there unchanged)")
