"""The CLI entry point answers --help and --version like a newcomer expects."""

from click.testing import CliRunner

from tenantgpu.cli import main


def test_help_lists_what_tenantgpu_is() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "fractional GPUs" in result.output


def test_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert "0.1.0" in result.output
