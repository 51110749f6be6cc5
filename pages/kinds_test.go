package pages

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// personGate admits a browser whose X-Person header names the page's owner:
// a stand-in for mcpauth.Login, whose browser sign-in every replica reads.
type personGate struct{}

func (personGate) Admit(w http.ResponseWriter, r *http.Request, owner string) bool {
	if r.Header.Get("X-Person") != owner {
		Message(w, http.StatusForbidden, "Not your page", "This link was opened for someone else.")
		return false
	}
	return true
}

// replicas are two Servers, as two replicas of one deployment, on one
// state (two Stores opened on it), or on none (nil: memory, one Server
// twice).
func replicas(t *testing.T, open func(t *testing.T) *store.Store) [2]*Server {
	t.Helper()
	var out [2]*Server
	for i := range out {
		opts := &Options{PublicURL: "https://agent.example/pages", Gate: personGate{}}
		if open != nil {
			opts.Store = open(t)
		} else if i == 1 {
			out[1] = out[0]
			break
		}
		s, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// stateBackends open one state twice over: SQLite in a directory,
// PostgreSQL in a new schema of POPPY_TEST_POSTGRES (skipped without it).
var stateBackends = []struct {
	name  string
	where func(t *testing.T) string
	open  func(ctx context.Context, where string, opts *store.Options) (*store.Store, error)
}{
	{"sqlite", func(t *testing.T) string { return t.TempDir() }, store.Open},
	{"postgres", freshSchema, store.OpenPostgres},
	{"memory", nil, nil},
}

// forEachState runs f once per backend with a function that opens its
// state (nil for memory).
func forEachState(t *testing.T, f func(t *testing.T, open func(t *testing.T) *store.Store)) {
	for _, b := range stateBackends {
		t.Run(b.name, func(t *testing.T) {
			if b.where == nil {
				f(t, nil)
				return
			}
			where := b.where(t)
			f(t, func(t *testing.T) *store.Store {
				st, err := b.open(context.Background(), where, &store.Options{Key: make([]byte, 32), Keychain: store.NoKeychain{}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return st
			})
		})
	}
}

// freshSchema is the DSN of a new schema in POPPY_TEST_POSTGRES's database,
// dropped when the test ends.
func freshSchema(t *testing.T) string {
	dsn := os.Getenv("POPPY_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("PostgreSQL not tested: set POPPY_TEST_POSTGRES to a DSN (scripts/pg-test-server.sh start prints one)")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	b := make([]byte, 8)
	rand.Read(b)
	schema := "pages_" + hex.EncodeToString(b)
	mustExec(t, db, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { mustExec(t, db, "DROP SCHEMA "+schema+" CASCADE") })
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

func mustExec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// personVisit is visit as the browser of person.
func personVisit(s *Server, method, u, person string) (int, string) {
	rec := visitAs(s, method, u, person)
	return rec.Code, rec.Body.String()
}

// TestKindPageOnAnyReplica: a page of a kind opened on one replica for
// alice opens on the other in alice's browser, with its state; bob's
// browser is refused there; a POST takes it, after which a replay on
// either replica answers 410. Without the store (memory) the one Server
// behaves the same.
func TestKindPageOnAnyReplica(t *testing.T) {
	forEachState(t, func(t *testing.T, open func(t *testing.T) *store.Store) {
		rs := replicas(t, open)
		var served atomic.Int32
		for _, s := range rs {
			s.Handle("form", func(w http.ResponseWriter, r *http.Request, p *Page) {
				if r.Method == http.MethodPost && !p.Take(r.Context()) {
					Gone(w)
					return
				}
				served.Add(1)
				io.WriteString(w, "state="+string(p.State)+" owner="+p.Owner)
			})
		}
		u, _, err := rs[0].OpenKindForUser(context.Background(), "alice", "form", []byte("s1"), 0)
		if err != nil || !strings.HasPrefix(u, "https://agent.example/pages/p/") {
			t.Fatalf("OpenKindForUser = %q, %v", u, err)
		}
		if code, body := personVisit(rs[1], http.MethodGet, u, "bob"); code != http.StatusForbidden || strings.Contains(body, "s1") {
			t.Fatalf("bob on the other replica: %d %s", code, body)
		}
		if code, body := personVisit(rs[1], http.MethodGet, u, "alice"); code != 200 || body != "state=s1 owner=alice" {
			t.Fatalf("alice on the other replica: %d %s", code, body)
		}
		if code, body := personVisit(rs[1], http.MethodPost, u, "alice"); code != 200 || body != "state=s1 owner=alice" {
			t.Fatalf("alice posts on the other replica: %d %s", code, body)
		}
		for i, s := range rs {
			if code, _ := personVisit(s, http.MethodPost, u, "alice"); code != http.StatusGone {
				t.Errorf("a replay on replica %d: %d, want 410", i, code)
			}
		}
		if served.Load() != 2 {
			t.Errorf("the page's handler ran %d times, want 2 (the GET and the one POST)", served.Load())
		}
	})
}

// TestKindPageTakenOnce: eight posts race for one page across the two
// replicas: the handler takes it for exactly one.
func TestKindPageTakenOnce(t *testing.T) {
	forEachState(t, func(t *testing.T, open func(t *testing.T) *store.Store) {
		rs := replicas(t, open)
		var took atomic.Int32
		for _, s := range rs {
			s.Handle("once", func(w http.ResponseWriter, r *http.Request, p *Page) {
				if p.Take(r.Context()) {
					took.Add(1)
				}
			})
		}
		u, _, err := rs[0].OpenKindForUser(context.Background(), "alice", "once", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() { personVisit(rs[i%2], http.MethodPost, u, "alice") })
		}
		wg.Wait()
		if took.Load() != 1 {
			t.Errorf("%d posts took the page, want 1", took.Load())
		}
	})
}

// TestKindPageKeptAndClosed: a page taken and kept again (its next step)
// opens on the other replica with the new state; closed, it answers 410
// on both; a record kept under a caller's token is found by Find on the
// other replica, by its kind only.
func TestKindPageKeptAndClosed(t *testing.T) {
	forEachState(t, func(t *testing.T, open func(t *testing.T) *store.Store) {
		rs := replicas(t, open)
		for _, s := range rs {
			s.Handle("steps", func(w http.ResponseWriter, r *http.Request, p *Page) {
				if r.Method == http.MethodPost && p.Take(r.Context()) {
					_ = p.Keep(r.Context(), []byte("step2"))
				}
				io.WriteString(w, string(p.State))
			})
		}
		ctx := context.Background()
		u, closeIt, err := rs[0].OpenKindForUser(ctx, "alice", "steps", []byte("step1"), 0)
		if err != nil {
			t.Fatal(err)
		}
		personVisit(rs[0], http.MethodPost, u, "alice")
		if _, body := personVisit(rs[1], http.MethodGet, u, "alice"); body != "step2" {
			t.Errorf("after the step on the first replica, the other shows %q", body)
		}
		closeIt()
		for i, s := range rs {
			if code, _ := personVisit(s, http.MethodGet, u, "alice"); code != http.StatusGone {
				t.Errorf("closed, on replica %d: %d", i, code)
			}
		}
		if _, err := rs[0].Keep(ctx, "alice", "callback", "the-state", []byte("cb"), 0, true); err != nil {
			t.Fatal(err)
		}
		if p, ok := rs[1].Find(ctx, "callback", "the-state"); !ok || string(p.State) != "cb" || p.Owner != "alice" {
			t.Errorf("Find on the other replica = %+v, %v", p, ok)
		}
		if _, ok := rs[1].Find(ctx, "steps", "the-state"); ok {
			t.Error("Find found a record of another kind")
		}
	})
}

// TestKindPageOnLoopbackOfAnyReplica: a page for the agent's own browser
// opened on one replica's loopback listener opens on the other's, and
// never under the public URL.
func TestKindPageOnLoopbackOfAnyReplica(t *testing.T) {
	forEachState(t, func(t *testing.T, open func(t *testing.T) *store.Store) {
		rs := replicas(t, open)
		for _, s := range rs {
			s.Handle("join", func(w http.ResponseWriter, r *http.Request, p *Page) {
				io.WriteString(w, "joined "+string(p.State)+" for "+p.Owner)
			})
		}
		u, _, err := rs[0].OpenKind(context.Background(), "alice", "join", []byte("s"), 0)
		if err != nil || !strings.HasPrefix(u, rs[0].LoopbackURL()+"/p/") {
			t.Fatalf("OpenKind = %q, %v", u, err)
		}
		other := rs[1].LoopbackURL() + strings.TrimPrefix(u, rs[0].LoopbackURL())
		resp, err := http.Get(other)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "joined s for alice" {
			t.Errorf("on the other replica's loopback: %d %s", resp.StatusCode, body)
		}
		public := "https://agent.example/pages" + strings.TrimPrefix(u, rs[0].LoopbackURL())
		if code, _ := personVisit(rs[1], http.MethodGet, public, ""); code != http.StatusGone {
			t.Errorf("a loopback page under the public URL: %d, want 410", code)
		}
	})
}

// visitAs sends one request to the public handler as person's browser at
// agent.example.
func visitAs(s *Server, method, u, person string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, u, nil)
	req.Header.Set("X-Person", person)
	if method == http.MethodPost {
		req.Header.Set("Origin", "https://agent.example")
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec
}
