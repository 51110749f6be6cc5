// Package mcpsession serves MCP over streamable HTTP with the sessions of
// the 2025 revisions of MCP (Mcp-Session-Id) kept in the store, so that
// every replica of a hosted poppy-mcp serves a session whichever replica
// opened it, and a load balancer needs no stickiness.
//
// mcp-go keeps a session in the memory of the process that initialized
// it (docs/mcp-go.md): what the client said in initialize (its protocol
// version, its name, its capabilities, elicitation among them) and the
// level logging/setLevel chose. A replica that never saw the initialize
// would serve the session as one whose client declared nothing. So a
// Handler records every session it opens in the store before it answers
// initialize (store.PutMCPSession), with the log level the client sets,
// and a Handler that meets a session it does not hold brings it back on
// first sight: it replays the client's initialize (with the same session
// ID) and its logging/setLevel into its own mcp-go server. Every request
// in a session checks the store, so a session ended on one replica (DELETE,
// or expired) is refused on all of them, with MCP's 404 and a JSON-RPC
// error that says so.
//
// The 2026-07-28 revision has no sessions: its requests pass untouched.
//
// What does not move: a broken SSE stream is resumed (GET with
// Last-Event-ID) from the events of the process that sent it, which keeps
// them in memory (Options.Events); on another replica the resume is
// refused with an error that names the cause. docs/operations.md says what
// a load balancer needs.
package mcpsession

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// DefaultExpiry is Options.Expiry when zero: how long a session unused
// stays in the store.
const DefaultExpiry = 24 * time.Hour

// touchEvery is how often a session in use has its last use recorded in
// the store (store.TouchMCPSession), at most.
const touchEvery = time.Minute

// maxInitialize is the largest initialize params kept, in bytes: a
// client's name and capabilities take well under a kilobyte.
const maxInitialize = 64 << 10

// Events is the event store of a Handler's SSE streams (resumption, see
// server.WithEventStore), which also tells whether an event ID is one it
// gave: an ID it did not give was given by another process.
type Events interface {
	server.EventStore
	Issued(eventID string) bool
}

// Options configure a Handler; the zero value is usable.
type Options struct {
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Expiry is how long a session unused stays in the store; zero is
	// DefaultExpiry.
	Expiry time.Duration
	// Events keeps the events of SSE streams for resumption; nil: none.
	Events Events
	// Logger gets a line for each session refused; nil is slog.Default().
	Logger *slog.Logger
	// Answers passes clients' answers to server requests between
	// replicas; nil: a process gets only the answers sent to it.
	Answers *Answers
}

// Handler is the streamable HTTP handler of one MCP server (one person's),
// its sessions kept in that person's view of the store. It is safe for
// concurrent use.
type Handler struct {
	st      *store.Store
	mcp     *server.StreamableHTTPServer
	now     func() time.Time
	expiry  time.Duration
	events  Events
	log     *slog.Logger
	answers *Answers

	// restoring is held while a session is brought back (restore), one at
	// a time, never while mcp-go might call Terminate, which takes mu.
	restoring sync.Mutex
	// mu guards local.
	mu    sync.Mutex
	local localSessions
}

// localSessions are the sessions a Handler's mcp-go server holds, by ID.
type localSessions map[string]*localSession

// localSession is one session the mcp-go server holds.
type localSession struct {
	touched time.Time // when its use was last recorded in the store
	level   string    // the log level last set in it here; "" for none
}

// New returns the handler of srv's streamable HTTP with the streamable
// HTTP options given, its sessions kept in st, the view of the store of
// the person srv serves (store.Store.ForUser). It sets the session ID
// manager and the event store itself.
func New(srv *server.MCPServer, st *store.Store, opts *Options, httpOpts ...server.StreamableHTTPOption) *Handler {
	if opts == nil {
		opts = &Options{}
	}
	h := &Handler{st: st, now: opts.Now, expiry: opts.Expiry, events: opts.Events, log: opts.Logger,
		answers: opts.Answers, local: localSessions{}}
	if h.now == nil {
		h.now = time.Now
	}
	if h.expiry <= 0 {
		h.expiry = DefaultExpiry
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	httpOpts = append(httpOpts, server.WithSessionIdManagerResolver(resolver{h}))
	if h.events != nil {
		httpOpts = append(httpOpts, server.WithEventStore(h.events))
	}
	h.mcp = server.NewStreamableHTTPServer(srv, httpOpts...)
	return h
}

// Shutdown ends the sessions this process holds (not in the store: they
// go on elsewhere, or here later) and stops mcp-go's idle sweeper.
func (h *Handler) Shutdown(ctx context.Context) error { return h.mcp.Shutdown(ctx) }

// ServeHTTP serves one streamable HTTP request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(server.HeaderKeySessionID)
	switch {
	case r.Method == http.MethodPost:
		h.post(w, r)
	case isModern(r.Header, nil) || id == "" || (r.Method != http.MethodGet && r.Method != http.MethodDelete):
		h.mcp.ServeHTTP(w, r)
	case r.Method == http.MethodDelete:
		h.end(w, r, id)
	case !h.resumable(w, r):
	case h.admit(w, r, id, nil):
		h.mcp.ServeHTTP(w, r)
	}
}

// message is what a Handler reads of a POSTed JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// post serves a POSTed message: an initialize opens a session kept in the
// store, any other message of a 2025 revision must name one the store
// keeps.
func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, nil, mcp.PARSE_ERROR, "poppy-mcp: the request's body could not be read")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg message
	if json.Unmarshal(body, &msg) != nil || isModern(r.Header, body) {
		h.mcp.ServeHTTP(w, r) // mcp-go answers what is not one JSON-RPC message
		return
	}
	id := r.Header.Get(server.HeaderKeySessionID)
	switch {
	case msg.Method == string(mcp.MethodInitialize):
		h.open(w, r, msg)
	case id == "":
		// MCP 2025-11-25, Streamable HTTP, Session Management: "Servers that
		// require a session ID SHOULD respond to requests without an
		// Mcp-Session-Id header (other than initialization) with HTTP 400".
		writeError(w, http.StatusBadRequest, msg.ID, mcp.INVALID_REQUEST,
			"poppy-mcp: this request names no MCP session (Mcp-Session-Id): send initialize first")
	case !h.admit(w, r, id, msg.ID):
	case isAnswer(msg):
		h.answered(w, r, id, body)
	case msg.Method == string(mcp.MethodSetLogLevel) && !h.keepLevel(w, r, id, msg):
	default:
		h.mcp.ServeHTTP(w, r)
	}
}

// open serves an initialize: a new session, recorded in the store before
// the client learns its ID, so that its next request may go to any
// replica.
func (h *Handler) open(w http.ResponseWriter, r *http.Request, msg message) {
	params := msg.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage("{}")
	}
	if len(params) > maxInitialize {
		writeError(w, http.StatusBadRequest, msg.ID, mcp.INVALID_PARAMS, "poppy-mcp: the initialize params are too large")
		return
	}
	id := newSessionID()
	if err := h.st.PutMCPSession(r.Context(), id, params, h.now().Add(-h.expiry)); err != nil {
		h.storeFailed(w, r, msg.ID, "open", err)
		return
	}
	h.keep(id, &localSession{touched: h.now()})
	h.mcp.ServeHTTP(w, r.WithContext(withPreset(r.Context(), id)))
}

// keep records that this process's mcp-go server holds the session id.
func (h *Handler) keep(id string, ls *localSession) {
	h.mu.Lock()
	h.local[id] = ls
	h.mu.Unlock()
	h.answers.route(id, h)
}

// keepLevel records the level of a logging/setLevel in the store, for the
// replicas that bring the session back; it reports whether the request
// may go on.
func (h *Handler) keepLevel(w http.ResponseWriter, r *http.Request, id string, msg message) bool {
	var p struct {
		Level mcp.LoggingLevel `json:"level"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || !validLevel(p.Level) {
		return true // mcp-go refuses it
	}
	if err := h.st.SetMCPSessionLogLevel(r.Context(), id, string(p.Level)); err != nil && !errors.Is(err, store.ErrNotFound) {
		h.storeFailed(w, r, msg.ID, "set the log level of", err)
		return false
	}
	if ls := h.held(id); ls != nil { // the request sets it here
		h.mu.Lock()
		ls.level = string(p.Level)
		h.mu.Unlock()
	}
	return true
}

// end serves a DELETE: the session ends in the store, so for every
// replica, then here.
func (h *Handler) end(w http.ResponseWriter, r *http.Request, id string) {
	if err := h.st.EndMCPSession(r.Context(), id); err != nil {
		h.storeFailed(w, r, nil, "end", err)
		return
	}
	h.mcp.ServeHTTP(w, r)
}

// validLevel reports whether l is one of MCP's log levels.
func validLevel(l mcp.LoggingLevel) bool {
	switch l {
	case mcp.LoggingLevelDebug, mcp.LoggingLevelInfo, mcp.LoggingLevelNotice, mcp.LoggingLevelWarning,
		mcp.LoggingLevelError, mcp.LoggingLevelCritical, mcp.LoggingLevelAlert, mcp.LoggingLevelEmergency:
		return true
	}
	return false
}

// isModern reports whether a request is of the 2026-07-28 revision, which
// has no sessions: by its protocol version header, or the one in its
// body's _meta, as mcp-go tells them.
func isModern(h http.Header, body []byte) bool {
	if mcp.IsModernProtocol(h.Get(mcp.HeaderProtocolVersion)) {
		return true
	}
	var m struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	return body != nil && json.Unmarshal(body, &m) == nil && mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion())
}
