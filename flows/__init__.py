"""vidscope.flows."""
