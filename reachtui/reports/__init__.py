"""What a stored audit becomes besides the tables: the Python API (`api.py`, re-exported as `reachtui.api`),
the figures (`plots/`) and Inspect logs (`inspect_export.py`). Each reads the store through the tables, and
loads its extra (pandas, matplotlib, inspect_ai) only when it is used."""
