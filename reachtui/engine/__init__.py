"""The one engine for every generation job: planning (`plan`), a run's context and write path
(`context`, `record`), progress events (`progress`), the audit's phases (`audit`), the MLP scan and the
app's apply job (`mlp`), the app's live run (`live`) and its trace pane, where the answer changes and the
logit lens (`trace`); beside them the importer of recorded
generations (`importing`), which grades and writes through the same `record` and store paths. Pure
Python: the model is reached only through the `reachtui.generation.Runner` contract."""

