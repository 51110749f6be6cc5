package mcpauth

// This file binds each MCP session (the 2025-11-25 revision's
// Mcp-Session-Id) to the user who opened it. A session ID is not a
// credential, and it travels (logs, proxies): without the binding, a person
// who learned another's session ID could send requests into that session,
// or open its stream and read what is sent to it, with their own valid
// token. The MCP specification's security best practices: servers "MUST
// NOT use sessions for authentication" and "SHOULD bind session IDs to
// user-specific information".
//
// The binding is stateless: the session ID the client sees is the MCP
// server's with a MAC of the user and that ID appended, and a request's
// session ID is checked against the request's own user and handed on
// without the MAC.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
)

// sessionHeader is the streamable HTTP transport's session header.
const sessionHeader = "Mcp-Session-Id"

// sessionTagLen is the length of the MAC appended: 128 bits, base64url.
const sessionTagLen = 22

// sessionTag is the MAC binding the MCP server's session ID id to u.
func (r *Resource) sessionTag(u User, id string) string {
	m := hmac.New(sha256.New, r.secret)
	m.Write([]byte("poppy-mcp mcp session\x00"))
	m.Write([]byte(u.Key()))
	m.Write([]byte{0})
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))[:sessionTagLen]
}

// untag returns the MCP server's session ID in the client's tagged, when
// it is bound to u.
func (r *Resource) untag(u User, tagged string) (string, bool) {
	i := strings.LastIndexByte(tagged, '.')
	if i < 0 {
		return "", false
	}
	id, tag := tagged[:i], tagged[i+1:]
	return id, hmac.Equal([]byte(tag), []byte(r.sessionTag(u, id)))
}

// bindSession serves req, from u, with next: a session ID in the request
// must be bound to u (else 404, the transport's answer to a session it
// does not know, which makes a client start a new one), and a session ID
// in the response is bound to u.
func (r *Resource) bindSession(w http.ResponseWriter, req *http.Request, u User, next http.Handler) {
	if ids := req.Header.Values(sessionHeader); len(ids) > 0 {
		id, ok := r.untag(u, ids[0])
		if len(ids) > 1 || !ok {
			r.log.Info("mcpauth: a request named an MCP session that is not its user's", "user", u, "remote", req.RemoteAddr)
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		req = req.Clone(req.Context())
		req.Header.Set(sessionHeader, id)
	}
	next.ServeHTTP(&sessionWriter{ResponseWriter: w, r: r, u: u}, req)
}

// sessionWriter binds the session ID of a response to its user, once, just
// before the header is written.
type sessionWriter struct {
	http.ResponseWriter
	r       *Resource
	u       User
	written bool
}

func (w *sessionWriter) WriteHeader(status int) {
	if !w.written {
		w.written = true
		if id := w.Header().Get(sessionHeader); id != "" {
			w.Header().Set(sessionHeader, id+"."+w.r.sessionTag(w.u, id))
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *sessionWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets streams (SSE) through as they are written.
func (w *sessionWriter) Flush() {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath (write
// deadlines on streams).
func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
