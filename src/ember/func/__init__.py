"""ember.func: composable function transforms (``torch.func``; issue 10)."""
