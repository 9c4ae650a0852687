# Tools of two MCP servers (examples/mcp.json) as namespaces: memory.*, everything.*
memory.create_entities(entities=[
    {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
])
total = everything.get_sum(a=2, b=3)
try:
    memory.delete_entities(entityNames=["Ada"])  # destructive: waits for a person's approval
except PermissionError as e:
    print("not deleted:", e)
[total, memory.read_graph()]
