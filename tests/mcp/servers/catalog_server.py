"""An MCP server on the official SDK (low-level ``Server``) that offers prompts, resources,
resource templates and completion, for the forwarding tests. Run over stdio as
``python catalog_server.py [NAME]`` (``NAME`` prefixes its texts, so that two instances differ).

- prompts: ``greet(name)`` (a text and an embedded resource ``note://hello``), ``plain``;
- resources: ``note://hello`` (text), ``note://logo`` (blob);
- template: ``note://items/{id}`` (any id reads as text);
- completion: ``greet``'s ``name`` from ``alice``, ``albert``, ``bob``; the template's ``id``
  from ``1``, ``2``, ``10``;
- tools: ``add_prompt`` and ``add_resource`` (each adds one and announces the changed list:
  ``notifications/*/list_changed`` on handshake-era sessions, ``subscriptions/listen`` events
  on 2026-07-28 ones), ``fail_reads`` (later reads answer JSON-RPC -32603), ``touch(uri)``
  (announces an update of ``uri``: ``notifications/resources/updated`` on a handshake-era
  session that subscribed to it, a ``subscriptions/listen`` event on 2026-07-28), ``flood(n,
  uri)`` (``n`` updates of ``uri`` and of ``n`` URIs nobody subscribed to, whatever was
  subscribed: a hostile server) and ``subscriptions`` (what was subscribed and unsubscribed);
- resource subscriptions (``resources/subscribe`` / ``resources/unsubscribe``, or
  ``subscriptions/listen`` with ``resourceSubscriptions``), unless started with a further
  argument ``nosub``; with ``legacy`` it refuses ``server/discover`` (a handshake-era server).

A test fixture, not library code.
"""

from __future__ import annotations

import base64
import contextlib
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp.shared.exceptions import MCPError

NAMES = ("alice", "albert", "bob")
IDS = ("1", "2", "10")


def build_server(label: str, *, subscribe: bool = True) -> Server[Any]:
    """The server; ``label`` prefixes every text it returns; ``subscribe`` offers resource
    subscriptions."""
    bus = InMemorySubscriptionBus()
    subscribed: set[str] = set()
    history: list[str] = []
    prompts = [
        types.Prompt(
            name="greet",
            description="Greet someone",
            arguments=[types.PromptArgument(name="name", required=True)],
        ),
        types.Prompt(name="plain", description="No arguments"),
    ]
    resources = [
        types.Resource(uri="note://hello", name="hello", mime_type="text/plain"),
        types.Resource(uri="note://logo", name="logo", mime_type="image/png"),
    ]
    failing = {"reads": False}

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        if params.name == "plain":
            text = types.TextContent(text=f"{label}: plain")
            return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])
        if params.name != "greet":
            raise MCPError(code=-32602, message=f"unknown prompt {params.name!r}")
        who = (params.arguments or {}).get("name", "nobody")
        note = types.EmbeddedResource(
            resource=types.TextResourceContents(uri="note://hello", text="hello note")
        )
        return types.GetPromptResult(
            description="a greeting",
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(text=f"{label}: hello {who}")
                ),
                types.PromptMessage(role="user", content=note),
            ],
        )

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=resources)

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(uri_template="note://items/{id}", name="item")
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if failing["reads"]:
            raise MCPError(code=-32603, message="reads are failing")
        if uri == "note://logo":
            blob = base64.b64encode(b"\x89PNG").decode()
            contents: list[types.TextResourceContents | types.BlobResourceContents] = [
                types.BlobResourceContents(uri=uri, mime_type="image/png", blob=blob)
            ]
        elif uri == "note://hello" or uri.startswith("note://items/"):
            contents = [types.TextResourceContents(uri=uri, text=f"{label}: {uri}")]
        else:
            raise MCPError(code=-32002, message=f"no resource {uri!r}")
        return types.ReadResourceResult(contents=contents)

    async def complete(
        ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref, argument = params.ref, params.argument
        if isinstance(ref, types.PromptReference) and ref.name == "greet":
            pool = NAMES
        elif isinstance(ref, types.ResourceTemplateReference) and ref.uri == "note://items/{id}":
            pool = IDS
        else:
            raise MCPError(code=-32602, message="nothing to complete")
        values = [v for v in pool if v.startswith(argument.value)]
        return types.CompleteResult(completion=types.Completion(values=values, total=len(values)))

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        schema: dict[str, Any] = {"type": "object", "properties": {}}
        touch: dict[str, Any] = {
            "type": "object",
            "properties": {"uri": {"type": "string"}, "n": {"type": "integer"}},
        }
        return types.ListToolsResult(
            tools=[
                *(
                    types.Tool(name=name, input_schema=schema)
                    for name in ("add_prompt", "add_resource", "fail_reads", "subscriptions")
                ),
                types.Tool(name="touch", input_schema=touch),
                types.Tool(name="flood", input_schema=touch),
            ]
        )

    async def updated(ctx: ServerRequestContext[Any], uri: str) -> None:
        await bus.publish(ResourceUpdated(uri=uri))
        with contextlib.suppress(Exception):  # no standing channel on 2026-07-28
            await ctx.session.send_resource_updated(uri)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name == "add_prompt":
            prompts.append(types.Prompt(name=f"extra{len(prompts)}"))
            await bus.publish(PromptsListChanged())
            with contextlib.suppress(Exception):  # no standing channel on 2026-07-28
                await ctx.session.send_prompt_list_changed()
        elif params.name == "add_resource":
            resources.append(types.Resource(uri=f"note://extra{len(resources)}", name="extra"))
            await bus.publish(ResourcesListChanged())
            with contextlib.suppress(Exception):
                await ctx.session.send_resource_list_changed()
        elif params.name == "fail_reads":
            failing["reads"] = True
        elif params.name == "touch":
            uri = str((params.arguments or {})["uri"])
            if any(uri.startswith(s) for s in subscribed) or ctx.protocol_version == "2026-07-28":
                await updated(ctx, uri)
        elif params.name == "flood":
            uri, n = str((params.arguments or {})["uri"]), int((params.arguments or {})["n"])
            for i in range(n):
                await updated(ctx, f"note://unknown/{i}")
                await updated(ctx, uri)
        elif params.name == "subscriptions":
            return types.CallToolResult(
                content=[types.TextContent(text=" ".join(history))],
                structured_content={"subscribed": sorted(subscribed), "history": history},
            )
        else:
            raise MCPError(code=-32602, message=f"unknown tool {params.name!r}")
        return types.CallToolResult(content=[types.TextContent(text="done")])

    async def on_subscribe(
        ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        subscribed.add(str(params.uri))
        history.append(f"+{params.uri}")
        return types.EmptyResult()

    async def on_unsubscribe(
        ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        subscribed.discard(str(params.uri))
        history.append(f"-{params.uri}")
        return types.EmptyResult()

    listener = ListenHandler(bus)

    async def on_listen(
        ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        uris = params.notifications.resource_subscriptions or []
        if not subscribe and uris:
            params = params.model_copy(
                update={
                    "notifications": params.notifications.model_copy(
                        update={"resource_subscriptions": None}
                    )
                }
            )
            uris = []
        for uri in uris:
            subscribed.add(uri)
            history.append(f"+{uri}")
        try:
            return await listener(ctx, params)
        finally:
            for uri in uris:
                subscribed.discard(uri)
                history.append(f"-{uri}")

    handlers: dict[str, Any] = (
        {"on_subscribe_resource": on_subscribe, "on_unsubscribe_resource": on_unsubscribe}
        if subscribe
        else {}
    )
    return Server(
        "catalog",
        **handlers,
        version="1.0",
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_completion=complete,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=on_listen,
    )


async def _serve(label: str, flags: list[str]) -> None:
    server = build_server(label, subscribe="nosub" not in flags)
    options = server.create_initialization_options(
        NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    )
    async with stdio_server() as (read, write):
        if "legacy" not in flags:
            await server.run(read, write, options)
            return
        # a handshake-era server: server/discover goes unanswered (the client falls back to
        # initialize after its discover timeout)
        send, receive = anyio.create_memory_object_stream[Any](16)

        async def drop_discover() -> None:
            async with send:
                async for item in read:
                    message = getattr(getattr(item, "message", None), "method", None)
                    if message != "server/discover":
                        await send.send(item)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drop_discover)
            await server.run(receive, write, options)
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(_serve, sys.argv[1] if len(sys.argv) > 1 else "catalog", sys.argv[2:])
