"""`reachtui plot KIND RUN... -o FILE.pdf|png|svg`: a figure for a paper, drawn from the tables `reachtui
export` writes (`reachtui.plots`). Reads the store only; needs matplotlib (reachtui[plot]); imports no torch,
transformers or textual.
"""

from __future__ import annotations

from pathlib import Path

import click

from reachtui.commands import numbers
from reachtui.commands.export import bootstrap_options, open_store, store_path_of
from reachtui.commands.options import refuse_options, store_option
from reachtui.errors import ReachError


def figure_format(output: str, fmt: str | None) -> str:
    """pdf, png or svg: --format, else the -o file's suffix; an unknown or contradicting suffix is refused."""
    from reachtui.plots import FIGURE_FORMATS

    suffix = Path(output).suffix.lower().lstrip(".")
    if fmt is not None:
        fmt = fmt.strip().lower()
        if fmt not in FIGURE_FORMATS:
            raise ReachError(f"unknown figure format {fmt!r}; choose one of {', '.join(FIGURE_FORMATS)}")
        if suffix in FIGURE_FORMATS and suffix != fmt:
            raise ReachError(f"-o {output} is a .{suffix} file but --format is {fmt}: say one thing")
        return fmt
    if suffix in FIGURE_FORMATS:
        return suffix
    what = f"unknown suffix '.{suffix}'" if suffix else "no suffix"
    raise ReachError(f"-o {output}: {what}; a figure is a .pdf, .png or .svg file (or name it with --format)")


@click.command("plot")
@click.argument("kind", metavar="KIND")
@click.argument("runs", nargs=-1, metavar="[RUN]...")
@click.option("-o", "--output", required=True, metavar="FILE", help="The figure: FILE.pdf, FILE.png or FILE.svg "
                                                                  "(written atomically).")
@store_option
@click.option("--probe", "probes", multiple=True, metavar="PROBE",
              help="Show only this probe (repeatable; default: every probe the runs have).")
@click.option("--format", "-f", "fmt", default=None, metavar="FORMAT",
              help="pdf, png or svg (default: from the -o file's suffix).")
@click.option("--dpi", type=numbers.AsciiIntRange(50, 1200), default=300, show_default=True,
              help="Resolution of a PNG.")
@click.option("--allow-unmatched", is_flag=True,
              help="compare only: compare runs whose protocols differ (the figure is marked).")
@bootstrap_options
def plot(kind, runs, output, store_path, probes, fmt, dpi, allow_unmatched, bootstrap, bootstrap_seed) -> None:
    """Draw a figure of RUN(s) into FILE (pdf, png, svg): KIND is passk (pass@k with its chance control and
    95% intervals), reach (reachable@k per probe beside chance and the realized level), mlp-scan (repair and
    break rate per silenced MLP block) or compare RUN_A RUN_B (both runs' curves and Δ = B − A with
    paired-bootstrap intervals). Runs are ids, 'latest' (the default) or model names.

    The plotted numbers are the numbers `reachtui export passk|summary|mlp-scan|compare` writes for the same
    runs; the file carries them as JSON (PDF Subject, SVG dc:description, PNG text chunk reachtui:data), and
    its title names the runs, models, tasks and protocol hashes. Needs reachtui[plot] (matplotlib).

    \b
      reachtui plot passk base -o passk.pdf
      reachtui plot reach 3 --probe routes --probe mcts -o reach.svg
      reachtui plot mlp-scan demo -o mlp.png --dpi 200
      reachtui plot compare demo demo-tuned -o compare.pdf
    """
    from reachtui import plots
    from reachtui import tables as T
    from reachtui.output import check_output, write_output_bytes

    name = kind.strip().lower()
    if name not in plots.KINDS:
        raise ReachError(f"unknown figure {kind!r}; choose one of {', '.join(plots.KINDS)}")
    check_output(output, store_path_of(store_path))
    fmt = figure_format(output, fmt)
    if name != "compare" and not runs:
        runs = ("latest",)
    if name == "compare" and len(runs) != 2:
        raise ReachError("plot compare needs two runs: RUN_A RUN_B (Δ = B − A)")
    if allow_unmatched and name != "compare":
        raise ReachError("--allow-unmatched is for plot compare")
    if fmt != "png":
        refuse_options(("dpi",), f"to a {fmt} figure (its curves are vectors: --dpi is a PNG's resolution)")
    if name != "compare":
        refuse_options(("bootstrap", "bootstrap_seed"), f"to plot {name} (its intervals are not bootstrapped)")
    if name == "mlp-scan":
        refuse_options(("probes",), "to plot mlp-scan (its rows are silenced layers, not probes)")
    with open_store(store_path) as store:
        run_ids = list(dict.fromkeys(store.resolve_run(r) for r in runs))
        if name == "compare" and len(run_ids) != 2:
            raise ReachError("plot compare needs two different runs")
        shown = plots.figure_tables(store, name, run_ids, probes=probes, allow_unmatched=allow_unmatched,
                                    bootstrap=bootstrap, seed=bootstrap_seed)
    data = plots.render(plots.draw(shown), fmt, dpi=dpi)
    write_output_bytes(output, data, store_path_of(store_path))
    for w in dict.fromkeys(w for t in shown.tables.values() for w in t.warnings):
        click.secho(f"WARNING: {w}", err=True, fg="red", bold=True)
