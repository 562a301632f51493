"""Anthropic Messages: wire types (protocol), mapping (translate), the controller (routes)."""
