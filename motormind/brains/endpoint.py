"""Is a VLM endpoint there? One TCP connection to its base URL's host and port, made before a
command builds anything (a LIBERO-PRO simulation takes seconds to build; a dead port is said at
once, with the reason, instead of as "the planner failed safe" after it).

Only that something accepts connections is checked, not that it is an OpenAI-compatible server
(``motormind vlm check`` does that). Behind an HTTP(S) proxy (the environment's ``*_proxy``) the
client connects to the proxy, so nothing is checked here.
"""
from __future__ import annotations

import os
import socket
import urllib.request
from urllib.parse import urlsplit


def unreachable(base_url: str, timeout_s: float = 3.0) -> str:
    """'' when something accepts a connection at ``base_url``'s host and port; else why not, in
    one line (``cannot connect to 127.0.0.1:9: Connection refused``)."""
    u = urlsplit(str(base_url))
    if u.scheme not in ("http", "https") or not u.hostname:
        return f"{base_url!r} is not an http(s) URL"
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError as e:
        return f"{base_url!r}: {e}"
    if u.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(u.hostname):
        return ""
    try:
        socket.create_connection((u.hostname, port), timeout=timeout_s).close()
    except socket.gaierror as e:
        return f"cannot resolve {u.hostname!r} ({e.strerror or e})"
    except (socket.timeout, TimeoutError):
        return f"no answer from {u.hostname}:{port} within {timeout_s:g} s"
    except OSError as e:
        return f"cannot connect to {u.hostname}:{port}: {e.strerror or e}"
    return ""


def checked_vlm_config(name_or_path, overrides=(), what: str = "--vlm"):
    """The VLM config a command was given, loaded and its endpoint reached, or a ConfigError that
    names ``what`` (one line). A config that serves itself in-process (``serve: oracle``) has no
    endpoint to reach yet."""
    from ..errors import ConfigError
    from .openai_brain import load_vlm_config
    try:
        cfg = load_vlm_config(name_or_path or "openai", tuple(overrides))
    except ConfigError as e:
        raise ConfigError(f"{what}: {e}") from None
    if not cfg.serve and not cfg.api_key and cfg.api_key_env and not os.environ.get(cfg.api_key_env):
        raise ConfigError(f"{what}: the API key is missing: ${cfg.api_key_env} is not set (the VLM config "
                          f"{cfg.name or name_or_path or 'openai'} reads it, api_key_env): export "
                          f"{cfg.api_key_env}=..., or name another config with --vlm")
    if not cfg.serve:
        why = unreachable(cfg.base_url)
        if why:
            raise ConfigError(f"{what}: the endpoint {cfg.base_url} is not reachable: {why} (is the server "
                              f"running? `motormind vlm check --vlm ...` tests one)")
    return cfg
