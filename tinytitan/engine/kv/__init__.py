"""The KV cache's form and the batch-capable quantized cache (``--kv-bits``)."""
