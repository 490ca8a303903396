"""vidscope.agents."""
