#!/bin/sh
# Claude Code: add poppy-mcp with `claude mcp add` (pick the lines you want).

# Try every tool against the embedded demo Company (nothing else needed):
claude mcp add poppy-demo -- poppy-mcp serve --demo

# With your own identity (run `poppy-mcp init --client-id URL` and publish the two files first;
# serve uses the identity init stored):
claude mcp add poppy -- poppy-mcp serve

# The same, read-only: it reads Companies, calls their GET operations and signs in, but sends no
# message, relays no Company MCP tool and calls no API operation that writes:
claude mcp add poppy-read-only -- poppy-mcp serve --read-only

# Over streamable HTTP (start serve-http.sh first; POPPY_HTTP_TOKEN holds its bearer token):
claude mcp add --transport http poppy-http http://127.0.0.1:8808/mcp --header "Authorization: Bearer $POPPY_HTTP_TOKEN"
