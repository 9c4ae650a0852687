"""``codemode inbox``: a small server-rendered web page where an authenticated person sees
every call waiting for approval across executions and approves, denies, edits the arguments
then approves, or answers instead of the tool; and where signed links from notifications land.

- ``auth.py``: who is at the page (trusted proxy header, users file of hashed tokens, a login cookie)
- ``data.py``: what waits and what was decided, from Temporal's visibility index and histories
- ``views.py``: HTML (jinja2 templates under ``templates/``)
- ``app.py``: the aiohttp application: routes, forms, decisions (through ``send_decision``)
"""
