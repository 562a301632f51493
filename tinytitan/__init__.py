"""TinyTitan: a local LLM server speaking OpenAI Chat Completions, Responses and Anthropic Messages."""

__version__ = "0.2.0"
