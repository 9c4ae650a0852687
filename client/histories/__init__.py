"""Reading and verifying an execution's Temporal history, with no worker: the audit timeline
(``audit.py``), its payloads decoded (``decode.py``), how decisions read (``decisions.py``) and
which counted under an approvers file (``signed_decisions.py``), what a parked sandbox did
(``parking.py``), ``codemode history --verify`` (``verify.py``) and a session as a Jupyter
notebook (``notebook.py``)."""
