"""Number options read as people type them: ASCII digits only.

Python's int() and float() read any Unicode digit ('٣' is 3, '１２' is 12), so click's INT and FLOAT take
`--budget ٣` as 3 without a word. Every number option of the CLI uses these types instead: a number written
in other digits is one usage line (exit 2), like any other bad value.
"""

from __future__ import annotations

import click


class _AsciiDigits(click.ParamType):
    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{value!r} is not a number written in ASCII digits", param, ctx)
        return super().convert(value, param, ctx)


class AsciiInt(_AsciiDigits, click.types.IntParamType):
    pass


class AsciiFloat(_AsciiDigits, click.types.FloatParamType):
    pass


class AsciiIntRange(_AsciiDigits, click.IntRange):
    pass


class AsciiFloatRange(_AsciiDigits, click.FloatRange):
    pass


INT = AsciiInt()
FLOAT = AsciiFloat()
