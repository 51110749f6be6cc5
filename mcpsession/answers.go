package mcpsession

// This file carries a client's answer to a server request (an
// elicitation/create sent on the stream of a tool call, at 2025-11-25) to
// the replica that asked. The client POSTs its answer as a message of its
// own, which a load balancer may send to any replica; mcp-go delivers it
// only in the process whose session object awaits it. So a Handler that
// finds no request awaiting an answer passes it on, over the store's
// notifications (store.Notify, LISTEN/NOTIFY on PostgreSQL), to every
// replica's Answers, which hands it to the Handler holding that session:
// there mcp-go delivers it, as if it had come there.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// answersChannel is the notification channel of answers passed on.
const answersChannel = "poppy_mcp_answer"

// Answers passes clients' answers between the replicas sharing a store:
// one per process, shared by its Handlers. It is safe for concurrent use.
type Answers struct {
	st *store.Store

	mu   sync.Mutex
	byID answerRoutes // guarded by mu
}

// answerRoutes are the sessions this process holds, by sessionKey.
type answerRoutes map[string]answerRoute

// answerRoute is a session this process holds: its ID, and its Handler.
type answerRoute struct {
	id string
	h  *Handler
}

// NewAnswers returns the Answers of the processes sharing st; Listen
// starts receiving.
func NewAnswers(st *store.Store) *Answers { return &Answers{st: st, byID: answerRoutes{}} }

// answer is a passed-on answer: the session's key and the client's message.
type answer struct {
	Session string          `json:"s"`
	Message json.RawMessage `json:"m"`
}

// sessionKey names the session id in a notification, which every replica
// hears: not the ID itself.
func sessionKey(id string) string {
	sum := sha256.Sum256([]byte("poppy-mcp mcp answer\x00" + id))
	return hex.EncodeToString(sum[:16])
}

// Listen hands the answers other replicas pass on to this process's
// Handlers, until ctx ends.
func (a *Answers) Listen(ctx context.Context) error {
	notes, err := a.st.Listen(ctx, answersChannel)
	if err != nil {
		return err
	}
	for n := range notes {
		var ans answer
		if json.Unmarshal([]byte(n), &ans) != nil {
			continue
		}
		a.mu.Lock()
		to, ok := a.byID[ans.Session]
		a.mu.Unlock()
		if ok {
			to.h.deliver(ctx, to.id, ans.Message)
		}
	}
	return nil
}

// route records that h holds the session id (or, with h nil, no longer).
func (a *Answers) route(id string, h *Handler) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if h == nil {
		delete(a.byID, sessionKey(id))
	} else {
		a.byID[sessionKey(id)] = answerRoute{id: id, h: h}
	}
}

// pass passes on an answer in session id; it reports whether it did.
func (a *Answers) pass(ctx context.Context, id string, msg []byte) bool {
	if a == nil {
		return false
	}
	b, _ := json.Marshal(answer{Session: sessionKey(id), Message: msg})
	return len(b) <= store.MaxNotifyPayload && a.st.Notify(ctx, answersChannel, string(b)) == nil
}

// isAnswer reports whether msg answers a server request: an ID, no method.
func isAnswer(msg message) bool {
	return msg.Method == "" && len(msg.ID) > 0 && string(msg.ID) != "null"
}

// answered serves a client's answer: to this process's mcp-go server if a
// request of it awaits the answer, else passed on to the other replicas
// (202 either way, MCP's answer to an accepted response).
func (h *Handler) answered(w http.ResponseWriter, r *http.Request, id string, body []byte) {
	rec := &discard{header: http.Header{}}
	h.mcp.ServeHTTP(rec, r)
	if rec.status/100 == 2 || !h.answers.pass(r.Context(), id, body) {
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// deliver hands an answer in session id, passed on by another replica,
// to mcp-go, as if the client had sent it here.
func (h *Handler) deliver(ctx context.Context, id string, msg []byte) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(msg))
	if err != nil {
		return
	}
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	h.mcp.ServeHTTP(&discard{header: http.Header{}}, req)
}
