"""What the agent integrations share and users do not import.

    hooks.py / tools.py / middleware.py  --capture-->  consolidate (merge near-duplicates,
                                                        retire contradicted facts)
    mcp_server.py  --imports-->  mcp_sdk (the parts of the mcp SDK the stdio server uses)

The public faces are the top-level hooks, tools, sessions, middleware, extract and
mcp_server modules.
"""
