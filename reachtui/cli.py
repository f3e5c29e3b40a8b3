"""The `reachtui` command line: a thin click group. Each command lives in `reachtui/commands/`.

Nothing here imports torch, transformers or textual: `reachtui --help` must stay instant.
"""

from __future__ import annotations

import sys

import click
from click_default_group import DefaultGroup

from reachtui import __version__
from reachtui.errors import ReachError


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reachtui")
def cli() -> None:
    """Audit a language model question by question: is the right answer realized by default,
    or only reachable under a probe (sampling, layer routes, a silenced MLP block)?"""


# Command registration: one line per command module (keep this list sorted).
cli.add_command(__import__("reachtui.commands.audit", fromlist=["x"]).audit)
cli.add_command(__import__("reachtui.commands.compare", fromlist=["x"]).compare)
cli.add_command(__import__("reachtui.commands.export", fromlist=["x"]).export)
cli.add_command(__import__("reachtui.commands.generate", fromlist=["x"]).generate)
cli.add_command(__import__("reachtui.commands.importer", fromlist=["x"]).import_)
cli.add_command(__import__("reachtui.commands.open", fromlist=["x"]).open_)
cli.add_command(__import__("reachtui.commands.runs", fromlist=["x"]).runs)


def main(argv: list[str] | None = None) -> None:
    """Entry point: a ReachError becomes one line on stderr and exit status 2."""
    try:
        cli.main(args=argv, prog_name="reachtui", standalone_mode=False)
    except ReachError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
