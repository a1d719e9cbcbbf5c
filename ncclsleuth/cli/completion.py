"""``ncclsleuth completion SHELL``: the shell completion script (click's), to source or install."""
from __future__ import annotations

import click

from . import guard, main


@main.command("completion", epilog="""\b
Examples:
  eval "$(ncclsleuth completion bash)"                      # this shell (add it to ~/.bashrc)
  ncclsleuth completion zsh > ~/.zfunc/_ncclsleuth          # zsh, with ~/.zfunc in fpath
  ncclsleuth completion fish > ~/.config/fish/completions/ncclsleuth.fish
""")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@guard
def completion(shell: str) -> None:
    """Print the completion script of SHELL (commands, options, choices and paths complete)."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    assert cls is not None  # the choices are the shells click knows
    click.echo(cls(main, {}, "ncclsleuth", "_NCCLSLEUTH_COMPLETE").source())
