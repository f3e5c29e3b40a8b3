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


# Command registration (each command module imports heavy libraries only inside its function).
from reachtui.commands.audit import audit as audit_cmd  # noqa: E402
from reachtui.commands.compare import compare as compare_cmd  # noqa: E402
from reachtui.commands.export import export as export_cmd  # noqa: E402
from reachtui.commands.generate import generate as generate_cmd  # noqa: E402
from reachtui.commands.importer import import_ as import_cmd  # noqa: E402
from reachtui.commands.open import open_ as open_cmd  # noqa: E402
from reachtui.commands.protocol import protocol as protocol_cmd  # noqa: E402
from reachtui.commands.runs import runs as runs_cmd  # noqa: E402
from reachtui.commands.serve import serve as serve_cmd  # noqa: E402
cli.add_command(audit_cmd)
cli.add_command(compare_cmd)
cli.add_command(export_cmd)
cli.add_command(generate_cmd)
cli.add_command(import_cmd)
cli.add_command(open_cmd)
cli.add_command(protocol_cmd)
cli.add_command(runs_cmd)
cli.add_command(serve_cmd)


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
