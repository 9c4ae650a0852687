"""Who may decide a call, and the proof that they did (issue 37).

* ``keys``: Ed25519 key pairs (``ed25519:BASE64`` public keys, private keys in the user's
  config directory).
* ``signing``: what a decision signs (execution, call, decision, a hash of the arguments
  approved and of the answer, a time) and ``sign_decision`` / ``verify_signature``.
* ``config``: the approvers file (TOML): people, groups, per-tool rules, defaults by source,
  policy rules.
* ``policy``: the rules' small condition language, evaluated on the host.
* ``gate``: what the worker tells the workflow about one call (recorded in the history once).
* ``tally``: which decisions count (the check the workflow, the audit and ``--verify`` share).
* ``activity``: the activity that reads the file and evaluates the policy for one call.

Nothing here but ``activity`` imports temporalio: the inbox and the CLI sign with these."""
