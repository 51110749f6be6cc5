package tools_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// approveOnPage is what the user does with a verification URL offered by
// elicitation: open it (the Company's page), and approve.
func approveOnPage(t *testing.T, s *poppytest.Server, u string) {
	t.Helper()
	resp, err := s.Client().Get(u)
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("verification page %q: %v %v", u, resp, err)
		return
	}
	resp.Body.Close()
	pu, _ := url.Parse(u)
	if err := s.ApproveDevice(pu.Query().Get("user_code"), "acct_dana"); err != nil {
		t.Error(err)
	}
}

// TestSignInDeviceElicitation: a go-sdk client declaring URL elicitation is
// offered the verification URL that way at both revisions; a client without
// elicitation just gets the fields (TestSignInDevice).
func TestSignInDeviceElicitation(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(nil))
			elicits := 0
			cs := h.connectWith(t, rev, &sdk.ClientOptions{
				Capabilities: &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
				ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					elicits++
					if r.Params.Mode != "url" || !strings.Contains(r.Params.Message, "code") {
						t.Errorf("elicitation %+v", r.Params)
					}
					approveOnPage(t, h.company, r.Params.URL)
					return &sdk.ElicitResult{Action: "accept"}, nil
				},
			})
			res, got := call(t, cs, "sign_in_device", map[string]any{"domain": domain, "scopes": []string{"poppy:read"}})
			if res.IsError || got["elicitation"] != "accept" || got["user_code"] == nil || elicits != 1 {
				t.Fatalf("sign_in_device = %v (elicitations %d)", got, elicits)
			}
			if _, st := status(t, cs, 10); st["status"] != "complete" {
				t.Fatalf("sign_in_status = %v", st)
			}
			scanForSecrets(t, h, res)
		})
	}
}

// mcpGoElicitor is an mcp-go client's elicitation handler acting as the user.
type mcpGoElicitor struct {
	t       *testing.T
	company *poppytest.Server
	n       int
}

func (e *mcpGoElicitor) Elicit(_ context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.n++
	approveOnPage(e.t, e.company, r.Params.URL)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// TestSignInDeviceElicitationMCPGo: the same with mark3labs/mcp-go's client.
func TestSignInDeviceElicitationMCPGo(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			h := newSignInHarness(t, signInOpts(nil))
			tr, err := transport.NewStreamableHTTP(h.url)
			if err != nil {
				t.Fatal(err)
			}
			el := &mcpGoElicitor{t: t, company: h.company}
			c := mcpclient.NewClient(tr, mcpclient.WithProtocolVersion(rev), mcpclient.WithElicitationHandler(el),
				mcpclient.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{URL: &struct{}{}}}))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: rev,
				ClientInfo: mcp.Implementation{Name: "mcp-go-test", Version: "1"}}}); err != nil {
				t.Fatal(err)
			}
			res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "sign_in_device",
				Arguments: map[string]any{"domain": domain, "scopes": []string{"poppy:read"}}}})
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			raw, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(raw, &got)
			if res.IsError || got["elicitation"] != "accept" || el.n != 1 {
				t.Fatalf("sign_in_device = %s (elicitations %d)", raw, el.n)
			}
		})
	}
}
