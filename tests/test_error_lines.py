"""One rule for the line an error is shown as (`reachtui.errors.first_line`, and `error_line` where the kind of
error is not otherwise said): a library's message gives its first line (the lines after one that ends in ':'
joined to it), an empty message its type's name, never an IndexError; the command line's internal errors and
library warnings, the protocol, the tables' --where and the app all say errors by it."""

from __future__ import annotations

import warnings

import pytest
from conftest import run_main

from reachtui.errors import ReachError, error_line, first_line

PYDANTIC_LIKE = "1 validation error for Config:\n  temperature\n    must be >= 0"


@pytest.mark.parametrize("exc, first, shown", [
    (ValueError("bad value\n  at line 3"), "bad value", "ValueError: bad value"),
    (RuntimeError(""), "RuntimeError", "RuntimeError"),
    (RuntimeError(" \n\n "), "RuntimeError", "RuntimeError"),
    (ValueError(PYDANTIC_LIKE), "1 validation error for Config: temperature must be >= 0",
     "ValueError: 1 validation error for Config: temperature must be >= 0"),
    (KeyError("model_type"), "'model_type' is missing or unknown (KeyError)",
     "'model_type' is missing or unknown (KeyError)"),
    (ReachError("--budget must be at least 1, not 0"), "--budget must be at least 1, not 0",
     "--budget must be at least 1, not 0"),
    (OSError(28, "No space left on device"), "[Errno 28] No space left on device",
     "OSError: [Errno 28] No space left on device"),
])
def test_an_error_is_one_line(exc, first, shown):
    assert first_line(exc) == first
    assert error_line(exc) == shown
    assert error_line(exc, 8) == shown[:8]


@pytest.mark.parametrize("message, line", [
    ("a bug\n  while reading the cache", "ZeroDivisionError: a bug"),
    ("", "ZeroDivisionError"),
])
def test_an_internal_error_is_its_type_and_first_line(monkeypatch, message, line):
    import reachtui.presets as presets

    def boom():
        raise ZeroDivisionError(message)

    monkeypatch.setattr(presets, "preset_names", boom)
    code, _out, err = run_main(["protocol", "--presets"])
    assert code == 1 and err == f"error: internal error: {line} (run with --debug for the traceback)\n"


def test_a_library_warning_is_its_first_line(monkeypatch):
    import reachtui.presets as presets

    names = presets.preset_names

    def warns():
        warnings.warn("`x` is deprecated\n  see https://example.org/migrate", FutureWarning, stacklevel=1)
        return names()

    monkeypatch.setattr(presets, "preset_names", warns)
    code, out, err = run_main(["protocol", "--presets"])
    assert code == 0 and out.startswith("gsm8k-cot ") and err == "warning: `x` is deprecated\n"
