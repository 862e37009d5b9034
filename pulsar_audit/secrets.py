"""Secrets come only from environment variables and never leave the process in clear.

Pulsar authentication (a token, TLS client certificate and key paths, OAuth2 parameters with
the client secret) is read from the `PULSAR_AUDIT_*` variables below; a webhook's signing
secret from the variable its sink names (`hmac_secret_env`). Nothing else — no config file, no
argument — takes a secret, so no secret is written to a table, a report or a JSON output.

What is printed or kept may still hold URLs someone wrote credentials into
(`http://user:pass@host/?token=…`): `redact` masks those and the value of every secret
variable set, and `RedactingFilter` does so for every log record.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

TOKEN_VAR = "PULSAR_AUDIT_AUTH_TOKEN"
TLS_CERT_VAR = "PULSAR_AUDIT_TLS_CERT_FILE"
TLS_KEY_VAR = "PULSAR_AUDIT_TLS_KEY_FILE"
TLS_TRUST_VAR = "PULSAR_AUDIT_TLS_TRUST_CERTS_FILE"
OAUTH2_VAR = "PULSAR_AUDIT_OAUTH2_PARAMS"  # JSON: issuer_url, client_id, client_secret, …
# Variables whose values are secrets (a key *path* is not, but its file is named by it).
SECRET_VARS = (TOKEN_VAR, OAUTH2_VAR, TLS_KEY_VAR)
MASK = "***"
_SENSITIVE_QUERY = re.compile(r"token|secret|password|passwd|key|auth|sig|credential", re.I)
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
# A query parameter outside a whole URL (an HTTP error's "url: /hook?token=…").
_QUERY_PARAM = re.compile(
    r"([?&;][^=&\s'\"]*(?:token|secret|password|passwd|key|auth|sig|credential)[^=&\s'\"]*=)"
    r"[^&\s'\"#]+",
    re.I,
)


@dataclass(frozen=True)
class PulsarAuth:
    """How a Pulsar client and the admin REST authenticate, from the environment."""

    token: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_trust_certs_file: str | None = None
    oauth2_params: str | None = None

    @classmethod
    def from_env(cls) -> PulsarAuth:
        return cls(
            token=secret_from_env(TOKEN_VAR),
            tls_cert_file=os.environ.get(TLS_CERT_VAR) or None,
            tls_key_file=secret_from_env(TLS_KEY_VAR),
            tls_trust_certs_file=os.environ.get(TLS_TRUST_VAR) or None,
            oauth2_params=secret_from_env(OAUTH2_VAR),
        )

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for `pulsar.Client` (none when nothing is set)."""
        import pulsar

        options: dict[str, Any] = {}
        if self.token:
            options["authentication"] = pulsar.AuthenticationToken(self.token)
        elif self.oauth2_params:
            options["authentication"] = pulsar.AuthenticationOauth2(self.oauth2_params)
        elif self.tls_cert_file and self.tls_key_file:
            options["authentication"] = pulsar.AuthenticationTLS(
                self.tls_cert_file, self.tls_key_file
            )
        if self.tls_trust_certs_file:
            options["tls_trust_certs_file_path"] = self.tls_trust_certs_file
        return options

    def admin_headers(self) -> dict[str, str]:
        """HTTP headers for the admin REST (a token is sent as a bearer token)."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def admin_cert(self) -> tuple[str, str] | None:
        if self.tls_cert_file and self.tls_key_file:
            return self.tls_cert_file, self.tls_key_file
        return None


_registered: set[str] = set()


def secret_from_env(var: str) -> str | None:
    """The value of the secret variable `var` (None when unset); masked from then on."""
    value = os.environ.get(var) or None
    if value:
        _registered.add(value)
    return value


def secret_values() -> list[str]:
    """The values of every secret variable set or read (longest first: none half-masked)."""
    values = {os.environ.get(v, "") for v in SECRET_VARS} | _registered
    return sorted((v for v in values if len(v) >= 4), key=len, reverse=True)


def redact_url(url: str) -> str:
    """The URL with its password and the values of credential-like query parameters masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, MASK if _SENSITIVE_QUERY.search(k) else v) for k, v in pairs], safe="*"
        )
    if (netloc, query) == (parts.netloc, parts.query):
        # nothing masked: the URL as written (urlunsplit drops a slash of sqlite:////abs/path)
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact(text: str) -> str:
    """`text` with every URL redacted and every secret variable's value masked."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _QUERY_PARAM.sub(lambda m: m.group(1) + MASK, text)
    for value in secret_values():
        text = text.replace(value, MASK)
    return text


class RedactingFilter(logging.Filter):
    """Masks secrets and URL credentials in every record before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = redact(message), ()
        return True
