package conversation

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// company is a poppytest Company, a store, and an agent with a Session there.
type company struct {
	srv    *poppytest.Server
	st     *store.Store
	agent  *auth.Agent
	ac     auth.Company
	sess   *auth.Session
	userID string
}

// newCompany starts a Company and a Session with it. t may be a
// *recordingT, so a test can expect a violation.
func newCompany(t *testing.T, pt poppytest.T, opts *poppytest.Options) *company {
	t.Helper()
	if opts == nil {
		opts = &poppytest.Options{}
	}
	if opts.AgentDelay == 0 {
		opts.AgentDelay = 20 * time.Millisecond
	}
	if pt == nil {
		pt = t
	}
	srv := poppytest.NewServer(pt, opts)
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), &store.Options{Key: bytes.Repeat([]byte{9}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id, err := auth.NewIdentity(ctx, "https://"+srv.AgentHost()+"/agent.json", &auth.IdentityOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	srv.SetAgentDocuments(agentJSON, jwks)
	agent := auth.New(id, &auth.Options{HTTPClient: srv.Client(), Store: st})
	d := srv.Domain()
	ac := auth.Company{Issuer: srv.Issuer(), Domain: d, TokenEndpoint: srv.URL("auth."+d, "/oauth/token")}
	userID, err := st.UserID(ctx, ac.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := agent.StartSession(ctx, ac, userID)
	if err != nil {
		t.Fatal(err)
	}
	return &company{srv: srv, st: st, agent: agent, ac: ac, sess: sess, userID: userID}
}

// newBubbleCompany is newCompany on an in-memory network of its own, for a
// test in a testing/synctest bubble: the Company's holds and the agent's
// waits pass on the bubble's clock (docs/testing.md).
func newBubbleCompany(t *testing.T, pt poppytest.T, opts *poppytest.Options) *company {
	t.Helper()
	var o poppytest.Options
	if opts != nil {
		o = *opts
	}
	n := &memnet.Network{}
	o.Listen, o.Dial = n.Listen, n.DialContext
	return newCompany(t, pt, &o)
}

// endpoint is the Company's conversation endpoint.
func (co *company) endpoint() string {
	return co.srv.URL("api."+co.srv.Domain(), "/poppy/conversations")
}

// client is a Client through the Session, retrying quickly.
func (co *company) client(t *testing.T) *Client {
	t.Helper()
	c, err := New(co.sess.Client(), co.endpoint(), &Options{NewBackOff: fastBackOff})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tracker is a Tracker of the User's conversations through a new Client:
// in a test, another Tracker on the same store is another process.
func (co *company) tracker(t *testing.T) *Tracker {
	t.Helper()
	return co.trackerWith(t, nil)
}

// trackerWith is tracker with options.
func (co *company) trackerWith(t *testing.T, opts *TrackerOptions) *Tracker {
	t.Helper()
	tr, err := NewTracker(co.client(t), co.st, co.owner(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// owner is the User whose conversations the Trackers follow.
func (co *company) owner() Owner {
	return Owner{Issuer: co.ac.Issuer, UserID: co.userID, Domain: co.srv.Domain()}
}

func fastBackOff() backoff.BackOff {
	return backoff.WithMaxRetries(backoff.NewConstantBackOff(10*time.Millisecond), 4)
}

// textMsg is a message from the agent with text.
func textMsg(text string) Message { return Message{Sender: SenderAgent, Text: text} }

// companyTexts returns the texts of the Company's messages in events.
func companyTexts(events []Event) []string {
	var out []string
	for _, e := range events {
		if e.Type == EventMessage && e.Message.Role == RoleCompany {
			out = append(out, e.Message.Text)
		}
	}
	return out
}

// eventIDs returns the IDs of events.
func eventIDs(events []Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// noRepeats fails when an event ID appears twice across updates.
func noRepeats(t *testing.T, updates ...*Update) {
	t.Helper()
	seen := map[string]bool{}
	for _, u := range updates {
		for _, e := range u.Events {
			if seen[e.ID] {
				t.Errorf("event %s (%s) returned twice", e.ID, e.Type)
			}
			seen[e.ID] = true
		}
	}
}

// recordingT is a poppytest.T that records violations instead of failing,
// for tests that make the agent break a rule on purpose.
type recordingT struct {
	*testing.T
	mu   sync.Mutex
	errs []string
}

func (r *recordingT) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingT) violations() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

// started starts a conversation with text and waits for the reply.
func started(t *testing.T, tr *Tracker, text string) *Update {
	t.Helper()
	u, err := tr.Start(context.Background(), textMsg(text), "", &ReadOptions{Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return u
}
