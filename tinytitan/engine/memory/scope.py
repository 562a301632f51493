"""Whose memory a request reads and writes: the scope ``<namespace>/<user>/<workspace>``.

The namespace is ``tinytitan`` and the user the OS account running the server. The workspace is
a directory, taken from the first of:

1. the ``X-TinyTitan-Workspace`` header (``ChatRequest.workspace``), an absolute path;
2. the working directory the client declared in its prompt — Codex's ``<cwd>/abs</cwd>`` (in its
   ``<environment_context>`` turn), Claude Code's ``Working directory: /abs`` and pi's ``Current
   working directory: /abs`` (in their system prompts) — searched in the system text and the first
   user turn;
3. the directory the server was launched from.

The home directory, its parent and ``/`` are never workspaces: a memory there would be shared by
every project. The first source present decides (see ``resolve_scope``). The model never names a scope; nothing it
writes can reach another one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["NAMESPACE", "Scope", "declared_cwd", "refused_reason", "resolve_scope", "workspace_id"]

log = logging.getLogger("tinytitan.memory")

NAMESPACE = "tinytitan"
_CODEX_CWD = re.compile(r"<cwd>\s*([^<\n]+?)\s*</cwd>")
# Claude Code: "Working directory: /abs"; pi: "Current working directory: /abs"
_WORKING_DIRECTORY = re.compile(
    r"^\s*(?:[-*]\s*)?(?:Primary |Current )?[Ww]orking directory:\s*(/[^\n]*?)\s*$", re.MULTILINE
)
_SAFE = re.compile(r"[^\w.\-]+")


@dataclass(frozen=True, slots=True)
class Scope:
    namespace: str
    user: str
    workspace: str  # the absolute, normalized directory
    origin: str  # header | prompt | launch

    @property
    def workspace_id(self) -> str:
        return workspace_id(self.workspace)

    @property
    def key(self) -> str:
        """``<namespace>/<user>/<workspace id>``: also the journal's path under the memory directory."""
        return f"{self.namespace}/{_safe(self.user)}/{self.workspace_id}"


def _safe(name: str) -> str:
    return _SAFE.sub("_", name).strip("._") or "_"


def workspace_id(path: str) -> str:
    """The directory's name plus 8 hex digits of a digest of its full path (``app-1f2e3d4c``)."""
    digest = hashlib.sha256(path.encode("utf-8", errors="surrogatepass")).hexdigest()[:8]
    return f"{_safe(PurePosixPath(path).name)}-{digest}"


def _normalize(path: str) -> str | None:
    path = path.strip().strip("\"'")
    if not path.startswith("/"):
        return None
    path = os.path.normpath(path)
    return "/" + path.lstrip("/")  # POSIX keeps a leading '//'; it names the same directory


def refused_reason(path: str, home: str) -> str | None:
    """Why ``path`` cannot be a workspace (None when it can)."""
    if path == "/":
        return "the filesystem root"
    home = os.path.normpath(home)
    if path == home:
        return "the home directory"
    if path == os.path.dirname(home):
        return "the parent of the home directory"
    return None


def declared_cwd(system: str | None, first_user: str | None) -> str | None:
    """The working directory a coding agent wrote into its prompt, if any."""
    for text in (system, first_user):
        if not text:
            continue
        for pattern in (_CODEX_CWD, _WORKING_DIRECTORY):
            match = pattern.search(text)
            if match:
                return match.group(1)
    return None


def resolve_scope(
    *,
    header: str | None,
    system: str | None,
    first_user: str | None,
    launch_dir: str,
    user: str,
    home: str,
) -> Scope | None:
    """The scope of one request, or None when its workspace cannot hold memory.

    The first source present decides: a header or declared directory that is refused (the home
    directory, say) turns memory off for the request rather than falling back to another
    directory, which would file the memories under a project the client is not in.
    """
    candidates = (
        ("header", header),
        ("prompt", declared_cwd(system, first_user)),
        ("launch", launch_dir),
    )
    origin, raw = next(((o, r) for o, r in candidates if r and r.strip()), ("launch", ""))
    path = _normalize(raw)
    if path is None:
        log.warning("memory off for this request: the %s workspace %r is not an absolute path", origin, raw[:200])
        return None
    reason = refused_reason(path, home)
    if reason is not None:
        log.info("memory off for this request: %s is %s, never a workspace (from the %s)", path, reason, origin)
        return None
    return Scope(NAMESPACE, user, path, origin)
