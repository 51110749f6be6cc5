package tools_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/pages"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

// harness is a complete poppy-mcp (identity, store, agent, pages, tools) in
// front of a poppytest Company, served over streamable HTTP for real MCP
// clients. Everything logged is kept for leak scans.
type harness struct {
	company *poppytest.Server
	tools   *tools.Server
	store   *store.Store
	agent   *auth.Agent
	pages   *pages.Server
	url     string
	logs    *syncBuffer
}

// clientID is where poppytest serves the agent's documents.
const clientID = "https://agent.example/agent.json"

func newHarness(t *testing.T, opts *poppytest.Options) *harness {
	t.Helper()
	ctx := context.Background()
	company := poppytest.NewServer(t, opts)
	st, err := store.Open(ctx, t.TempDir(), &store.Options{Key: bytes.Repeat([]byte{7}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id, err := auth.NewIdentity(ctx, clientID, &auth.IdentityOptions{Store: st, ClientName: "poppy-mcp test"})
	if err != nil {
		t.Fatal(err)
	}
	agentJSON, err := id.AgentJSON()
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := id.JWKSJSON()
	if err != nil {
		t.Fatal(err)
	}
	company.SetAgentDocuments(agentJSON, jwks)
	pg, err := pages.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	logs := &syncBuffer{}
	agent := auth.New(id, &auth.Options{HTTPClient: company.Client(), Store: st})
	docs := &http.Client{Transport: cache.New(company.Transport(), nil)}
	ts := tools.New(tools.Deps{
		Discovery: discovery.New(docs, nil), Documents: docs,
		Agent: agent, Store: st, Pages: pg,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(ts.Close) // stops background polling and relays (cleanups run last-in first-out)
	hs := httptest.NewServer(ts.HTTPHandler())
	t.Cleanup(hs.Close)
	return &harness{company: company, tools: ts, store: st, agent: agent, pages: pg, url: hs.URL + "/mcp", logs: logs}
}

// connect opens a session with the official go-sdk client at one revision.
func (h *harness) connect(t *testing.T, revision string) *sdk.ClientSession {
	t.Helper()
	return h.connectWith(t, revision, nil)
}

// connectWith is connect with client options (elicitation handlers, ...).
func (h *harness) connectWith(t *testing.T, revision string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "go-sdk-test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: h.url, MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatalf("connect at %s: %v", revision, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != revision {
		t.Fatalf("negotiated %s, want %s", got, revision)
	}
	return cs
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
