"""The ground floor: settings, hashing, errors and other pieces every layer may import.

Nothing here imports any other vidscope layer.
"""
