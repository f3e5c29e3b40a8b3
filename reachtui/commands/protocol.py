"""`reachtui protocol [RUN]`: a run's protocol as TOML that `--protocol FILE.toml` reads back, so a run's
settings can be seen, kept beside a paper, and repeated (same protocol, same hash)."""

from __future__ import annotations

import click

from reachtui.commands.options import store_option
from reachtui.errors import ReachError


@click.command("protocol")
@click.argument("run", default="latest", metavar="[RUN]")
@store_option
def protocol(run, store_path) -> None:
    """Print RUN's protocol (an id, latest, or a model name) as TOML: `reachtui audit ... --protocol
    FILE.toml` with it makes runs matched with RUN (the same protocol hash). Its second line gives the match
    keys: another run compares with RUN on a probe when its key for that probe is the same.

    \b
      reachtui protocol 3 > gsm8k.toml
      reachtui audit MODEL --task gsm8k.jsonl --protocol gsm8k.toml
    """
    from reachtui.commands.export import open_store
    from reachtui.protocol import protocol_to_toml

    with open_store(store_path) as store:
        run_id = store.resolve_run(run)
        row = store.get_run(run_id)
        spec = store.run_protocol(row)
    if spec.hash() != row["protocol_hash"]:
        raise ReachError(f"run {run_id} was stored with protocol {row['protocol_hash']}, which this reachtui "
                         f"reads as {spec.hash()} (another version made it); its TOML would not match it")
    click.echo(protocol_to_toml(spec, [f"run {run_id}: {row['model']} on {row['task']}, protocol {row['protocol_hash']}",
                                       "match keys: " + ", ".join(f"{p} {k}" for p, k in spec.match_keys().items())]),
               nl=False)
