"""reachtui's Python API, where the README shows it (`from reachtui import api`): an audit store's runs and
tables as rows or pandas DataFrames. It lives in `reachtui/reports/api.py`, beside the other ways a stored
audit goes out (figures, Inspect logs); this module hands on its names."""

from reachtui.reports.api import TABLES, AuditStore, Rows, open_store

__all__ = ["open_store", "AuditStore", "Rows", "TABLES"]
