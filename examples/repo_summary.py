# git and jq as namespaces (examples/cli.json), run in the current directory: git.*, jq.*
import json

recent = git.log(max_count=5, format="%h|%ae|%s")["stdout"].splitlines()
changed = git.status(porcelain=True)["stdout"].splitlines()
authors = jq.run('[.[] | split("|")[1]] | unique', input=json.dumps(recent))[0]
probe = git.log(grep="x; rm -rf ~")  # one argument of --grep: no shell ever sees it
{"recent": recent, "changed": len(changed), "authors": authors, "probe": probe["returncode"]}
