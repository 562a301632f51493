"""OpenAI Responses: wire types (protocol), input mapping (inputs), output encoding (encode), storage
(store) and the controller (routes)."""
