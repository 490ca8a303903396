"""Model backends, one module per backend kind."""
