"""``python -m worker.cli``: the same as the ``codemode`` command."""

from worker.cli import main

main()
