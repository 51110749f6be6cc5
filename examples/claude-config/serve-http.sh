#!/bin/sh
# The server the "poppy-http" entries connect to: MCP over streamable HTTP on loopback, with the
# identity `poppy-mcp init` stored.
#
# Clients send "Authorization: Bearer TOKEN". The token is POPPY_HTTP_TOKEN when it is set;
# otherwise poppy-mcp makes one on its first start and keeps it in its state directory (the file
# http-token, mode 0600). The entries read POPPY_HTTP_TOKEN (VS Code asks for it once), so set it
# from that file where your assistant starts, rather than on a command line, which `ps` shows:
#   export POPPY_HTTP_TOKEN="$(cat "${XDG_STATE_HOME:-$HOME/.local/state}/poppy-mcp/http-token")"
exec poppy-mcp serve --http 127.0.0.1:8808
