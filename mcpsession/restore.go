package mcpsession

// This file checks a request's session against the store and brings back,
// into this process's mcp-go server, a session another process opened.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// codeSessionNotFound is the JSON-RPC error code of a session no replica
// keeps, the one the MCP TypeScript SDK's server answers with its 404.
const codeSessionNotFound = -32001

// admit checks the session id of a request (reqID its JSON-RPC ID, if
// any) against the store, bringing it back here when this process does
// not hold it; it reports whether the request may go on, and else has
// answered it.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, id string, reqID json.RawMessage) bool {
	m, err := h.st.MCPSessionOf(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		h.drop(r, id)
		h.log.InfoContext(r.Context(), "mcpsession: a request named an MCP session that has ended or expired")
		// MCP 2025-11-25, Streamable HTTP, Session Management: after a
		// session ends the server "MUST respond to requests containing that
		// session ID with HTTP 404 Not Found"; the client then starts anew.
		writeError(w, http.StatusNotFound, reqID, codeSessionNotFound,
			"poppy-mcp: this MCP session has ended (the client ended it, or it went unused for "+h.expiry.String()+
				"): initialize a new session")
		return false
	}
	if err != nil {
		h.storeFailed(w, r, reqID, "check", err)
		return false
	}
	touch, ok := h.hold(r, id, m)
	if !ok {
		writeError(w, http.StatusInternalServerError, reqID, mcp.INTERNAL_ERROR,
			"poppy-mcp: this MCP session, opened on another replica, could not be brought back here: initialize a new session")
		return false
	}
	if touch {
		if err := h.st.TouchMCPSession(r.Context(), id); err != nil {
			h.log.WarnContext(r.Context(), "mcpsession: the use of an MCP session was not recorded", "err", err)
		}
	}
	return true
}

// hold makes sure this process's mcp-go server holds the session id, kept
// in the store as m, bringing it back if not, at the log level kept; it
// reports whether the session's use is due to be recorded in the store,
// and false for ok when it could not be brought back.
func (h *Handler) hold(r *http.Request, id string, m store.MCPSession) (touch, ok bool) {
	ls := h.held(id)
	if ls == nil || h.level(ls) != m.LogLevel {
		h.restoring.Lock()
		defer h.restoring.Unlock()
		if ls = h.held(id); ls == nil { // not brought back meanwhile
			if !h.restore(r, id, m) {
				return false, false
			}
			ls = &localSession{touched: m.UsedAt}
			h.keep(id, ls)
		}
		if h.level(ls) != m.LogLevel && !h.setLevel(r, id, ls, m.LogLevel) {
			return false, false
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if now := h.now(); now.Sub(ls.touched) >= touchEvery {
		ls.touched = now
		return true, true
	}
	return false, true
}

// held returns this process's record of the session id; nil when its
// mcp-go server does not hold it.
func (h *Handler) held(id string) *localSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.local[id]
}

// level returns the log level the mcp-go server has for ls's session, as
// far as this Handler set it.
func (h *Handler) level(ls *localSession) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return ls.level
}

// restore brings the session id back into the mcp-go server as the client
// opened it: its initialize replayed with the same session ID, which
// registers the session with the client's info, capabilities and
// protocol version. It reports whether the session is back. h.restoring
// is held.
func (h *Handler) restore(r *http.Request, id string, m store.MCPSession) bool {
	init, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "poppy-mcp-restore", "method": mcp.MethodInitialize,
		"params": json.RawMessage(m.Initialize)})
	if status := h.replay(withPreset(r.Context(), id), r, init, ""); status != http.StatusOK {
		h.log.WarnContext(r.Context(), "mcpsession: an MCP session kept in the store could not be brought back", "status", status)
		h.forget(r, id)
		return false
	}
	return true
}

// setLevel replays the client's logging/setLevel of level (set through
// any replica) into the mcp-go server's session id; it reports whether it
// took. h.restoring is held.
func (h *Handler) setLevel(r *http.Request, id string, ls *localSession, level string) bool {
	if level != "" {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "poppy-mcp-restore-level", "method": mcp.MethodSetLogLevel,
			"params": map[string]string{"level": level}})
		if status := h.replay(r.Context(), r, body, id); status != http.StatusOK {
			h.log.WarnContext(r.Context(), "mcpsession: the log level of an MCP session could not be brought back", "status", status)
			h.forget(r, id)
			return false
		}
	}
	h.mu.Lock()
	ls.level = level
	h.mu.Unlock()
	return true
}

// replay serves body, a message of the client's, to the mcp-go server as
// if r's client sent it in the session id ("" for none), and returns the
// status of the answer, which goes nowhere.
func (h *Handler) replay(ctx context.Context, r *http.Request, body []byte, id string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL.String(), bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr // mcp-go's localhost protection judges them as r's
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		req.Header.Set(server.HeaderKeySessionID, id)
		if v := r.Header.Get(mcp.HeaderProtocolVersion); v != "" {
			req.Header.Set(mcp.HeaderProtocolVersion, v)
		}
	}
	w := &discard{header: http.Header{}}
	h.mcp.ServeHTTP(w, req)
	return w.status
}

// drop ends the session id in this process, if it holds it: it ended
// elsewhere.
func (h *Handler) drop(r *http.Request, id string) {
	if h.held(id) != nil {
		h.forget(r, id)
	}
}

// forget ends the session id in this process's mcp-go server.
func (h *Handler) forget(r *http.Request, id string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodDelete, r.URL.String(), nil)
	if err != nil {
		return
	}
	req.Host, req.RemoteAddr = r.Host, r.RemoteAddr
	req.Header.Set(server.HeaderKeySessionID, id)
	h.mcp.ServeHTTP(&discard{header: http.Header{}}, req) // mcp-go cleans up, and Terminate forgets it here
}

// resumable reports whether a GET may go on: one that resumes a stream
// (Last-Event-ID) must resume one of this process's, since the events of
// a stream are kept by the process that sent it; else it has answered.
func (h *Handler) resumable(w http.ResponseWriter, r *http.Request) bool {
	last := r.Header.Get(mcp.HeaderLastEventID)
	if last == "" || h.events == nil || h.events.Issued(last) {
		return true
	}
	h.log.InfoContext(r.Context(), "mcpsession: a client resumed an SSE stream another replica sent")
	writeError(w, http.StatusBadRequest, nil, mcp.INVALID_REQUEST,
		"poppy-mcp: this stream was sent by another replica, which keeps its events: it cannot be resumed here "+
			"(a load balancer that routes by Mcp-Session-Id keeps streams resumable); open a new stream, and call again "+
			"what the broken stream had not answered")
	return false
}

// storeFailed answers a request the store could not serve: 503, for the
// client to try again.
func (h *Handler) storeFailed(w http.ResponseWriter, r *http.Request, reqID json.RawMessage, what string, err error) {
	h.log.WarnContext(r.Context(), "mcpsession: the store did not "+what+" an MCP session", "err", err)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, reqID, mcp.INTERNAL_ERROR,
		"poppy-mcp: the MCP session could not be read or written in the state's store: try again")
}

// writeError answers with a JSON-RPC error (a nil reqID is null).
func writeError(w http.ResponseWriter, status int, reqID json.RawMessage, code int, message string) {
	if len(reqID) == 0 {
		reqID = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": reqID,
		"error": map[string]any{"code": code, "message": message}})
}

// discard is the ResponseWriter of a replayed message: it keeps the
// status alone. It cannot stream, so mcp-go answers in one JSON body.
type discard struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (d *discard) Header() http.Header { return d.header }

func (d *discard) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
}

func (d *discard) Write(p []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	return d.body.Write(p)
}

// newSessionID returns a new session ID: 130 random bits (crypto/rand),
// as MCP asks ("globally unique and cryptographically secure"), in
// characters a session ID may hold.
func newSessionID() string { return "mcp-session-" + rand.Text() }

// presetKey carries, in the context of an initialize, the session ID it
// opens: the one open made and stored, or the one restore brings back.
type presetKey struct{}

func withPreset(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, presetKey{}, id)
}

// resolver gives mcp-go the session ID manager of each request.
type resolver struct{ h *Handler }

// ResolveSessionIdManager is called with nil by mcp-go's idle sweeper and
// by Shutdown.
func (res resolver) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	ids := ids{h: res.h}
	if r != nil {
		ids.preset, _ = r.Context().Value(presetKey{}).(string)
	}
	return ids
}

// ids is the session ID manager of one request. A Handler has checked
// every session ID against the store before mcp-go sees it, so Validate
// accepts any; Terminate forgets the session in this process only (mcp-go
// calls it for sessions idle here, or at Shutdown, which go on elsewhere;
// a DELETE ended it in the store already).
type ids struct {
	h      *Handler
	preset string
}

func (m ids) Generate() string {
	if m.preset != "" {
		return m.preset
	}
	return newSessionID() // a GET stream opened without a session: no session anywhere else
}

func (m ids) Validate(id string) (isTerminated bool, err error) {
	if id == "" {
		return false, errors.New("mcpsession: no session ID")
	}
	return false, nil
}

func (m ids) Terminate(id string) (isNotAllowed bool, err error) {
	m.h.mu.Lock()
	delete(m.h.local, id)
	m.h.mu.Unlock()
	m.h.answers.route(id, nil)
	return false, nil
}
