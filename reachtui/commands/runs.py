"""`reachtui runs [--store PATH] [--json]`: the runs in an audit store (reads only; no model, no torch)."""

from __future__ import annotations

import json

import click

from reachtui.commands.options import store_option


@click.command("runs")
@store_option
@click.option("--json", "as_json", is_flag=True, help="One JSON array of run objects on stdout.")
def runs(store_path, as_json):
    """List the audit runs in the store: model, task, protocol hash, status, progress, and the match keys
    (per probe: two runs compare on a probe when its key is the same in both; "realized" is the default
    deployment's)."""
    from reachtui.store import Store

    store = Store(store_path, readonly=True, check=True)
    try:
        rows = store.list_runs()
        for r in rows:
            spec = store.readable_protocol(r["id"])     # unreadable: listed as null, not a crash
            r["protocol"] = json.loads(spec.canonical_json()) if spec is not None else None
            r["match_keys"] = spec.match_keys() if spec is not None else None
        if as_json:
            for r in rows:
                r["events"] = store.run_events(r["id"])
            click.echo(json.dumps(rows, indent=2))
            return
        from rich import box
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        from reachtui.tables.formats import shown

        if not rows:
            click.echo(f"no runs in {store.path}")
            return
        t = Table(title=Text(shown(f"runs in {store.path}")), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  padding=(0, 0), pad_edge=False)
        for c in ("run", "model", "task", "protocol", "status", "Qs", "attempts", "real %", "batch", "updated"):
            numeric = c in ("run", "Qs", "attempts", "real %", "batch")
            t.add_column(c, justify="right" if numeric else "left", no_wrap=c != "model", min_width=5 if c == "model" else None,
                         overflow="fold" if c == "model" else "ellipsis")
        for r in rows:
            done = r["n_realized_done"]
            realized = f"{100 * r['n_realized'] / done:.1f}" if done else "–"
            cells = (str(r["id"]), r["model"], r["task"], r["protocol_hash"], r["status"], str(r["n_questions"]),
                     str(r["n_attempts"]), realized, str(r["batch_size"] or "–"),
                     (r["updated_at"] or "")[5:16].replace("T", " "))
            t.add_row(*(Text(shown(str(c))) for c in cells))     # names are text, never markup
        Console().print(t)
        click.echo("match keys (two runs compare on a probe when its key is the same in both; realized: the default "
                   "deployment):")
        for r in rows:
            keys = r["match_keys"]
            shown = ", ".join(f"{p} {k[:8]}" for p, k in keys.items()) if keys else "its protocol cannot be read"
            click.echo(f"  run {r['id']}: {shown}")
    finally:
        store.close()
