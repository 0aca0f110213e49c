"""A tiny stdlib-only legacy MCP server (protocol 2025-06-18) that ignores ``server/discover``.

It starts in milliseconds (the 200-cycle process-hygiene test needs that) and stands for a legacy
server that does not answer requests it does not know. Tools: ``echo`` and ``grow`` (adds a tool
and sends ``notifications/tools/list_changed``). A test fixture, not library code.
"""

import json
import sys

tools = [
    {
        "name": "echo",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    },
    {"name": "grow", "inputSchema": {"type": "object"}},
    {"name": "scalar", "inputSchema": {"type": "string"}},
]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, rid = request.get("method"), request.get("id")
    if method == "initialize":
        result: dict[str, object] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "tiny", "version": "0.0.1"},
        }
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call":
        name = request["params"]["name"]
        if name == "grow":
            tools.append({"name": f"grown{len(tools)}", "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        text = json.dumps(request["params"].get("arguments") or {})
        result = {"content": [{"type": "text", "text": text}]}
    else:
        continue  # notifications and unknown requests (server/discover) are ignored
    send({"jsonrpc": "2.0", "id": rid, "result": result})
