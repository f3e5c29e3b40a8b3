"""The `reachtui` command line: a thin click group. Each command lives in `reachtui/commands/`.

Nothing here imports torch, transformers or textual: `reachtui --help` must stay instant.
"""

from __future__ import annotations

import os
import sys
import warnings

import click
from click_default_group import DefaultGroup

from reachtui import __version__
from reachtui.errors import EXIT_ENVIRONMENT, EXIT_INPUT, EXIT_INTERNAL, ReachError, error_line, first_line

#: Set by `reachtui --debug` (or REACHTUI_DEBUG=1): errors show their traceback too.
_debug = {"on": False}


@click.group(cls=DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="reachtui")
@click.option("--debug", is_flag=True, help="Show the Python traceback of an error (after its one line).")
def cli(debug: bool) -> None:
    """Audit a language model question by question: is the right answer realized by default,
    or only reachable under a probe (sampling, layer routes, a silenced MLP block)?

    Exit status: 0 done, 2 bad input, 3 the environment failed (disk full, read-only, damaged store),
    1 an internal error (a bug: run with --debug for its traceback), 130 interrupted."""
    if debug:
        _debug["on"] = True


# Command registration (each command module imports heavy libraries only inside its function).
from reachtui.commands.audit import audit as audit_cmd  # noqa: E402
from reachtui.commands.compare import compare as compare_cmd  # noqa: E402
from reachtui.commands.examples import examples as examples_cmd  # noqa: E402
from reachtui.commands.export import export as export_cmd  # noqa: E402
from reachtui.commands.generate import generate as generate_cmd  # noqa: E402
from reachtui.commands.importer import import_ as import_cmd  # noqa: E402
from reachtui.commands.open import open_ as open_cmd  # noqa: E402
from reachtui.commands.plot import plot as plot_cmd  # noqa: E402  (issue 28: figures)
from reachtui.commands.protocol import protocol as protocol_cmd  # noqa: E402
from reachtui.commands.runs import runs as runs_cmd  # noqa: E402
from reachtui.commands.serve import serve as serve_cmd  # noqa: E402
from reachtui.commands.trace import trace as trace_cmd  # noqa: E402  (issue 35: divergence and logit lens)
cli.add_command(audit_cmd)
cli.add_command(compare_cmd)
cli.add_command(examples_cmd)
cli.add_command(export_cmd)
cli.add_command(generate_cmd)
cli.add_command(import_cmd)
cli.add_command(open_cmd)
cli.add_command(plot_cmd)
cli.add_command(protocol_cmd)
cli.add_command(runs_cmd)
cli.add_command(serve_cmd)
cli.add_command(trace_cmd)


def _one_line(message: str) -> str:
    """click's message (its usage errors) on one line."""
    return " ".join(message.split())


def _lines_joined(exc: BaseException) -> str:
    """A ReachError's message whole, on one line: reachtui's own words are never cut (a library's error,
    where only the first line says something, is `reachtui.errors.first_line`)."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A library's warning as one line of reachtui's own: its message's first line, without the source file
    and the code line Python adds (the warnings that say nothing to a user are filtered where they arise)."""
    click.echo(f"warning: {first_line(message, 400)}", err=True)


def _fail(line: str, code: int) -> None:
    if _debug["on"] and sys.exc_info()[0] is not None:
        import traceback

        traceback.print_exc()
    click.echo(line, err=True)
    sys.exit(code)


def _environment_fault(exc: BaseException):
    """An sqlite3 error or OSError that escaped the places that map them: the environment fault it is."""
    import sqlite3

    from reachtui.errors import os_fault, sqlite_fault

    if isinstance(exc, sqlite3.Error):
        from reachtui import store

        return sqlite_fault(exc, store.LAST_OPENED or "(the audit store)")
    if isinstance(exc, OSError):
        return os_fault(exc, exc.filename or "the output")
    return None


def main(argv: list[str] | None = None) -> None:
    """Entry point, and the one place errors become one line on stderr: a ReachError (bad input) exits 2,
    an environment fault 3, anything unexpected 1 (`--debug` shows the traceback). A library's warning is
    one line too (`_show_warning`; REACHTUI_DEBUG=1 shows it as Python does)."""
    _debug["on"] = os.environ.get("REACHTUI_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")
    with warnings.catch_warnings():     # as it was afterwards: main also runs inside other programs (tests)
        if not _debug["on"]:
            warnings.showwarning = _show_warning
        _main(argv)


def _main(argv: list[str] | None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    for arg in args:              # bytes that are not UTF-8 arrive as lone surrogates: nothing could store them
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            _fail(f"error: argument {shown!r} is not UTF-8 text", EXIT_INPUT)
    try:
        cli.main(args=args, prog_name="reachtui", standalone_mode=False)
    except ReachError as exc:      # EnvironmentFault (3) included
        _fail(f"error: {_lines_joined(exc)}", getattr(exc, "exit_code", EXIT_INPUT))
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:     # `reachtui` alone: its help, as click shows it
        exc.show()
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx is not None else "reachtui"
        _fail(f"error: {_one_line(exc.format_message()).rstrip('.')} (see {command} --help)", exc.exit_code)
    except click.ClickException as exc:
        _fail(f"error: {_one_line(exc.format_message())}", exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:       # `reachtui export ... | head`: the reader has gone, as with any pipe
        try:
            sys.stdout = open(os.devnull, "w")      # noqa: SIM115 - nothing more to flush at exit
        except OSError:
            pass
        sys.exit(141)
    except MemoryError:
        _fail("error: out of memory (lower --batch-size or --max-new-tokens)", EXIT_ENVIRONMENT)
    except Exception as exc:  # noqa: BLE001 - the one catch-all: a line, exit 1, the traceback with --debug
        fault = _environment_fault(exc)
        if fault is not None:
            _fail(f"error: {_lines_joined(fault)}", fault.exit_code)
        _fail(f"error: internal error: {error_line(exc, 500)} (run with --debug for the traceback)", EXIT_INTERNAL)


if __name__ == "__main__":
    main()
