"""Every keyboard action of the app, one record each: the bindings, the command palette's fixed entries
and the help screen are all derived from this list (a `--keymap` remaps by id)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from textual.binding import Binding
from textual.keys import KEY_ALIASES, KEY_NAME_REPLACEMENTS, Keys, _character_to_key, key_to_character


@dataclass(frozen=True)
class Action:
    id: str                    # remappable binding id, "<section>.<name>"
    keys: str                  # default keys, comma-separated (Textual key names)
    action: str                # the Textual action string
    description: str           # footer label
    tooltip: str               # what it does, for the help screen
    show: bool = True          # in the footer
    key_display: str | None = None
    palette: str | None = None  # a command-palette title, for actions that take no state
    scope: str = "main"        # where it is bound: "global" (the App: any screen), "main" (the main
                               # screen; "app." actions run on the App), "compare" (the comparison
                               # view), "table" (the question table)
    priority: bool = False     # handled as the key arrives, before keys queued behind it (an action
                               # that focuses an input: what is typed next must reach the input)


ACTIONS: tuple[Action, ...] = (
    Action("app.quit", "q", "app.quit", "Quit", "Quit reachtui (a running audit stops after its batch)", scope="global"),
    Action("app.help", "question_mark", "app.help", "Help", "Every key and what the glyphs mean", palette="view: help",
           scope="global"),
    Action("filter.all", "a", "filter('all')", "All", "Show every question", palette="filter: all questions"),
    Action("filter.failure", "f", "failure_filter", "Failure set",
           "Reachable under a probe, not realized; press again for the next probe"),
    Action("filter.realized", "r", "filter('realized')", "Realized", "Right by default", palette="filter: realized"),
    Action("filter.unreachable", "u", "filter('unreachable')", "Unreachable",
           "Wrong by default and under every probe", palette="filter: unreachable"),
    Action("app.search", "slash", "search", "Search", "Full-text search in questions and outputs",
           palette="filter: search…", priority=True),
    Action("app.clear_search", "escape", "clear_search", "Clear search", "Clear the search", show=False),
    Action("live.run", "enter", "live_run", "Run", "Run the selected question under the edited layers",
           palette="run: live run on the selected question"),
    Action("layer.left", "left_square_bracket", "layer_move(-1)", "◂ layer", "Move the layer cursor left",
           show=False, key_display="["),
    Action("layer.right", "right_square_bracket", "layer_move(1)", "layer ▸", "Move the layer cursor right",
           show=False, key_display="]"),
    Action("layer.skip", "x", "layer('skip')", "Skip", "Skip / restore the layer under the cursor"),
    Action("layer.repeat", "plus,equals_sign", "layer('repeat')", "Repeat",
           "Run the layer under the cursor once more (at most twice)", show=False, key_display="+"),
    Action("layer.less", "minus", "layer('less')", "Less", "Run the layer under the cursor one time fewer (0 = skipped)",
           show=False, key_display="-"),
    Action("layer.silence", "m", "layer('silence')", "Silence MLP", "Silence / restore the MLP of the layer under the cursor"),
    Action("layer.reset", "0", "reset_layers", "Reset", "Back to the default route with nothing silenced", show=False,
           palette="layer: reset to the default route"),
    Action("layer.edit", "e", "edit_route", "Type route", "Type a route like 0-3,3,5-7",
           palette="layer: type a route…"),
    Action("live.apply", "A", "apply", "Apply to set", "Apply the intervention to the failure set and the realized set"),
    Action("live.explorations", "o", "explorations", "Explorations",
           "Re-open a stored exploration and list the questions it changed", show=False, palette="run: explorations…"),
    Action("live.cancel", "c", "app.cancel_work", "Cancel", "Cancel a running apply", show=False),
    Action("view.charts", "v", "app.charts", "Charts", "MLP scan, reachable@k, pass@k"),
    Action("view.trace", "t", "toggle_trace", "Trace",
           "Show/hide the trace pane in place of the detail: where the edited layers change the answer (the first "
           "differing token, the top-5 under each, the gold's rank, the logit lens along the route)",
           palette="view: trace pane (divergence and logit lens)"),
    Action("trace.left", "less_than_sign", "trace_move(-1)", "◂ token", "Read the trace one token earlier",
           show=False, key_display="<"),
    Action("trace.right", "greater_than_sign", "trace_move(1)", "token ▸", "Read the trace one token later",
           show=False, key_display=">"),
    Action("view.lens_sort", "L", "app.lens_sort", "Lens sort",
           "Sort the failure set shown by the logit lens: the gold token pushed out of the top-5 latest "
           "along the route first (as `reachtui export lens` tabulates it)", show=False,
           palette="sort: failure set by the logit lens"),
    Action("view.intervals", "i", "app.intervals", "Intervals",
           "Show/hide per probe reachable, gap, retained, chance control and excess with 95% intervals "
           "(as the summary export writes them) in the question pane's place", show=False),
    Action("export.csv", "E", "app.export('questions', 'csv')", "Export",
           "Write the table as filtered now to a CSV file in exports/ beside the store (git-ignored); the status "
           "line says where"),
    Action("app.focus_next", "tab", "app.focus_next", "Focus", "Move the focus (question table, question pane, live result)", show=False),
    Action("compare.all", "a", "compare_all", "All", "Every compared question", scope="compare"),
    Action("compare.gained", "r", "compare_filter('realized', 'gained')", "Realized gained",
           "Right by default in run B only", scope="compare"),
    Action("compare.lost", "R", "compare_filter('realized', 'lost')", "Realized lost",
           "Right by default in run A only", scope="compare"),
    Action("compare.both_wrong", "w", "compare_filter('realized', 'never')", "Both wrong",
           "Wrong by default in both runs", scope="compare"),
    Action("compare.expanded", "e", "compare_filter('reachable', 'gained')", "Expanded",
           "Reachable in run B only (press again for the next probe)", scope="compare"),
    Action("compare.shrunk", "s", "compare_filter('reachable', 'lost')", "Shrunk",
           "Reachable in run A only (press again for the next probe)", scope="compare"),
    Action("compare.preserved", "p", "compare_filter('reachable', 'kept')", "Preserved",
           "Reachable in both runs (press again for the next probe)", show=False, scope="compare"),
    Action("compare.out_of_reach", "o", "compare_filter('reachable', 'never')", "Out of reach",
           "Reachable in neither run (press again for the next probe)", show=False, scope="compare"),
    Action("compare.charts", "v", "compare_charts", "Curves", "Both runs' pass@k and reachable@k on one chart",
           scope="compare"),
    Action("table.down", "down,j", "cursor_down", "Down", "Next question", show=False, scope="table"),
    Action("table.up", "up,k", "cursor_up", "Up", "Previous question", show=False, scope="table"),
    Action("table.page_down", "pagedown,ctrl+f,ctrl+d", "page_down", "Page down", "A page down", show=False,
           scope="table"),
    Action("table.page_up", "pageup,ctrl+b,ctrl+u", "page_up", "Page up", "A page up", show=False, scope="table"),
    Action("table.first", "home,g", "first", "First", "The first question", show=False, scope="table"),
    Action("table.last", "end,G", "last", "Last", "The last question", show=False, scope="table"),
)

BY_ID = {a.id: a for a in ACTIONS}
#: The footer's keys by importance: where the terminal is too narrow for all of them, those first (the
#: help screen, `?`, lists every key).
FOOTER_ORDER = ("app.help", "app.quit", "live.run", "filter.failure", "layer.silence", "layer.skip", "live.apply",
                "app.search", "view.charts", "filter.all", "filter.realized", "filter.unreachable", "layer.edit",
                "export.csv", "compare.all", "compare.gained", "compare.lost", "compare.expanded", "compare.shrunk",
                "compare.charts", "compare.both_wrong")
#: The command palette's own key (not a binding of ours: Textual's).
PALETTE_KEY = "ctrl+p"


#: The scopes active together on each screen (with the question table focused).
SCREENS = {"main": ("global", "main", "table"), "compare": ("global", "compare", "table")}


def bindings(scope: str) -> list[Binding]:
    """The bindings of one scope. A screen repeats the global ones, so that its footer starts with them (a
    screen's bindings come before the App's)."""
    scopes = ("global", scope) if scope in SCREENS else (scope,)
    return [Binding(a.keys, a.action, a.description, show=a.show, id=a.id, key_display=a.key_display,
                    tooltip=a.tooltip, priority=a.priority) for a in ACTIONS if a.scope in scopes]


def binding_ids() -> list[str]:
    """Every remappable binding id (`reachtui open --keymap`)."""
    return [a.id for a in ACTIONS]


def keys_of(action: Action, keymap: Mapping[str, str] | None = None) -> list[str]:
    """The keys an action has now: the keymap's, else its defaults."""
    return [k.strip() for k in ((keymap or {}).get(action.id) or action.keys).split(",") if k.strip()]


#: Key modifiers, in the order Textual writes them ("ctrl+shift+left").
MODIFIERS = ("ctrl", "alt", "meta", "super", "hyper", "shift")
#: Keys with names (not characters): escape, f1, pageup, ... and Textual's aliases (tab = ctrl+i).
_NAMED_KEYS = {k.value.rpartition("+")[2] for k in Keys if not k.value.startswith("<")} | {
    name.rpartition("+")[2] for primary, aliases in KEY_ALIASES.items() for name in (primary, *aliases)}


#: Textual's short names of some characters ("plus" for plus_sign, "minus" for hyphen_minus).
_REPLACED = {short: long for long, short in KEY_NAME_REPLACEMENTS.items()}


def canonical_key(key: str) -> str | None:
    """One key as Textual reads a key press, or None for a name Textual knows no key by: modifiers in
    `MODIFIERS` order, a character by its name ("?" is question_mark), shift and a letter as the capital
    letter ("shift+f" is "F", the key a terminal sends), an alias as its key ("ctrl+i" is "tab")."""
    key = key.strip()
    if len(key) == 1:
        mods, base = [], key
    else:
        *mods, base = key.split("+")
        mods = [m.strip().lower() for m in mods]
        base = base.strip()
        if not base or any(m not in MODIFIERS for m in mods) or len(set(mods)) != len(mods):
            return None
    if len(base) == 1:
        char = base
    elif base.lower() in _NAMED_KEYS:
        char, base = None, base.lower()
    else:
        name = base.lower()
        char = key_to_character(_REPLACED.get(name, name))
        if char is None:
            return None
    if char is not None:
        if not char.isprintable() or char.isspace() and char != " ":
            return None
        if mods == ["shift"] and char.isascii() and char.isalpha():
            mods, char = [], char.upper()
        base = "space" if char == " " else _character_to_key(char)
    full = "+".join([m for m in MODIFIERS if m in mods] + [base])
    return next((primary for primary, aliases in KEY_ALIASES.items() if full in aliases), full)


def canonical_keys(keys: str) -> str | None:
    """A comma-separated list of keys, each `canonical_key` (None when one of them is not a key)."""
    out = [canonical_key(k) for k in keys.split(",") if k.strip()]
    return ",".join(out) if out and None not in out else None


def keymap_clash(keymap: Mapping[str, str]) -> str | None:
    """One line naming two actions a keymap gives the same key where both are active at once (on one screen:
    its own, the table's and the App's), else None. Keys compare as Textual reads them (`canonical_key`:
    "?" is question_mark, "shift+f" is "F")."""
    for scopes in SCREENS.values():
        owner: dict[str, str] = {}
        for a in ACTIONS:
            if a.scope not in scopes:
                continue
            for key in (canonical_key(k) or k for k in keys_of(a, keymap)):
                if key in owner and owner[key] != a.id:
                    return (f"key {key!r} would run both {owner[key]} and {a.id}; map one of them to another "
                            f"key too")
                owner[key] = a.id
    return None


def help_rows(keymap: Mapping[str, str] | None = None,
              display: Callable[[Binding], str] = lambda b: b.key) -> list[tuple[str, str, str]]:
    """(keys as shown, what it does, binding id) for every action, keys as remapped by `keymap`;
    `display` writes a key for people (the app's `get_key_display`)."""
    rows = []
    for a in ACTIONS:
        remapped = a.id in (keymap or {})
        shown = [display(Binding(k, a.action, key_display=a.key_display if i == 0 and not remapped else None))
                 for i, k in enumerate(keys_of(a, keymap))]
        rows.append((" ".join(dict.fromkeys(shown)), a.tooltip, a.id))
    rows.append((PALETTE_KEY, "Command palette: every action by name", "app.palette"))
    return rows
