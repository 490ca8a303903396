"""vidscope.tasks."""
