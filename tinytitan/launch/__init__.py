"""``tinytitan launch AGENT``: run a coding agent (Claude Code, Codex, pi, OpenCode) wired to a TinyTitan server."""
