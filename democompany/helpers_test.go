package democompany_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// agent is poppy-mcp's own agent packages with a Session at a poppytest
// Company: the demo Company is tested with the agent it is for.
type agent struct {
	srv  *poppytest.Server
	sess *auth.Session
}

// newAgent registers an agent with srv and starts its Session.
func newAgent(t *testing.T, srv *poppytest.Server) *agent {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), &store.Options{Key: bytes.Repeat([]byte{7}, 32), Keychain: store.NoKeychain{}})
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
	d := srv.Domain()
	ac := auth.Company{Issuer: srv.Issuer(), Domain: d, TokenEndpoint: srv.URL("auth."+d, "/oauth/token"),
		MediatedEndpoint: srv.URL("auth."+d, "/poppy/sign-in")}
	userID, err := st.UserID(ctx, ac.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := auth.New(id, &auth.Options{HTTPClient: srv.Client(), Store: st}).StartSession(ctx, ac, userID)
	if err != nil {
		t.Fatal(err)
	}
	return &agent{srv: srv, sess: sess}
}

// conversations is a conversation client through the agent's Session.
func (a *agent) conversations(t *testing.T) *conversation.Client {
	t.Helper()
	c, err := conversation.New(a.sess.Client(), a.srv.URL("api."+a.srv.Domain(), "/poppy/conversations"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantNoViolation fails t if the agent broke a rule of the Company.
func wantNoViolation(t *testing.T, srv *poppytest.Server) {
	t.Helper()
	if v := srv.Violations(); len(v) != 0 {
		t.Errorf("violations: %v", v)
	}
}
