"""The chat protocols' wire formats: OpenAI's annotations and Sources text, the chat
protocols' shared reading, and MCP's tools and wire."""

__all__: list[str] = []
