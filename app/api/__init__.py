"""The local OpenAI-compatible API: request classes (protocol), the error table (errors), routes, server."""
