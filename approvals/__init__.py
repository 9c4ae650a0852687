"""Who may decide a call, and the proof that they did: every rule of "who decides what" in one
place (issues 37 and 45).

* ``conditions``: the one condition language and its one evaluator, for ``approval_when`` and
  ``[[policy]] when`` alike (fail closed: a condition that cannot be judged never lets a call
  through).
* ``approval_when``: a tool config's conditions (MCP servers' tools, CLI commands).
* ``policy``: the approvers file's ``[[policy]]`` rules, judged on the validated arguments.
* ``approvers_file``: the approvers file (TOML): people with their keys, aliases and groups,
  services that sign for people, per-tool rules, defaults by source, policy rules.
* ``gate``: what the worker tells the workflow about one call (recorded in the history): who may
  decide, the keys, who started the run (authenticated), what the policy said.
* ``tally``: which decisions count (the check the workflow, the audit and ``--verify`` share).
* ``keys``: Ed25519 key pairs; ``signing``: what a decision (and a start) signs.
* ``decision_checks``: edited arguments and answers against the tool's schemas.
* ``notify``: the notifications' library (channels, links, the config).

Nothing here imports temporalio: the workflow, the inbox and the CLI all use these."""
