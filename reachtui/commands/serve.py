"""`reachtui serve [MODEL] [open's options] [--host H] [--port N]`: the app in a browser (textual-serve).

Every browser tab runs its own `reachtui open ...` with the options given here; the server binds to
127.0.0.1 unless --host says otherwise, and warns when that is not loopback."""

from __future__ import annotations

import shlex
import sys

import click

from reachtui.commands import numbers
from reachtui.errors import ReachError


@click.command("serve", context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
               options_metavar="[MODEL] [OPEN OPTIONS] [OPTIONS]")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but loopback lets other machines open the app (and run the "
                   "model): a warning is printed.")
@click.option("--port", type=numbers.AsciiIntRange(1, 65535), default=8000, show_default=True, help="Port to listen on.")
@click.pass_context
def serve(ctx, host, port):
    """Serve the app to a web browser: `reachtui open` with the same MODEL and options (--store, --run,
    --task, --probes, ...), one app per browser tab.

    \b
      reachtui serve --store store/reachtui.sqlite          # browse stored audits at http://127.0.0.1:8000
      reachtui serve demo --port 8080                        # the demo audit, live, in the browser
    """
    from reachtui.commands.open import open_, prepare

    args = list(ctx.args)
    try:                                # the same options as `open`, checked as `open` checks them: a bad one is
        opened = open_.make_context("reachtui open", list(args))        # refused now, not in each tab
    except click.UsageError as exc:
        raise ReachError(f"serve: {exc.format_message()}") from None
    with opened:                        # open's context: which options were given, for `prepare`
        prepare(**opened.params)
    from reachtui.tui.serve import is_loopback, serve as run_server

    if not is_loopback(host):
        click.secho(f"warning: serving on {host}: other machines can open this app, and run the model, at "
                    f"http://{host}:{port}", err=True, fg="yellow")
    command = shlex.join([sys.executable, "-m", "reachtui", "open", *args])
    click.echo(f"serving reachtui at http://{host}:{port} (ctrl+c stops)", err=True)
    try:
        run_server(command, host=host, port=port)
    except OSError as exc:
        raise ReachError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
