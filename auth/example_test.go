package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// The agent's identity gives the two documents to publish: agent.json at
// the client_id and jwks.json at jwks_uri.
func ExampleNewIdentity() {
	id, err := auth.NewIdentity(context.Background(), "https://agent.example/agent.json", &auth.IdentityOptions{
		ClientName:   "Example Agent",
		RedirectURIs: []string{"https://agent.example/oauth/callback"},
		// Store: a *store.Store, so the keys survive restarts.
	})
	if err != nil {
		log.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	fmt.Println(string(agentJSON))
	fmt.Println(len(id.JWKS().Keys), "public key, kid", id.CurrentKeyID() == id.JWKS().Keys[0].KeyID)
	// Output:
	// {
	//   "client_id": "https://agent.example/agent.json",
	//   "client_name": "Example Agent",
	//   "jwks_uri": "https://agent.example/jwks.json",
	//   "redirect_uris": [
	//     "https://agent.example/oauth/callback"
	//   ],
	//   "token_endpoint_auth_method": "private_key_jwt",
	//   "extensions": {}
	// }
	// 1 public key, kid true
}

// A Session's client signs every request; callers never build auth headers.
func ExampleAgent_StartSession() {
	t := &poppytest.Reporter{} // in a test, the *testing.T
	defer t.Close()
	company := poppytest.NewServer(t, nil)
	ctx := context.Background()

	id, err := auth.NewIdentity(ctx, "https://"+company.AgentHost()+"/agent.json", nil)
	if err != nil {
		log.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	company.SetAgentDocuments(agentJSON, jwks) // what publishing them does

	agent := auth.New(id, &auth.Options{HTTPClient: company.Client()})
	d := company.Domain()
	sess, err := agent.StartSession(ctx, auth.Company{
		Issuer:        company.Issuer(), // from discovery: poppy.json and RFC 8414 metadata
		Domain:        d,
		TokenEndpoint: company.URL("auth."+d, "/oauth/token"),
	}, "usr_Q7c1vK")
	if err != nil {
		log.Fatal(err)
	}
	resp, err := sess.Client().Get(company.URL("api."+d, "/poppy/whoami"))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var who struct {
		SessionID string `json:"session_id"`
		UserID    string `json:"user_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&who); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, who.UserID, who.SessionID == sess.Info().ID, sess.Info().SignedIn)
	// Output:
	// 200 usr_Q7c1vK true false
}
