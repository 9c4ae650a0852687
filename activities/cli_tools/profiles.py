"""What we know about some common binaries, so a short configuration is a safe one.

A profile is picked by the binary's name (``git``, ``jq``, ``sqlite3``; ``"profile": false``
turns it off) and the configuration is laid over it: its keys win. A profile gives:

- ``read_only``: the subcommands that change nothing. They run without approval and are
  retried freely; every other subcommand needs a person's approval and is never run twice
  for one call, unless the configuration says otherwise;
- ``flags``: flags the help text leaves out (``git log -h`` lists nine options: no
  ``-n``, ``--oneline`` or ``--format``), and flags the code may never pass (``null``):
  those that write files or run programs (``git diff --output``, ``--ext-diff``,
  ``git grep -O``, sqlite3's ``-cmd`` and ``-nonce``);
- ``env``: fixed variables (git never prompts, pages or opens an editor);
- ``args``: host arguments before the subcommand (sqlite3 runs in ``-safe`` mode, where
  ``.shell`` and ``.system`` are refused);
- how to ask for help, positional arguments a usage line gets wrong, and whether long
  flags take ``--flag=value``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import FlagSpec, PositionalSpec


@dataclass(frozen=True)
class Profile:
    read_only: frozenset[str] = frozenset()
    #: By subcommand (``"*"``: every one): parameter name -> the flag, or None (refused).
    flags: dict[str, dict[str, FlagSpec | None]] = field(default_factory=dict)
    positionals: dict[str, list[PositionalSpec]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    help: tuple[str, ...] | None = None
    inline_values: bool = False
    stdin: bool = False


def _flags(**types: str) -> dict[str, FlagSpec | None]:
    """``max_count="int"`` -> a flag spelled ``--max-count`` of that type."""
    return {name: FlagSpec(type=t) for name, t in types.items()}  # type: ignore[arg-type]


_GIT_REVISIONS = {
    **_flags(
        max_count="int",
        skip="int",
        since="str",
        until="str",
        author="str",
        committer="str",
        grep="str",
        format="str",
        date="str",
        oneline="bool",
        reverse="bool",
        all="bool",
        first_parent="bool",
        no_merges="bool",
        merges="bool",
        stat="bool",
        shortstat="bool",
        name_only="bool",
        name_status="bool",
        follow="bool",
    ),
    "patch": FlagSpec(type="bool", flag="-p", help="show the patch of each commit"),
}
#: Flags that write files or run programs, refused on every subcommand.
_GIT_REFUSED: dict[str, FlagSpec | None] = {
    name: None
    for name in ("output", "ext_diff", "textconv", "open_files_in_pager", "exec", "upload_pack", "receive_pack")
}

GIT = Profile(
    read_only=frozenset(
        {
            "log",
            "show",
            "diff",
            "status",
            "blame",
            "shortlog",
            "describe",
            "grep",
            "ls-files",
            "ls-tree",
            "rev-parse",
            "rev-list",
            "cat-file",
            "show-ref",
            "merge-base",
            "name-rev",
            "diff-tree",
            "whatchanged",
        }
    ),
    flags={"*": _GIT_REFUSED, "log": _GIT_REVISIONS, "show": _GIT_REVISIONS, "shortlog": _GIT_REVISIONS},
    positionals={
        # `git show -h` prints log's usage: its arguments are objects.
        "show": [
            PositionalSpec(name="object", variadic=True),
            PositionalSpec(name="path", variadic=True, after_dashdash=True),
        ],
    },
    env={"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "false", "GIT_PAGER": "cat", "GIT_OPTIONAL_LOCKS": "0"},
    inline_values=True,
)

JQ = Profile(
    read_only=frozenset({""}),
    flags={
        "*": {
            **_flags(
                compact_output="bool",
                raw_output="bool",
                slurp="bool",
                null_input="bool",
                sort_keys="bool",
                exit_status="bool",
                join_output="bool",
            ),
            "arg": FlagSpec(type="dict[str, str]", help="name -> string: $name in the filter"),
            "argjson": FlagSpec(type="dict[str, str]", help="name -> JSON text: $name in the filter"),
        }
    },
    positionals={
        "": [PositionalSpec(name="filter", required=True), PositionalSpec(name="files", variadic=True)],
    },
    stdin=True,
)

SQLITE3 = Profile(
    help=("-help",),
    args=("-safe",),
    flags={"": {name: None for name in ("cmd", "init", "nonce", "A", "interactive")}},
)

PROFILES: dict[str, Profile] = {"git": GIT, "jq": JQ, "sqlite3": SQLITE3}
NONE = Profile()
