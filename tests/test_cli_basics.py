"""The command line answers --help/--version instantly, without loading torch, transformers, textual or ray."""

import subprocess
import sys

from conftest import fresh_python
from reachtui import __version__


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reachtui", *args], capture_output=True, text=True)


def test_version_prints_the_package_version():
    out = _run("--version")
    assert out.returncode == 0
    assert __version__ in out.stdout


def test_help_lists_commands():
    out = _run("--help")
    assert out.returncode == 0
    assert "Usage:" in out.stdout
    listed = out.stdout.split("Commands:", 1)[1].split()
    for command in ("audit", "compare", "export", "generate", "import", "open", "runs"):
        assert command in listed, command


def test_heavy_libraries_are_not_imported_by_import_or_help():
    code = (
        "import sys, reachtui, reachtui.cli, reachtui.engine.audit, reachtui.cluster\n"
        "from click.testing import CliRunner\n"
        "r = CliRunner().invoke(reachtui.cli.cli, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "r = CliRunner().invoke(reachtui.cli.cli, ['--version'])\n"
        "assert r.exit_code == 0, r.output\n"
        "r = CliRunner().invoke(reachtui.cli.cli, ['audit', '--help'])\n"
        "assert r.exit_code == 0 and '--ray' in r.output, r.output\n"
        "bad = [m for m in ('torch', 'transformers', 'textual', 'ray') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    assert fresh_python(code) == ""


def test_audit_and_open_list_every_shared_option_with_its_help():
    from click.testing import CliRunner

    from reachtui.cli import cli
    from reachtui.probes import registry

    shared = ("--task", "--probes", "--budget", "-k", "--temperature", "--seed", "--limit", "--protocol",
              "--max-new-tokens", "--new", "--store", "--batch-size", "--threads", "--trust-remote-code",
              "--allow-download", "--mlp-scan", "--device", "--dtype", "--device-map", "--offload-folder")
    helps = {}
    for command in ("audit", "open"):
        r = CliRunner().invoke(cli, [command, "--help"])
        assert r.exit_code == 0, r.output
        helps[command] = text = " ".join(r.output.split())   # the help wraps
        assert all(f" {flag} " in text or f" {flag}," in text for flag in shared), text
        assert ", ".join(registry.names()) in text   # --probes, from the registry
    assert "PROBE|auto|none" in helps["open"] and "[PROBE]" in helps["audit"]
    assert "at most half" in helps["open"] and "less the load average" in helps["audit"] and "With --ray: per worker" in helps["audit"]


def test_no_help_text_shows_a_doubled_percent_sign():
    """click prints help text as written (no %-formatting): "95%%" would be shown as it stands."""
    from click.testing import CliRunner

    from reachtui.cli import cli

    for command in cli.commands:
        r = CliRunner().invoke(cli, [command, "--help"])
        assert r.exit_code == 0, r.output
        assert "%%" not in r.output, command


def test_every_command_that_opens_a_store_says_the_same_of_store():
    """--store is declared once (commands.options.store_option): each command shows the same help for it."""
    from click.testing import CliRunner

    from reachtui.cli import cli

    with_store = []
    for name, command in sorted(cli.commands.items()):
        r = CliRunner().invoke(cli, [name, "--help"])
        text = " ".join(r.output.split())
        if "--store PATH" in text:
            with_store.append(name)
            assert "--store PATH Audit store [default: $REACHTUI_STORE or ./store/reachtui.sqlite]." in text, name
    assert {"audit", "open", "export", "compare", "runs", "import", "plot"} <= set(with_store)   # serve: open's
