package conversation_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/conversation"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// The endpoint comes from the poppy entry of agent.protocols.
func ExampleChooseEndpoint() {
	endpoint, err := conversation.ChooseEndpoint([]discovery.Protocol{
		{Type: "example.com/chat", Endpoint: "https://api.example.com/chat"},
		{Type: "poppy", Endpoint: "https://api.example.com/poppy/conversations"},
	})
	fmt.Println(endpoint, err)
	// Output: https://api.example.com/poppy/conversations <nil>
}

// A Tracker starts a conversation and waits for the Company Agent's reply;
// the Session's client authorizes every request.
func ExampleTracker_Start() {
	t := &poppytest.Reporter{}
	defer t.Close()
	company := poppytest.NewServer(t, nil)
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, dir, &store.Options{Key: bytes.Repeat([]byte{1}, 32), Keychain: store.NoKeychain{}})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	// The agent and its Session (package auth), as in auth's examples.
	id, _ := auth.NewIdentity(ctx, "https://"+company.AgentHost()+"/agent.json", &auth.IdentityOptions{Store: st})
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	company.SetAgentDocuments(agentJSON, jwks)
	d := company.Domain()
	ac := auth.Company{Issuer: company.Issuer(), Domain: d, TokenEndpoint: company.URL("auth."+d, "/oauth/token")}
	userID, _ := st.UserID(ctx, ac.Issuer)
	sess, err := auth.New(id, &auth.Options{HTTPClient: company.Client(), Store: st}).StartSession(ctx, ac, userID)
	if err != nil {
		log.Fatal(err)
	}

	c, err := conversation.New(sess.Client(), company.URL("api."+d, "/poppy/conversations"), nil)
	if err != nil {
		log.Fatal(err)
	}
	tr, _ := conversation.NewTracker(c, st, conversation.Owner{Issuer: ac.Issuer, UserID: userID, Domain: d}, nil)
	u, err := tr.Start(ctx, conversation.Message{Sender: conversation.SenderAgent, Text: "Hello"}, "",
		&conversation.ReadOptions{Wait: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range u.Events {
		if e.Type == conversation.EventMessage {
			fmt.Printf("%s (%s): %s\n", e.Message.Role, e.Message.Sender, e.Message.Text)
		}
	}
	fmt.Println(u.Status, u.Responder)
	// Output:
	// company (agent): I'm the Example Company assistant. I can check an order's status, start a return or an exchange, or bring in a person.
	// idle agent
}
