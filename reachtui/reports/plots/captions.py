"""`--caption`: a LaTeX caption to paste under a figure, saying what the figure leaves to its caption: the
runs, n, the budgets K, the probes and what each interval is. Written from the same tables the figure is
drawn from; names from the store are escaped (`tables.formats.latex_escape`). Pure Python.
"""

from __future__ import annotations

import textwrap
from typing import Any

from reachtui.reports.plots.shown import Shown, budgets, curves_by, run_n, side_names
from reachtui.probes import registry
from reachtui.tables.formats import latex_escape as tex

WILSON = r"95\% Wilson intervals"
CONTROL = ("dotted lines with hollow markers: the chance control (each question's attempts scored against "
           "another question's gold answer)")
REALIZED = r"black line: realized, the default decoding (grey: its 95\% Wilson interval)"


#: Caption lines are at most this long (LaTeX reads a line break inside the caption as a space).
LINE = 100


def caption(shown: Shown) -> str:
    """`\\caption{...}` for the figure of `shown`, wrapped to lines of at most LINE characters."""
    return "\n".join(textwrap.wrap(r"\caption{" + " ".join(_TEXT[shown.kind](shown).split()) + "}", LINE,
                                   break_long_words=False, break_on_hyphens=False))


def _runs(shown: Shown) -> str:
    """"base on gsm8k (run 3, $n = 200$)", and the same for each further run."""
    return "; ".join(f"{tex(str(r['model']))} on {tex(str(r['task']))} (run {r['run']}, $n = {run_n(shown, r['run'])}$)"
                     for r in shown.runs)


def _probes(rows: list[dict[str, Any]]) -> str:
    """Each probe of passk rows with its estimator and budget: "sample (pass@k, $K = 16$), ..."."""
    ks = budgets(rows)
    est = {r["probe"]: r["estimator"] for r in rows}
    return ", ".join(f"{tex(p)} ({est[p]}, $K = {ks[p]}$)" for p in registry.ordered_names(ks))


def _estimators(rows: list[dict[str, Any]]) -> str:
    have = {r["estimator"] for r in rows}
    out = []
    if "pass@k" in have:
        out.append("pass@k is the unbiased estimator over the attempts")
    if "reachable@k" in have:
        out.append("reachable@k is the share of questions with a correct answer among the first $k$ attempts")
    return "; ".join(out)


def _reach(shown: Shown) -> str:
    rows = shown.rows("passk")
    return (f"Reachable answers against the realized score. {_runs(shown)}. Per probe, the share of questions "
            f"reached within $k$ attempts: {_probes(rows)}; {_estimators(rows)}. {REALIZED}; {CONTROL}; "
            f"hatched bands: {WILSON} over the questions counted at each $k$.")


def _blind(shown: Shown) -> str:
    rows = shown.rows("passk")
    ks = budgets(rows)
    matched = ("" if len(set(ks.values())) <= 1 else
               " The budgets differ (" + ", ".join(f"{tex(p)} $K = {k}$" for p, k in ks.items())
               + "): the curves compare the probes at each $k$ up to the smallest.")
    return (f"Random layer routes against the route search at matched budgets. {_runs(shown)}. "
            f"Top (left): reachable@k of {_probes(rows)}, the share of questions with a correct answer among "
            f"the first $k$ attempts, {CONTROL}, hatched: {WILSON}. Bottom (right): at each probe's budget $K$, "
            r"reachable (with its 95\% Wilson interval) and the answer-blind pick ($\times$: the majority answer "
            "of the $K$ attempts, chosen without the gold answer); above, retained = (blind $-$ realized) / "
            r"(reachable $-$ realized) with its 95\% bootstrap interval over questions"
            f"{_bootstrap(shown)} where the gap's interval lies above 0 (-- where the gap is not positive). "
            f"{REALIZED}.{matched}")


def _mlp(shown: Shown) -> str:
    rows = shown.rows("mlp-scan")
    sets = []
    for run, name in dict.fromkeys((r["run"], r["set"]) for r in rows):
        mine = [r for r in rows if r["run"] == run and r["set"] == name]
        best = next((r for r in mine if r["best"]), None)
        probe = name.partition(":")[2]
        what = (f"the failure set {tex(name)} of run {run} ($|F| = {mine[0]['failure_n']}$ questions reachable "
                f"under {tex(probe)} and not realized, frozen before the scan) and its realized set "
                f"($|R| = {mine[0]['realized_n']}$)")
        if best is not None and best["repaired"]:
            what += f"; dotted line: the block with the most repairs (layer {best['layer']})"
        else:
            what += "; no block repairs any question of the set"
        sets.append(what)
    return (f"MLP silencing scan. {_runs(shown)}. For each decoder block, its MLP output zeroed (the block "
            "alone): the repair rate, the share of the failure set now answered correctly by the default "
            "decoding, and the break rate, the share of the realized set now answered wrongly; "
            + "; ".join(sets) + f". Bars: {WILSON}.")


def _compare(shown: Shown) -> str:
    rows = shown.rows("compare")
    a, b = side_names(shown)
    ra, rb = shown.runs
    probes = [r["probe"] for r in rows if r["probe"] is not None]
    same = ra["protocol_hash"] == rb["protocol_hash"]
    match = ("under one protocol" if same else
             "under protocols matched per probe" if not shown.warnings else
             r"\textbf{under protocols that do not match}")
    what = "realized (the default decoding)" + (
        " and reachable under " + ", ".join(tex(p) for p in probes) if probes else "")
    ks = _compare_budgets(ra, probes)
    return (f"B = {tex(b)} (run {rb['run']}) against A = {tex(a)} (run {ra['run']}) on {tex(str(ra['task']))}, "
            f"on the $n = {rows[0]['n']}$ questions both runs have, {match}{ks}. Top: {what} in A and in B. "
            r"Bottom: $\Delta = B - A$ in percentage points with its 95\% paired-bootstrap interval over the "
            f"questions{_bootstrap(shown)}.")


def _compare_budgets(info: dict[str, Any], probes: list[str]) -> str:
    from reachtui.tables.source import budgets as protocol_budgets

    ks = protocol_budgets(info)
    known = [f"{tex(p)} $K = {ks[p]}$" for p in probes if p in ks]
    return f" ({', '.join(known)})" if known else ""


def _passk(shown: Shown) -> str:
    rows = [r for r in shown.rows("passk") if r["estimator"] == "pass@k"]
    runs = curves_by(rows)
    return (f"pass@k, the unbiased estimator of the chance that $k$ attempts include a correct answer. "
            f"{_runs(shown)}. {_probes(rows)}; {CONTROL}; hatched bands: {WILSON} over the questions counted "
            f"(conservative for pass@k, a mean of per-question probabilities)"
            + ("" if len({r for r, _p in runs}) < 2 else "; one line style and marker per run") + ".")


def _bootstrap(shown: Shown) -> str:
    return f" ({shown.bootstrap} replicates, seed {shown.seed})" if shown.bootstrap else " (bootstrap off)"


_TEXT = {"reach": _reach, "blind": _blind, "mlp-scan": _mlp, "compare": _compare, "passk": _passk}
