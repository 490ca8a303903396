"""The HTTP API and web page of vidscope (``vidscope api``): :func:`create_app` builds the app."""

from vidscope.api.app import create_app

__all__ = ["create_app"]
