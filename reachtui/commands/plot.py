"""`reachtui plot KIND RUN... -o FILE.pdf|png|svg` and `reachtui plot all RUN [RUN2] -o DIR/`: figures for a
paper, drawn from the tables `reachtui export` writes (`reachtui.reports.plots`). Reads the store only; needs
matplotlib (reachtui[plot]); imports no torch, transformers or textual.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from reachtui.commands import numbers
from reachtui.commands.export import bootstrap_options, open_store, store_path_of
from reachtui.commands.options import refuse_options, store_option
from reachtui.errors import ReachError

ALL = "all"


def figure_format(output: str, fmt: str | None) -> str:
    """pdf, png or svg: --format, else the -o file's suffix; an unknown or contradicting suffix is refused."""
    from reachtui.reports.plots import FIGURE_FORMATS

    suffix = Path(output).suffix.lower().lstrip(".")
    if fmt is not None:
        fmt = _format(fmt)
        if suffix in FIGURE_FORMATS and suffix != fmt:
            raise ReachError(f"-o {output} is a .{suffix} file but --format is {fmt}: say one thing")
        return fmt
    if suffix in FIGURE_FORMATS:
        return suffix
    what = f"unknown suffix '.{suffix}'" if suffix else "no suffix"
    raise ReachError(f"-o {output}: {what}; a figure is a .pdf, .png or .svg file (or name it with --format)")


def _format(fmt: str) -> str:
    from reachtui.reports.plots import FIGURE_FORMATS

    fmt = fmt.strip().lower()
    if fmt not in FIGURE_FORMATS:
        raise ReachError(f"unknown figure format {fmt!r}; choose one of {', '.join(FIGURE_FORMATS)}")
    return fmt


def _folder(output: str) -> Path:
    """plot all's -o: a folder, made if missing (its parent must exist); never a file."""
    path = Path(output).expanduser()
    if path.exists() and not path.is_dir():
        raise ReachError(f"-o {output} is a file: plot all writes its figures into a folder (-o figs/)")
    if not path.exists() and not path.parent.is_dir():
        raise ReachError(f"-o {output}: folder {path.parent} does not exist")
    return path


@click.command("plot")
@click.argument("kind", metavar="KIND")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option("-o", "--output", required=True, metavar="FILE|DIR",
              help="The figure: FILE.pdf, FILE.png or FILE.svg (written atomically); for `all`, a folder.")
@store_option
@click.option("--probe", "probes", multiple=True, metavar="PROBE",
              help="Show only this probe (repeatable; default: every probe the runs have; blind: the route "
                   "probes).")
@click.option("--format", "-f", "fmt", default=None, metavar="FORMAT",
              help="pdf, png or svg (default: from the -o file's suffix; pdf for `all`).")
@click.option("--width", "width", default="column", show_default=True, metavar="column|page|INCHES",
              help="The figure's final width: a journal's column (3.25 in), its page (6.75 in), or inches. "
                   "Fonts are 7 pt or more at that size.")
@click.option("--title", default=None, metavar="TEXT", help="A title over the figure (default: none).")
@click.option("--caption", is_flag=True, help="Print a LaTeX caption for the figure (runs, n, K, probes, "
                                              "intervals) on stdout.")
@click.option("--style", default=None, metavar="FILE",
              help="A matplotlib style file (key: value lines, as .mplstyle) applied over reachtui's look.")
@click.option("--dpi", type=numbers.AsciiIntRange(50, 1200), default=300, show_default=True,
              help="Resolution of a PNG.")
@click.option("--allow-unmatched", is_flag=True,
              help="compare (and all with two runs): compare runs whose protocols differ (the figure is marked).")
@bootstrap_options
def plot(kind, runs, output, store_path, probes, fmt, width, title, caption, style, dpi, allow_unmatched,
         bootstrap, bootstrap_seed) -> None:
    """Draw a figure of RUN(s) into FILE (pdf, png, svg), sized for a paper (--width), its numbers those of
    `reachtui export`. KIND is one of

    \b
      reach     reachable@k per probe against the realized level, beside the chance control
      blind     random routes vs MCTS at matched budgets: the answer-blind pick and retained
      mlp-scan  repair rate (failure set) and break rate (realized set) per silenced MLP block
      compare   RUN_A RUN_B: realized and reachable in A and B, and Δ = B − A (paired intervals)
      passk     pass@k of the sampling probe, one curve per run, beside the chance control
      all       RUN [RUN2] -o DIR/: each of these the runs have (compare with two runs)

    Runs are ids, 'latest' (the default) or model names. The figure has no title unless --title gives one;
    the file carries the plotted numbers as JSON (PDF Subject, SVG dc:description, PNG text chunk
    reachtui:data) and the runs, models, tasks, protocol hashes and reachtui's version (PDF Keywords, SVG
    keywords, PNG reachtui:provenance). Needs reachtui[plot] (matplotlib).

    \b
      reachtui plot reach base -o reach.pdf --caption
      reachtui plot blind 3 --width page -o blind.svg
      reachtui plot compare base tuned -o compare.pdf --style lab.mplstyle
      reachtui plot all base tuned -o figs/ --format png
    """
    from reachtui.reports import plots
    from reachtui.output import write_output_bytes

    name = kind.strip().lower()
    _check_request(name, runs, output, title, allow_unmatched)
    store = store_path_of(store_path)
    inches = plots.parse_width(width)
    look = plots.style_rc(style) if style is not None else None
    targets, fmt = _targets(name, runs, output, fmt, store)
    _refuse_unused(name, fmt)
    with open_store(store_path) as s:
        drawn, skipped = _figure_tables(s, name, runs, targets, probes=probes, allow_unmatched=allow_unmatched,
                                        bootstrap=bootstrap, seed=bootstrap_seed)
    files = {k: plots.render(plots.draw(shown, width=inches, title=title, style=look), fmt, dpi=dpi)
             for k, shown in drawn.items()}
    if name == ALL and not Path(output).expanduser().exists():
        os.mkdir(Path(output).expanduser())
    for k, data in files.items():
        write_output_bytes(targets[k], data, store)
    for w in dict.fromkeys(w for shown in drawn.values() for w in shown.warnings):
        click.secho(f"WARNING: {w}", err=True, fg="red", bold=True)
    if name == ALL:
        click.echo(f"wrote {', '.join(targets[k] for k in drawn)}", err=True)
        for k, why in skipped.items():
            click.echo(f"skipped {k}: {why}", err=True)
    if caption:
        for k, shown in drawn.items():
            if name == ALL:
                click.echo(f"% {targets[k]}")
            click.echo(plots.caption(shown))


def _check_request(name: str, runs, output: str, title: str | None, allow_unmatched: bool) -> None:
    """What can be refused before the store is opened: the kind, the runs it takes, -o, the options."""
    from reachtui.reports import plots

    if not output.strip():
        raise ReachError("-o needs a " + ("folder (-o figs/)" if name == ALL else "file: FILE.pdf, .png or .svg"))
    if name != ALL:
        plots.check_kind(name, runs or ("latest",))
    if allow_unmatched and name not in ("compare", ALL):
        raise ReachError("--allow-unmatched is for plot compare")
    if name == ALL and title is not None:
        raise ReachError("--title names one figure; plot all draws several (draw each with plot KIND --title)")
    if name == ALL and len(runs) > 2:
        raise ReachError("plot all takes one run, or two (A, B: compare is drawn too)")


def _refuse_unused(name: str, fmt: str) -> None:
    """One line for an option the figure would not act on."""
    if fmt != "png":
        refuse_options(("dpi",), f"to a {fmt} figure (its curves are vectors: --dpi is a PNG's resolution)")
    if name in ("passk", "reach", "mlp-scan"):
        refuse_options(("bootstrap", "bootstrap_seed"), f"to plot {name} (its intervals are not bootstrapped)")
    if name == "mlp-scan":
        refuse_options(("probes",), "to plot mlp-scan (its rows are silenced layers, not probes)")


def _targets(name: str, runs, output: str, fmt: str | None, store: Path) -> tuple[dict[str, str], str]:
    """{figure kind: the file it is written to}, and the format: -o itself, or for `all` one file per kind
    in the -o folder (compare only with two runs)."""
    from reachtui.reports import plots
    from reachtui.output import check_output

    if name != ALL:
        check_output(output, store)
        return {name: output}, figure_format(output, fmt)
    folder = _folder(output)
    fmt = _format(fmt or "pdf")
    kinds = plots.KINDS if len(runs) == 2 else plots.ONE_RUN_KINDS
    return {k: str(folder / f"{k}.{fmt}") for k in kinds}, fmt


def _figure_tables(store, name: str, runs, targets: dict[str, str], **options) -> tuple[dict, dict[str, str]]:
    """({kind: its Shown}, {kind: why it is skipped}): `all` skips a figure the runs have nothing for and
    says why; a single figure refuses it."""
    from reachtui.reports import plots

    run_ids = list(dict.fromkeys(store.resolve_run(r) for r in (runs or ("latest",))))
    if name == "compare" and len(run_ids) != 2:
        raise ReachError("plot compare needs two different runs")
    drawn, skipped = {}, {}
    for k in targets:
        if k == "compare" and len(run_ids) != 2:
            skipped[k] = "needs two different runs"
            continue
        try:
            drawn[k] = plots.figure_tables(store, k, run_ids, **options)
        except plots.NothingToDraw as exc:
            if name != ALL:
                raise
            skipped[k] = str(exc)
    if not drawn:
        raise ReachError("nothing to draw: " + "; ".join(f"{k}: {why}" for k, why in skipped.items()))
    return drawn, skipped
