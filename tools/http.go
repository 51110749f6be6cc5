package tools

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/mcpsession"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// HTTPHandler serves MCP over streamable HTTP at /mcp, configured as
// docs/mcp-go.md advises: an event store so 2025-revision clients lose no
// notification, an idle TTL so per-session state cannot leak. Both MCP
// revisions (2025-11-25 with sessions, 2026-07-28 stateless) are served.
// Authentication of the caller is the wrapping middleware's concern.
//
// mcp-go refuses loopback requests whose Host is not localhost (DNS
// rebinding protection); a deployment behind a proxy or on a public address
// turns that off with publicHost and relies on its bearer token instead.
//
// Each request is served by the MCP server of its person (mcpauth.KeyFrom;
// people.go), so one person's MCP sessions, tools and notifications never
// reach another's.
func (s *Server) HTTPHandler(publicHost ...bool) http.Handler {
	public := len(publicHost) > 0 && publicHost[0]
	newHandler := func(srv *server.MCPServer, st *store.Store) mcpHandler {
		opts := []server.StreamableHTTPOption{
			server.WithEndpointPath("/mcp"),
			server.WithSessionIdleTTL(30 * time.Minute),
			server.WithDisableLocalhostProtection(public),
		}
		var h mcpHandler
		if st == nil {
			h = server.NewStreamableHTTPServer(srv, append(opts, server.WithEventStore(newEventStore(maxStreamEvents, maxSessionStreams)))...)
		} else { // sessions in the store, for every replica (docs/operations.md)
			h = mcpsession.New(srv, st, &mcpsession.Options{Now: s.people.opts.Now, Logger: s.log, Answers: s.answers,
				Events: newEventStore(maxStreamEvents, maxSessionStreams)}, opts...)
		}
		s.http.add(h)
		return h
	}
	return s.people.route(newHandler)
}

// mcpHandler is the streamable HTTP handler of one MCP server: mcp-go's
// own, or with its sessions in the store (mcpsession).
type mcpHandler interface {
	http.Handler
	Shutdown(ctx context.Context) error
}

// httpHandlers are the MCP HTTP handlers HTTPHandler made, for
// ShutdownHTTP. It is safe for concurrent use.
type httpHandlers struct {
	mu   sync.Mutex
	list []mcpHandler // guarded by mu
}

func (hs *httpHandlers) add(h mcpHandler) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.list = append(hs.list, h)
}

// remove forgets the handlers of people forgotten (people.sweep): they
// are shut down already, and kept here they would keep each person's MCP
// server, with every tool on it, for as long as the process runs.
func (hs *httpHandlers) remove(gone []mcpHandler) {
	drop := make(map[mcpHandler]bool, len(gone))
	for _, h := range gone {
		drop[h] = true
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hs.list = slices.DeleteFunc(hs.list, func(h mcpHandler) bool { return drop[h] })
}

// ShutdownHTTP ends the sessions of every MCP HTTP handler HTTPHandler
// made and stops their idle TTL's sweepers, goroutines that would
// otherwise outlive the Server (a test in a testing/synctest bubble must
// end them: docs/testing.md). Close does not: the handlers keep answering
// after Close. Sessions kept in the store go on: another replica, or
// this one restarted, serves them.
func (s *Server) ShutdownHTTP(ctx context.Context) {
	s.http.mu.Lock()
	list := s.http.list
	s.http.mu.Unlock()
	for _, h := range list {
		_ = h.Shutdown(ctx)
	}
}

const (
	// maxStreamEvents is how many of its last events each SSE stream keeps
	// for a client that resumes it.
	maxStreamEvents = 1000
	// maxSessionStreams is how many streams of one MCP session keep events:
	// each POST answered with SSE is a stream of its own.
	maxSessionStreams = 32
)

// eventStore is an mcp-go EventStore with bounded memory, where mcp-go's
// InMemoryEventStore keeps every event until the MCP session ends: each
// session keeps the last perStream events of each of its maxStreams
// streams written to most recently. A client resuming after an event that
// was dropped gets server.ErrUnknownEventID, as after a purge. It is safe
// for concurrent use.
//
// Its event IDs start with a prefix of its own, random: the events of a
// stream are kept by the process that sent it, and an ID without the
// prefix is another process's (Issued; mcpsession refuses to resume it
// with an error that says so), never mistaken for one of this store's.
type eventStore struct {
	perStream, maxStreams int
	prefix                string

	// mu guards seq and sessions.
	mu       sync.Mutex
	seq      uint64 // the last event ID given, store-wide
	sessions eventLogs
}

// eventLogs are the MCP sessions' streams, by MCP session ID.
type eventLogs map[string]*eventLog

// eventLog is one session's streams.
type eventLog struct {
	streams eventRings
	index   eventIndex
}

// eventRings are a session's streams, by stream ID.
type eventRings map[string]*eventRing

// eventIndex is the stream of each event kept, by event ID.
type eventIndex map[uint64]string

// eventRing holds a stream's last events, oldest at head once full.
type eventRing struct {
	events []storedEvent
	head   int
	last   uint64 // the ID of the stream's newest event
}

type storedEvent struct {
	id      uint64
	message json.RawMessage
}

func newEventStore(perStream, maxStreams int) *eventStore {
	return &eventStore{perStream: perStream, maxStreams: maxStreams, prefix: rand.Text()[:10] + "-", sessions: map[string]*eventLog{}}
}

// Issued reports whether eventID is one this store gave.
func (s *eventStore) Issued(eventID string) bool { return strings.HasPrefix(eventID, s.prefix) }

// StoreEvent records message as the newest event of the stream, dropping
// the stream's oldest event, or the least recently written stream, beyond
// the bounds.
func (s *eventStore) StoreEvent(_ context.Context, sessionID, streamID string, message json.RawMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.sessions[sessionID]
	if log == nil {
		log = &eventLog{streams: map[string]*eventRing{}, index: map[uint64]string{}}
		s.sessions[sessionID] = log
	}
	ring := log.streams[streamID]
	if ring == nil {
		if len(log.streams) >= s.maxStreams {
			log.dropStalest()
		}
		ring = &eventRing{}
		log.streams[streamID] = ring
	}
	s.seq++
	// The caller may reuse message's buffer.
	ev := storedEvent{id: s.seq, message: append(json.RawMessage(nil), message...)}
	if len(ring.events) < s.perStream {
		ring.events = append(ring.events, ev)
	} else {
		delete(log.index, ring.events[ring.head].id)
		ring.events[ring.head] = ev
		ring.head = (ring.head + 1) % len(ring.events)
	}
	ring.last = ev.id
	log.index[ev.id] = streamID
	return s.prefix + strconv.FormatUint(ev.id, 10), nil
}

// dropStalest drops the stream written to least recently.
func (l *eventLog) dropStalest() {
	stalest := ""
	for id, r := range l.streams {
		if stalest == "" || r.last < l.streams[stalest].last {
			stalest = id
		}
	}
	for _, ev := range l.streams[stalest].events {
		delete(l.index, ev.id)
	}
	delete(l.streams, stalest)
}

// ReplayEventsAfter sends the events of lastEventID's stream stored after
// it, oldest first, and returns the stream's ID.
func (s *eventStore) ReplayEventsAfter(_ context.Context, sessionID, lastEventID string, send func(eventID string, message json.RawMessage) error) (string, error) {
	streamID, after, err := s.eventsAfter(sessionID, lastEventID)
	if err != nil {
		return "", err
	}
	for _, ev := range after {
		if err := send(s.prefix+strconv.FormatUint(ev.id, 10), ev.message); err != nil {
			return "", err
		}
	}
	return streamID, nil
}

// eventsAfter copies, under the lock, what ReplayEventsAfter sends.
func (s *eventStore) eventsAfter(sessionID, lastEventID string) (string, []storedEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, issued := strings.CutPrefix(lastEventID, s.prefix)
	id, err := strconv.ParseUint(seq, 10, 64)
	var streamID string
	log, kept := s.sessions[sessionID], false
	if err == nil && issued && log != nil {
		streamID, kept = log.index[id]
	}
	if !kept {
		return "", nil, fmt.Errorf("%w: %q", server.ErrUnknownEventID, lastEventID)
	}
	ring := log.streams[streamID]
	var out []storedEvent
	for i := range ring.events {
		if ev := ring.events[(ring.head+i)%len(ring.events)]; ev.id > id {
			out = append(out, ev)
		}
	}
	return streamID, out, nil
}

// PurgeSession drops every event of the session.
func (s *eventStore) PurgeSession(_ context.Context, sessionID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sessionID)
	return nil
}
