package person

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/internal/catalogstore"
	"github.com/poppy-mcp/poppy-mcp/internal/netguard"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// company is a poppytest Company, the state of one person who used it,
// and the revocations it received.
type company struct {
	srv     *poppytest.Server
	ps      *State
	docs    *discovery.Client
	revoked atomic.Int32
	// revokeStatus is the revocation endpoint's answer.
	revokeStatus atomic.Int32
}

// newCompany starts a Company whose revocation endpoint counts what it
// receives, and opens a new state as user with the agent's identity
// published at the Company, and the person signed in there: a User ID,
// an Account Token, a Session signed in and a conversation.
func newCompany(t *testing.T, user string) *company {
	t.Helper()
	ctx := context.Background()
	c := &company{srv: poppytest.NewServer(t, nil)}
	c.revokeStatus.Store(http.StatusOK)
	c.srv.HandleFunc("auth."+c.srv.Domain(), "POST /oauth/revoke", func(w http.ResponseWriter, r *http.Request) {
		c.revoked.Add(1)
		w.WriteHeader(int(c.revokeStatus.Load()))
	})
	guard := netguard.New(&netguard.Options{RootCAs: c.srv.CertPool(), Resolve: func(hostport string) (string, bool) {
		host, _, err := net.SplitHostPort(hostport)
		return c.srv.Addr(), err == nil && slices.Contains(c.srv.Hosts(), host)
	}}).Transport()
	c.docs = discovery.New(&http.Client{Transport: guard}, nil)
	root, err := store.Open(ctx, t.TempDir(), &store.Options{Key: make([]byte, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	id, err := auth.NewIdentity(ctx, "https://"+c.srv.AgentHost()+"/agent.json", &auth.IdentityOptions{Store: root})
	if err != nil {
		t.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	c.srv.SetAgentDocuments(agentJSON, jwks)
	if user != "" { // another person of the state, so that it serves several
		root.ForUser("someone-else").UserID(ctx, "https://auth.elsewhere.test")
	}
	if c.ps, err = Open(ctx, root, user); err != nil {
		t.Fatal(err)
	}
	c.ps.Agent = func(ctx context.Context, st *store.Store) (*auth.Agent, error) {
		return auth.New(id, &auth.Options{HTTPClient: &http.Client{Transport: guard}, Store: st}), nil
	}
	c.signedIn(t)
	return c
}

// signedIn records the person signed in at the Company.
func (c *company) signedIn(t *testing.T) {
	t.Helper()
	ctx, st, iss := context.Background(), c.ps.Store, c.srv.Issuer()
	userID, err := st.UserID(ctx, iss)
	if err != nil {
		t.Fatal(err)
	}
	err = errors.Join(
		st.PutAccountToken(ctx, store.AccountToken{Issuer: iss, UserID: userID, Account: auth.DefaultAccountLabel,
			Scopes: []string{"poppy:read"}, Token: store.NewSecretString("pat_test")}),
		st.PutSession(ctx, store.Session{Issuer: iss, UserID: userID, ID: "s1", Domain: c.srv.Domain(), Account: "acct_dana",
			SignedIn: true, Scopes: []string{"poppy:read"}}),
		st.PutConversation(ctx, store.Conversation{ID: "conv1", Domain: c.srv.Domain(), Issuer: iss, UserID: userID}))
	if err != nil {
		t.Fatal(err)
	}
}

// find is the Company as FindCompany finds it.
func (c *company) find(t *testing.T) *Company {
	t.Helper()
	co, err := FindCompany(context.Background(), c.docs, c.ps.Store, c.srv.Domain())
	if err != nil {
		t.Fatal(err)
	}
	return co
}

// session is the person's Session s1.
func (c *company) session(t *testing.T) store.Session {
	t.Helper()
	sessions, err := c.ps.Store.Sessions(context.Background(), c.srv.Issuer())
	if err != nil || len(sessions) != 1 {
		t.Fatalf("sessions: %v %v", sessions, err)
	}
	return sessions[0]
}

// TestOpenSeveralPeople: a state of several people is opened as one of
// them only when named; a name that is no ISSUER:SUB is a UsageError.
func TestOpenSeveralPeople(t *testing.T) {
	ctx := context.Background()
	root, err := store.Open(ctx, t.TempDir(), &store.Options{Key: make([]byte, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := Open(ctx, root, ""); err != nil {
		t.Fatalf("a state of one person: %v", err)
	}
	ana := mcpauth.User{Issuer: "https://login.example.org", Subject: "ana"}
	if _, err := root.ForUser(ana.Key()).UserID(ctx, "https://auth.example.com"); err != nil {
		t.Fatal(err)
	}
	var ue *UsageError
	if _, err := Open(ctx, root, ""); !errors.As(err, &ue) {
		t.Errorf("a state of several people without a name: %v, want a UsageError", err)
	}
	if _, err := Open(ctx, root, "ana"); !errors.As(err, &ue) {
		t.Errorf("a name without its issuer: %v, want a UsageError", err)
	}
	ps, err := Open(ctx, root, "https://login.example.org:ana")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Store.FindUserID(ctx, "https://auth.example.com"); err != nil {
		t.Errorf("Ana's view does not hold her User ID: %v", err)
	}
}

// TestSignOut: the Account Token is revoked at the Company and deleted, and
// the Session recorded signed out.
func TestSignOut(t *testing.T) {
	c := newCompany(t, "")
	rep, err := c.ps.SignOut(context.Background(), c.find(t), false)
	if err != nil || !rep.Held || !rep.Revoked || !rep.Deleted || !slices.Equal(rep.Scopes, []string{"poppy:read"}) {
		t.Fatalf("SignOut: %+v, %v", rep, err)
	}
	if n := c.revoked.Load(); n != 1 {
		t.Errorf("the Company received %d revocations, want 1", n)
	}
	if s := c.session(t); s.SignedIn || s.Account != "" || s.Scopes != nil {
		t.Errorf("the Session after sign-out: %+v", s)
	}
}

// TestSignOutRevocationFails: when the Company cannot revoke, nothing is
// deleted and the Session stays signed in, unless forced.
func TestSignOutRevocationFails(t *testing.T) {
	c := newCompany(t, "")
	c.revokeStatus.Store(http.StatusServiceUnavailable)
	rep, err := c.ps.SignOut(context.Background(), c.find(t), false)
	if err == nil || rep.Revoked || rep.Deleted || !c.session(t).SignedIn {
		t.Fatalf("SignOut with revocation refused: %+v, %v", rep, err)
	}
	rep, err = c.ps.SignOut(context.Background(), c.find(t), true)
	if err == nil || rep.Revoked || !rep.Deleted || c.session(t).SignedIn {
		t.Errorf("SignOut forced: %+v, %v", rep, err)
	}
}

// TestSignOutNeverUsed: a Company the person never used holds nothing,
// and no agent is needed to say so.
func TestSignOutNeverUsed(t *testing.T) {
	c := newCompany(t, "")
	co := c.find(t)
	co.Issuer = "https://auth.unused.test"
	c.ps.Agent = nil
	if rep, err := c.ps.SignOut(context.Background(), co, false); err != nil || rep.Held {
		t.Errorf("SignOut of an unused Company: %+v, %v", rep, err)
	}
}

// TestForget: Held says what is held; Revoke revokes the Account Token;
// Delete deletes the User ID, Sessions and conversations, and the catalogs
// of the Company's documents but not another's.
func TestForget(t *testing.T) {
	ctx := context.Background()
	c := newCompany(t, "")
	for _, u := range []string{"https://api.example.com/openapi.json", "https://api.other.test/openapi.json"} {
		if err := catalogstore.Put(ctx, c.ps.Root, u, "k", "v", []byte("c")); err != nil {
			t.Fatal(err)
		}
	}
	f := c.ps.Forget(c.find(t))
	h, err := f.Held(ctx)
	if err != nil || h != (Holding{UserID: true, AccountToken: true, Sessions: 1, Conversations: 1}) || !f.Report.Held {
		t.Fatalf("Held: %+v, %v", h, err)
	}
	if err := f.Revoke(ctx); err != nil || !f.Report.Revoked || c.revoked.Load() != 1 {
		t.Fatalf("Revoke: %v; report %+v", err, f.Report)
	}
	if err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	want := ForgetCounts{UserID: true, Sessions: 1, Conversations: 1, Catalogs: 1}
	if d := f.Report.Deleted; !f.Report.Forgotten || d.UserID != want.UserID || d.Sessions != 1 || d.Conversations != 1 || d.Catalogs != 1 {
		t.Errorf("Deleted: %+v, want %+v", d, want)
	}
	if _, err := c.ps.Store.FindUserID(ctx, c.srv.Issuer()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the User ID after forget: %v", err)
	}
	if names, _ := c.ps.Root.BlobNames(ctx); !slices.Equal(names, []string{"https://api.other.test/openapi.json"}) {
		t.Errorf("catalogs left: %q", names)
	}
}

// TestForgetOfOnePerson: in a state of several people, a forget keeps the
// catalogs, which are everyone's.
func TestForgetOfOnePerson(t *testing.T) {
	ctx := context.Background()
	c := newCompany(t, "https://login.example.org:ana")
	if err := catalogstore.Put(ctx, c.ps.Root, "https://api.example.com/openapi.json", "k", "v", []byte("c")); err != nil {
		t.Fatal(err)
	}
	f := c.ps.Forget(c.find(t))
	if _, err := f.Held(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Delete(ctx); err != nil || f.Report.Deleted.Catalogs != 0 || !f.Report.Deleted.UserID {
		t.Errorf("Delete: %+v, %v", f.Report.Deleted, err)
	}
	if names, _ := c.ps.Root.BlobNames(ctx); len(names) != 1 {
		t.Errorf("the shared catalog was deleted: %q", names)
	}
}

// TestFindCompanyFromState: when the documents cannot be used, the Company
// is the one whose Sessions the state recorded at the domain.
func TestFindCompanyFromState(t *testing.T) {
	c := newCompany(t, "")
	c.srv.Close()
	co := c.find(t)
	if co.DocErr == nil || co.Issuer != c.srv.Issuer() || !slices.Equal(co.Covered(), []string{c.srv.Domain()}) {
		t.Errorf("FindCompany with the documents down: %+v", co)
	}
	f := c.ps.Forget(co)
	if _, err := f.Held(context.Background()); err != nil || !f.Report.AccountToken {
		t.Fatalf("Held: %+v, %v", f.Report, err)
	}
	if err := f.Revoke(context.Background()); err == nil {
		t.Error("a revocation without the Company's documents")
	}
}

// TestStatus: the Company the person used, with its sign-in, Session and
// conversation; with no identity, none is shown.
func TestStatus(t *testing.T) {
	c := newCompany(t, "")
	rep, err := c.ps.Status(context.Background(), nil)
	if err != nil || rep.Identity != nil || len(rep.Companies) != 1 {
		t.Fatalf("Status: %+v, %v", rep, err)
	}
	cs := rep.Companies[0]
	if cs.Issuer != c.srv.Issuer() || !cs.SignedIn || cs.AccountToken == nil || len(cs.Sessions) != 1 || cs.Open != 1 ||
		!slices.Equal(cs.Domains, []string{c.srv.Domain()}) || !slices.Equal(cs.Scopes, []string{"poppy:read"}) {
		t.Errorf("the Company: %+v", cs)
	}
	if _, err := c.ps.SignOut(context.Background(), c.find(t), false); err != nil {
		t.Fatal(err)
	}
	if rep, _ := c.ps.Status(context.Background(), nil); rep.Companies[0].SignedIn || rep.Companies[0].Sessions[0].SignedIn {
		t.Errorf("after sign-out: %+v", rep.Companies[0])
	}
}
