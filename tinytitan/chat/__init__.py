"""``tinytitan chat``: the terminal chat UI, a Responses API client of a running or in-process server."""
