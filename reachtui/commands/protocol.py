"""`reachtui protocol [RUN]`: a run's protocol as TOML that `--protocol FILE.toml` reads back, so a run's
settings can be seen, kept beside a paper, and repeated (same protocol, same hash). `--presets` lists the
shipped presets (`--protocol NAME`), `--preset NAME` prints one as such a file, to read or to edit."""

from __future__ import annotations

import click

from reachtui.commands.options import refuse_options, store_option
from reachtui.errors import ReachError


@click.command("protocol")
@click.argument("run", default="latest", metavar="[RUN]")
@store_option
@click.option("--presets", "list_presets", is_flag=True, help="List the protocol presets (--protocol NAME).")
@click.option("--preset", "preset", default=None, metavar="NAME", help="Print this preset as a protocol file.")
def protocol(run, store_path, list_presets, preset) -> None:
    """Print RUN's protocol (an id, latest, or a model name) as TOML: `reachtui audit ... --protocol
    FILE.toml` with it makes runs matched with RUN (the same protocol hash). Its second line gives the match
    keys: another run compares with RUN on a probe when its key for that probe is the same.

    \b
      reachtui protocol 3 > gsm8k.toml
      reachtui audit MODEL --task gsm8k.jsonl --protocol gsm8k.toml
      reachtui protocol --presets
    """
    if list_presets or preset is not None:
        refuse_options(("run", "store_path"), "to --presets or --preset (a preset is not a stored run)")
        if list_presets and preset is not None:
            raise ReachError("--presets lists the presets, --preset NAME prints one: give one of them")
        show_presets(preset)
        return
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


def show_presets(name: str | None) -> None:
    """Each preset's name, hash and what it is for; or (`name`) that preset as TOML."""
    from reachtui.presets import load_protocol, preset_description, preset_names
    from reachtui.protocol import protocol_to_toml

    if name is not None:
        if name not in preset_names():
            raise ReachError(f"--preset {name}: no such preset (presets: {', '.join(preset_names())})")
        spec = load_protocol(name)
        click.echo(protocol_to_toml(spec, [f"preset {name}: {preset_description(name)}, protocol {spec.hash()}"]),
                   nl=False)
        return
    names = preset_names()
    width = max(map(len, names))
    for each in names:
        click.echo(f"{each:<{width}}  {load_protocol(each).hash()}  {preset_description(each)}")
