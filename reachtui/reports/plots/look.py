"""How the figures look: a journal's widths, the fonts at their final size, one glyph per thing shown, a
colour-blind-safe palette, the axes' units and ticks, and a lab's own matplotlib style file (--style).

Every series differs from every other in its panel by line style and marker as well as colour (the Okabe-Ito
palette, safe for the common colour-vision deficiencies), so a greyscale print keeps them apart:

    probe        colour          marker  line        interval band
    sample       blue            o       solid       hatched ////
    routes       vermillion      s       dashed      hatched \\\\
    mcts         bluish green    ^       dash-dot    hatched xxx
    mcts-blind   reddish purple  D       dash-dot-dot hatched ---
    chance control: the probe's colour and marker, hollow, on a dotted line, its band dotted ....
    realized: a black line, its interval a grey band; the answer-blind pick: a black X
    runs (passk, compare): A black o solid, B orange D dashed, then sky blue P dash-dot, ...

Figures are drawn at their final size (`--width column|page|INCHES`), so a 7-pt font stays 7 pt in the
paper; the y axis runs a little below 0 and above 100%, so a series at 0 sits above the axis line.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reachtui.errors import ReachError, first_line
from reachtui.probes import registry

#: A journal's widths in inches: one column, the whole text width.
WIDTHS = {"column": 3.25, "page": 6.75}
WIDTH_RANGE = (2.0, 12.0)
#: No text is smaller than this at the figure's final size (points).
MIN_FONT = 7.0

#: matplotlib settings while a figure is drawn and saved (under a --style file's).
RC: dict[str, Any] = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "figure.titlesize": 9, "axes.linewidth": 0.6, "xtick.major.width": 0.6,
    "ytick.major.width": 0.6, "xtick.major.size": 3, "ytick.major.size": 3, "lines.linewidth": 1.2,
    "lines.markersize": 4, "hatch.linewidth": 0.5, "axes.spines.top": False, "axes.spines.right": False,
    "legend.frameon": False, "legend.handlelength": 2.6, "legend.columnspacing": 1.2,
    "grid.linewidth": 0.4, "grid.alpha": 0.5, "figure.dpi": 100,
}
#: What no style changes: text stays text in SVG and PDF (editable in a paper's figure), files are
#: byte-stable (fixed SVG ids), and the page is the width asked for (no tight cropping).
FIXED: dict[str, Any] = {"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "reachtui",
                         "savefig.bbox": None, "figure.autolayout": False}
#: Keys a style file may hold that do not concern a figure: left out.
IGNORED = ("backend", "backend_fallback", "interactive", "toolbar", "timezone", "webagg.", "tk.",
           "savefig.directory", "figure.raise_window", "figure.max_open_warning", "docstring.")

# The Okabe-Ito palette (Okabe & Ito 2008), named.
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
GREY = "#8C8C8C"


@dataclass(frozen=True)
class Glyph:
    """How one series is drawn: colour, marker, line style and the hatch of its interval band."""

    colour: str
    marker: str
    line: Any
    hatch: str


PROBE_GLYPHS = {
    registry.SAMPLE.name: Glyph(BLUE, "o", "-", "////"),
    registry.ROUTES.name: Glyph(VERMILLION, "s", "--", "\\\\\\\\"),
    registry.MCTS.name: Glyph(GREEN, "^", "-.", "xxx"),
    registry.MCTS_BLIND.name: Glyph(PURPLE, "D", (0, (4, 1.5, 1, 1.5, 1, 1.5)), "---"),
}
OTHER_PROBE = Glyph(GREY, "v", (0, (6, 2)), "+++")
RUN_GLYPHS = (Glyph(BLACK, "o", "-", "////"), Glyph(ORANGE, "D", "--", "\\\\\\\\"),
              Glyph(SKY, "P", "-.", "xxx"), Glyph(PURPLE, "v", (0, (4, 1.5, 1, 1.5, 1, 1.5)), "---"))
CONTROL_LINE = ":"
CONTROL_HATCH = "...."
REALIZED = Glyph(BLACK, "", "-", "")
BLIND = Glyph(BLACK, "X", "", "")


def probe_glyph(probe: str | None) -> Glyph:
    if probe is None or probe == registry.REALIZED.name:
        return Glyph(BLACK, "o", "-", "")
    return PROBE_GLYPHS.get(probe, OTHER_PROBE)


def run_glyph(i: int) -> Glyph:
    return RUN_GLYPHS[i % len(RUN_GLYPHS)]


# --------------------------------------------------------------------------------------------------
# Width and style, as the user gives them
# --------------------------------------------------------------------------------------------------


def parse_width(text: str | float) -> float:
    """--width: column (3.25 in), page (6.75 in) or a width in inches ("4", "4.5in")."""
    s = str(text).strip().lower()
    if s in WIDTHS:
        return WIDTHS[s]
    try:
        width = float(s.removesuffix("in").strip())
    except ValueError:
        raise ReachError(f"--width {text!r}: column ({WIDTHS['column']} in), page ({WIDTHS['page']} in) "
                         "or a width in inches") from None
    lo, hi = WIDTH_RANGE
    if not (math.isfinite(width) and lo <= width <= hi):
        raise ReachError(f"--width {text}: a figure is {lo:g} to {hi:g} inches wide")
    return width


class _Caught(logging.Handler):
    """The warnings matplotlib logs while it reads a style file (a line without a colon, a bad key)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().strip())


def style_rc(style: str) -> dict[str, Any]:
    """The settings of a matplotlib style file (--style FILE, or the name of one of matplotlib's own
    styles), read by matplotlib and checked: a missing file, or a line matplotlib cannot use (no colon, an
    unknown key, a bad value), is one error line. Keys that do not concern a figure are left out."""
    import matplotlib

    path = Path(style).expanduser()
    if not path.is_file():
        import matplotlib.style

        if style in matplotlib.style.library:
            return _usable(dict(matplotlib.style.library[style]))
        raise ReachError(f"--style {style}: no such file (a matplotlib style file of `key: value` lines, "
                         "or a style matplotlib knows: " + ", ".join(sorted(matplotlib.style.available)[:6]) + ", ...)")
    caught = _Caught()
    log = logging.getLogger("matplotlib")
    log.addHandler(caught)
    try:
        rc = matplotlib.rc_params_from_file(path, fail_on_error=True, use_default_template=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise ReachError(f"--style {style}: cannot read it: {first_line(exc)}") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise ReachError(f"--style {style}: {first_line(exc)}") from None
    finally:
        log.removeHandler(caught)
    if caught.messages:
        raise ReachError(f"--style {style}: {first_line(ValueError(caught.messages[0]))}")
    return _usable(dict(rc))


def _usable(rc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rc.items() if not k.startswith(IGNORED) and k not in FIXED}


def rc_layers(style: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The settings a figure is drawn under, in order: reachtui's look, the style's, then what stays fixed."""
    return [RC, style or {}, FIXED]


# --------------------------------------------------------------------------------------------------
# Axes: units and ticks
# --------------------------------------------------------------------------------------------------

#: The y range of a share (0..1), a little wider than 0..100% so that a series at 0 (or 1) sits clear of
#: the axis line.
SHARE_LIMITS = (-0.06, 1.06)


def share_axis(ax, label: str, *, headroom: float = 0.0) -> None:
    """A y axis of shares in 0..1, labelled in %; `headroom` above 100% holds labels (the axis line stops at
    100%)."""
    from matplotlib.ticker import FixedLocator, PercentFormatter

    ax.yaxis.set_major_locator(FixedLocator([0, 0.25, 0.5, 0.75, 1.0]))
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    low, high = SHARE_LIMITS
    ax.set_ylim(low, high + headroom)
    if headroom:
        ax.spines["left"].set_bounds(low, 1.0)
    ax.set_ylabel(label)
    ax.grid(axis="y")
    ax.set_axisbelow(True)


def points_axis(ax, label: str, values: list[float]) -> None:
    """A y axis of differences of shares, in percentage points ("+10", "−5"), with 0 marked."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    top = max([abs(v) for v in values if not math.isnan(v)] + [0.05])
    ax.set_ylim(-top * 1.15, top * 1.15)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10], symmetric=True))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{100 * v:+.0f}".replace("-", "−")
                                               if round(100 * v) else "0"))
    ax.axhline(0, color=GREY, linewidth=0.6, zorder=1)
    ax.set_ylabel(label)
    ax.grid(axis="y")
    ax.set_axisbelow(True)


def k_axis(ax, kmax: int, label: str = "attempts k") -> None:
    """Integer k ticks: 1, 2, ..., K up to 8; from 9 on a log2 axis ticked 1, 2, 4, 8, 16, ... and K."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    if kmax <= 8:
        ticks = list(range(1, kmax + 1))
        ax.set_xlim(0.6, kmax + 0.4)
    else:
        ax.set_xscale("log", base=2)
        ticks = sorted({2 ** i for i in range(int(math.log2(kmax)) + 1)} | {kmax})
        if kmax / ticks[-2] < 1.2:          # K just above a power of two: the two labels would touch
            ticks.remove(ticks[-2])
        ax.set_xlim(2 ** -0.25, kmax * 2 ** 0.25)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0f}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(label)


def layer_axis(ax, layers: list[int]) -> None:
    """Integer layer ticks (every layer up to 16, else every other / fourth)."""
    from matplotlib.ticker import FixedLocator

    step = 1 if len(layers) <= 16 else 2 if len(layers) <= 32 else 4
    ax.xaxis.set_major_locator(FixedLocator(layers[::step]))
    ax.set_xlim(min(layers) - 0.6, max(layers) + 0.6)
    ax.set_xlabel("silenced MLP block (layer)")
