"""sagents.gateway._chat: the chat page of ``sagents chat --web`` (docs/chat.md): plain
server-rendered pages and one small script, over the AG-UI route of
:mod:`sagents.agent.ag_ui`."""

from sagents.gateway._chat._app import CHAT_COOKIE, build_chat_app

__all__ = ["CHAT_COOKIE", "build_chat_app"]
