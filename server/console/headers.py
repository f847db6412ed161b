"""The console's response headers: a strict Content-Security-Policy (no inline script or style,
nothing from another origin), no framing, no sniffing, no caching of pages that show data."""

from __future__ import annotations

from litestar import Response

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}


async def secure_headers(response: Response) -> Response:
    """`after_request` hook of the console's router."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    return response
