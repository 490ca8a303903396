"""vidscope: ask questions about, search and compare your own videos with AI agents."""

__version__ = "0.1.0"
