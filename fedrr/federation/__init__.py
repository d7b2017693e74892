"""Flower only: fedrr's ClientApp (``client_app.app``) and ServerApp (``server_app.app``), the
wire protocol, the collection round, ``run_federation`` (Flower's simulation runtime from Python)
and ``flwr_cli`` (``flwr run`` with its pitfalls handled). Everything else — mechanisms,
populations, releases, pools, estimators — is Flower-free and lives one level up."""
