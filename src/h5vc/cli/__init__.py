"""The ``h5vc`` command: inspect and maintain versioned files, and a demo.

Built on click; ``main`` is the console-script entry point and ``cli`` the click
group (test it with ``click.testing.CliRunner``).
"""

from h5vc.cli._app import CliError, cli, main

__all__ = ["CliError", "cli", "main"]
