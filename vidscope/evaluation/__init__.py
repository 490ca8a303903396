"""Evaluation: benchmark loaders, answer extraction and the metrics the papers report.

Sits between ``agents`` and ``tasks``: it may read the store and models, and agents and flows may
score their answers with it, but it never runs an agent itself (the ``evaluate`` flow does).
"""
