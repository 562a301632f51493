"""OpenAI Chat Completions: wire types (protocol), mapping (translate), the controller (routes)."""
