package livecheck_test

import (
	"context"
	"fmt"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/livecheck"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// Probe the strict reference Company under an identity it can fetch.
func Example() {
	ctx := context.Background()
	violations := &poppytest.Reporter{Log: func(string) {}} // the probes break rules on purpose
	defer violations.Close()
	company := poppytest.NewServer(violations, nil)

	id, err := auth.NewIdentity(ctx, "https://"+company.AgentHost()+"/agent.json", nil)
	if err != nil {
		panic(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	company.SetAgentDocuments(agentJSON, jwks) // the Company must be able to fetch them

	c := livecheck.New(id, &livecheck.Options{Transport: company.Transport()})
	rep, err := c.Run(ctx, "example.com")
	if err != nil {
		panic(err)
	}
	for _, ch := range rep.Checks[:4] {
		fmt.Println(ch.Status, ch.ID)
	}
	fmt.Println("ok:", rep.OK())
	// Output:
	// ok session.start
	// ok session.no_store
	// ok nonce.token
	// ok refuse.replayed_jti
	// ok: true
}
