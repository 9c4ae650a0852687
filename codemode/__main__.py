"""``python -m codemode``: the same as the ``codemode`` command."""

from codemode.apps.cli import main

main()
