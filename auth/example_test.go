package auth_test

import (
	"context"
	"fmt"
	"log"

	"github.com/poppy-mcp/poppy-mcp/auth"
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
