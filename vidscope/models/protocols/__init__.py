"""One typed protocol per model role, each in its own module beside the values it exchanges.

A backend is any object that satisfies the protocol of its role; the registry
(:mod:`vidscope.models.registry`) builds one from a ``kind:target`` spec in the settings. Import
from the role's module (``from vidscope.models.protocols.chat import ChatModel``); this package
re-exports nothing. Images are :data:`~vidscope.models.protocols.image.Image` arrays throughout.
"""
