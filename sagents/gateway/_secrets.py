"""The secrets a gateway redacts (docs/gateway.md, "Secrets"): which values, and its logs.

One :class:`~sagents.core._secrets.Redactor` per gateway, shared by every part that shows
text: the upstream servers' results, progress messages and stderr logs (through their
settings), every ``tools/call`` answer (the gateway), and the process's log handlers for the
gateway's lifetime. run_script's output, the run records, the audit and the console show what
those already redacted: a script's only source of a secret is a tool result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from sagents.config._loader import SagentsConfig
from sagents.core._secrets import RedactingFilter, Redactor
from sagents.gateway._settings import GatewaySettings

__all__ = [
    "OAUTH_SECRET_NAME",
    "OPERATOR_SECRET_NAME",
    "TOKEN_NAME",
    "gateway_redactor",
    "redacted_logs",
]

TOKEN_NAME = "SAGENTS_GATEWAY_TOKEN"
"""The name the gateway's bearer token is redacted by."""
OAUTH_SECRET_NAME = "oauth.clientSecret"
"""The name the gateway's OAuth client secret (``oauth.clientSecretEnv``) is redacted by."""
OPERATOR_SECRET_NAME = "operator-secret"
"""The name the operator secret (the console's login) is redacted by."""


def gateway_redactor(config: SagentsConfig, settings: GatewaySettings) -> Redactor:
    """The secrets of ``config`` (:attr:`SagentsConfig.secrets`), the gateway's tokens and its
    OAuth client secret."""
    tokens = [(TOKEN_NAME, settings.bearer_token)] if settings.bearer_token else []
    tokens += [
        (f"token:{profile.name}", token) for token, profile in settings.token_profiles.items()
    ]
    if config.oauth is not None and config.oauth.client_secret:
        tokens.append((OAUTH_SECRET_NAME, config.oauth.client_secret))
    return Redactor([*config.secrets, *tokens])


@contextmanager
def redacted_logs(redactor: Redactor) -> Iterator[None]:
    """Redact the records of every handler of the root logger while the block runs (each
    logger's records reach them by propagation)."""
    log_filter = RedactingFilter(redactor)
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(log_filter)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(log_filter)
