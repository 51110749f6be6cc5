package auth_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"time"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// Device Sign-In: show the user the link and code, poll until they finish,
// then keep the Account Token (in a *store.Store) for later Sessions.
func ExampleSession_PollDevice() {
	t := &poppytest.Reporter{}
	defer t.Close()
	company := poppytest.NewServer(t, &poppytest.Options{DeviceInterval: time.Second,
		AutoApprove: &poppytest.AutoApproval{Account: "acct_dana"}}) // the user approves at once
	ctx := context.Background()
	d := company.Domain()
	sess := exampleSession(company, nil, auth.Company{
		DeviceAuthorizationEndpoint: company.URL("auth."+d, "/oauth/device"),
	})

	da, err := sess.StartDevice(ctx, []string{"poppy:read", "poppy:write"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("open", da.VerificationURI, "and enter the code:", len(da.UserCode) == 9)
	in, err := sess.PollDevice(ctx, da) // waits da.Interval before each poll
	if err != nil {
		log.Fatal(err)
	}
	// in.Account.Keep(ctx, st) stores the Account Token encrypted.
	fmt.Println(sess.Info().SignedIn, in.Scopes, in.Missing, in.Account)
	// Output:
	// open https://auth.example.com/device and enter the code: true
	// true [poppy:read poppy:write] [] auth.Account(default at https://auth.example.com)
}

// Direct Sign-In: open URL in the user's browser; the Company sends it back
// to the redirect URI, whose query goes to FinishDirect.
func ExampleSession_StartDirect() {
	t := &poppytest.Reporter{}
	defer t.Close()
	company := poppytest.NewServer(t, nil)
	d := company.Domain()
	sess := exampleSession(company, &auth.IdentityOptions{RedirectURIs: []string{"https://agent.example/oauth/callback"}},
		auth.Company{AuthorizationEndpoint: company.URL("auth."+d, "/oauth/authorize")})
	ds, err := sess.StartDirect("https://agent.example/oauth/callback", []string{"poppy:read"})
	if err != nil {
		log.Fatal(err)
	}
	u, _ := url.Parse(ds.URL)
	fmt.Println(u.Host+u.Path, u.Query().Get("code_challenge_method"), u.Query().Get("state") == ds.State)
	// The browser comes back to the callback: sess.FinishDirect(ctx, ds, callbackURL.Query())
	// Output:
	// auth.example.com/oauth/authorize S256 true
}

// exampleSession registers an agent with the Company and starts a Session;
// c gives the endpoints beyond the token endpoint.
func exampleSession(company *poppytest.Server, idOpts *auth.IdentityOptions, c auth.Company) *auth.Session {
	ctx := context.Background()
	id, err := auth.NewIdentity(ctx, "https://"+company.AgentHost()+"/agent.json", idOpts)
	if err != nil {
		log.Fatal(err)
	}
	agentJSON, _ := id.AgentJSON()
	jwks, _ := id.JWKSJSON()
	company.SetAgentDocuments(agentJSON, jwks) // what publishing them does
	agent := auth.New(id, &auth.Options{HTTPClient: company.Client()})
	d := company.Domain()
	c.Issuer, c.Domain, c.TokenEndpoint = company.Issuer(), d, company.URL("auth."+d, "/oauth/token")
	sess, err := agent.StartSession(ctx, c, "usr_Q7c1vK")
	if err != nil {
		log.Fatal(err)
	}
	return sess
}
