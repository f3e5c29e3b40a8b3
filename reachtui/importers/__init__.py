"""Readers of recorded generations (`reachtui import`): each format into `records.Parsed`, checked; no store,
no model. `read.read` picks the reader; `reachtui.engine.importing` grades and writes the run."""
