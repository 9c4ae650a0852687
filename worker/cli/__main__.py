"""``python -m codemode.worker.cli`` (as ``python -m codemode``): the same as the ``codemode`` command."""

from codemode.worker.cli import main

main()
