"""Prefect deployments (nightly ingestion, on-demand queries) and the local server; see issue 7.

Nothing is deployed from here yet: run the flows directly (``vidscope ingest`` / ``vidscope ask``).
"""
