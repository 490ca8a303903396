"""Running vidscope as a service: the local Prefect server and worker, and the deployments.

- :mod:`vidscope.deployments.server`: ``vidscope server up|down|status`` (background processes,
  logs and pid files under ``<data_dir>/server``);
- :mod:`vidscope.deployments.deploy`: ``vidscope server deploy`` (nightly ingestion on a cron
  schedule, on-demand ``ask`` and ``search``, all on the ``process`` work pool).

See docs/operations.md.
"""
