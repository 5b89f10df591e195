"""ember.save / ember.load: PyTorch's checkpoint format, safe by default (issue 7)."""

__all__ = []
