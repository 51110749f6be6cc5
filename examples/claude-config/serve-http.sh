#!/bin/sh
# The server the "poppy-http" entries connect to: MCP over streamable HTTP on loopback.
# Off loopback, poppy-mcp refuses to start without a token (--http-token or POPPY_HTTP_TOKEN);
# clients then send "Authorization: Bearer TOKEN".
exec poppy-mcp serve --http 127.0.0.1:8808 --client-id https://agent.example/agent.json
