"""A Google-style OAuth 2.0 token endpoint (``POST /_oauth/token``) for Vertex tests.

``google-auth`` refreshes a service-account credential by posting a signed JWT
assertion (``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``) to the key
file's ``token_uri``; pointing that at the simulator exercises the real library end to
end without leaving loopback. The endpoint checks the assertion's shape (three
base64url parts, a ``scope`` and an ``aud`` claim), issues opaque tokens that expire
after ``expires_in`` seconds, and counts them, so a test can see a token refreshed
before it expires and never more often than needed.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass, field

from aiohttp import web

JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEFAULT_TOKEN_LIFETIME_S = 3600


@dataclass
class OAuthState:
    """Issued tokens and their lifetime (tests may change ``expires_in``)."""

    expires_in: int = DEFAULT_TOKEN_LIFETIME_S
    issued: list[str] = field(default_factory=list)

    def reset(self) -> None:
        """Forget issued tokens; back to the default lifetime."""
        self.expires_in = DEFAULT_TOKEN_LIFETIME_S
        self.issued.clear()


def _claims(assertion: str) -> dict[str, object] | None:
    parts = assertion.split(".")
    if len(parts) != 3:
        return None
    body = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(body))
    except (ValueError, binascii.Error):
        return None
    return claims if isinstance(claims, dict) else None


def _refused(description: str) -> web.Response:
    return web.json_response(
        {"error": "invalid_grant", "error_description": description}, status=400
    )


def add_oauth_routes(app: web.Application, state: OAuthState) -> None:
    """Mount ``POST /_oauth/token``."""

    async def token(request: web.Request) -> web.Response:
        form = await request.post()
        if form.get("grant_type") != JWT_GRANT:
            return _refused(f"grant_type must be {JWT_GRANT}")
        claims = _claims(str(form.get("assertion", "")))
        if claims is None or not claims.get("scope") or not claims.get("aud"):
            return _refused("Invalid JWT: a signed assertion with scope and aud is required.")
        access = f"ya29.sim-{len(state.issued) + 1}-{secrets.token_hex(12)}"
        state.issued.append(access)
        return web.json_response(
            {"access_token": access, "expires_in": state.expires_in, "token_type": "Bearer"}
        )

    app.router.add_post("/_oauth/token", token)
