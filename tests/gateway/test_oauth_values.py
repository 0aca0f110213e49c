"""The values behind the OAuth resource server: discovery URLs, challenges, principals."""

from __future__ import annotations

from sagents.config._oauth import OAuthConfig
from sagents.gateway._http_security import Credential
from sagents.gateway._oauth import metadata_urls
from sagents.gateway._protected_resource import protected_resource


def test_metadata_is_looked_for_in_the_order_of_the_mcp_specification() -> None:
    assert metadata_urls("https://idp.example.com") == [
        "https://idp.example.com/.well-known/oauth-authorization-server",
        "https://idp.example.com/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://idp.example.com/realms/tools/") == [
        "https://idp.example.com/.well-known/oauth-authorization-server/realms/tools",
        "https://idp.example.com/.well-known/openid-configuration/realms/tools",
        "https://idp.example.com/realms/tools/.well-known/openid-configuration",
    ]


def test_a_challenge_quotes_only_what_rfc_6750_allows_in_a_description() -> None:
    resource = protected_resource(
        OAuthConfig(issuer="https://idp.example.com", required_scopes=("mcp", "mcp:read")),
        "https://gw.example.com/tools/mcp",
    )
    challenge = resource.challenge(
        error="invalid_token", description='a "quoted" \\ kid ünïcode\r\nInjected: 1'
    ).decode("ascii")
    assert challenge == (
        'Bearer error="invalid_token", '
        "error_description=\"a 'quoted' / kid ?n?code??Injected: 1\", "
        'resource_metadata="https://gw.example.com'
        '/.well-known/oauth-protected-resource/tools/mcp", '
        'scope="mcp mcp:read"'
    )
    assert resource.metadata_paths == (
        "/.well-known/oauth-protected-resource/tools/mcp",
        "/.well-known/oauth-protected-resource",
    )


def test_the_principal_of_an_access_token_is_its_issuer_and_subject() -> None:
    first = Credential("token-1", subject="alice", issuer="https://a.example")
    second = Credential("token-2", subject="alice", issuer="https://a.example")
    elsewhere = Credential("token-3", subject="alice", issuer="https://b.example")
    static = Credential("token-1")
    assert first.identity == second.identity  # a refreshed token is the same principal
    assert first.identity != elsewhere.identity  # sub is unique only per issuer
    assert first.identity != static.identity
    assert len(first.identity) == 32
