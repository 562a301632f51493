"""Backends: the decoders behind the one generation path (``base.Backend`` is the contract)."""
