package tools

// This file serves sign_in_status, which reports the latest sign-in of a
// Company and can wait for it with MCP progress notifications, and the MCP
// mechanics the sign-in tools share: URL-mode elicitation through
// server.NewInputRequestBuilder (an input_required result for 2026-07-28
// clients, a server-initiated request for older ones) and progress.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/poppy-mcp/poppy-mcp/agent"
	"github.com/poppy-mcp/poppy-mcp/auth"
)

// maxWait bounds wait_seconds, below the call timeouts MCP clients use.
const maxWait = 50 * time.Second

func (si *signIn) statusTool() tool {
	return newTool("sign_in_status",
		"Report the latest sign-in with a Company: pending, complete, denied, expired or failed, whether the Session is signed in, "+
			"and the scopes granted. Set wait_seconds (up to 50) to wait for the user to finish; call again while pending.",
		annotations{title: "Sign-in status", readOnly: true, idempotent: true, openWorld: true},
		si.status)
}

// statusResult is the structured content of the sign-in tools. It never
// holds a token, a device code, a code verifier or a credential.
type statusResult struct {
	Domain    string   `json:"domain"`
	Type      string   `json:"type,omitempty"` // device, direct or mediated
	Status    string   `json:"status"`
	SignedIn  bool     `json:"signed_in"`
	Scopes    []string `json:"scopes"`                     // granted
	Granted   []string `json:"scopes_granted"`             // granted, beside Requested
	Requested []string `json:"scopes_requested,omitempty"` // asked for
	Missing   []string `json:"missing_scopes"`             // asked for, not granted
	// NotRequested are scopes the Company granted that were not asked for:
	// harmless to the user, but the Company breaks Poppy 0.1 §4.4.
	NotRequested []string `json:"scopes_not_requested,omitempty"`
	SessionID    string   `json:"session_id,omitempty"`
	// Device Sign-In: what the user needs while pending.
	VerificationURI         string `json:"verification_uri,omitempty"`
	UserCode                string `json:"user_code,omitempty"`
	VerificationURIComplete string `json:"verification_uri_complete,omitempty"`
	ExpiresIn               int64  `json:"expires_in,omitempty"`
	// Direct and Mediated Sign-In: poppy-mcp's one-time page for the user,
	// when it was not offered by elicitation. Never the Company's
	// authorization URL: its state and code_challenge are not the model's.
	SignInURL string `json:"sign_in_url,omitempty"`
	// Elicitation is the client's answer when the URL was offered by
	// URL-mode elicitation: accept, decline or cancel, or failed when it
	// answered with an error. Unless it is accept, the result holds the
	// link (and any code) for the model to show, as without elicitation.
	Elicitation string `json:"elicitation,omitempty"`
	Detail      string `json:"detail,omitempty"`
	Notice      string `json:"notice,omitempty"`
	Next        string `json:"next"`
}

// signInStatusArgs are sign_in_status's arguments.
type signInStatusArgs struct {
	companyArgs
	WaitSeconds *integer `json:"wait_seconds,omitempty" schema:"minimum=0,maximum=50" jsonschema:"Wait up to this long for a pending sign-in to finish"`
}

func (si *signIn) status(ctx context.Context, req mcp.CallToolRequest, args signInStatusArgs) *mcp.CallToolResult {
	domain := args.Domain
	cs, _, err := si.sessions.stateFor(ctx, domain)
	if err != nil {
		return si.sessions.failure(ctx, domain, err)
	}
	f := si.latest(ctx, cs)
	if f == nil {
		return si.noSignIn(ctx, cs, domain)
	}
	if wait := args.WaitSeconds.duration(0, maxWait); wait > 0 {
		f = si.waitFlow(ctx, req, cs, f, wait)
	}
	return si.flowResult(cs, f, "")
}

// noSignIn answers sign_in_status before any sign-in.
func (si *signIn) noSignIn(ctx context.Context, cs *agent.Company, domain string) *mcp.CallToolResult {
	sess := cs.Session()
	if sess != nil && sess.Info().SignedIn {
		info := sess.Info()
		return result(statusResult{Domain: domain, Status: statusComplete, SignedIn: true, Scopes: info.Scopes, Missing: []string{},
			SessionID: info.ID, Next: "Go on with the task."}, "The Session with %s is signed in with %s.", domain, strings.Join(info.Scopes, " "))
	}
	next := fmt.Sprintf("Call %s with domain %s and the scopes the task needs.", si.choice.tool(si.companies.knownAuth(domain), []string{"poppy:read"}), domain)
	return failure(map[string]string{"error": "no_sign_in", "next": next}, "No sign-in was started for %s. %s", domain, next)
}

// waitFlow waits until f leaves pending, wait passes or the call is
// canceled, sending a progress notification each second when the client
// asked for them with a progressToken. A sign-in that may end on another
// replica (polled there, or its page used there) is read again from the
// store when that replica announces a change, and each second in case an
// announcement was lost. It returns the sign-in as it is
// then (a newer one, if one replaced f elsewhere).
func (si *signIn) waitFlow(ctx context.Context, req mcp.CallToolRequest, cs *agent.Company, f *auth.Flow, wait time.Duration) *auth.Flow {
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	changed := cs.Person().SignIns().Listen(ctx, cs.Issuer())
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	total := int(wait / time.Second)
	for n := 1; ; n++ {
		select {
		case <-f.Done():
			return f
		case <-deadline.C:
			return f
		case <-ctx.Done():
			return f
		case <-changed:
			n--
		case <-tick.C:
			if token != nil {
				_ = si.mcp.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
					"progressToken": token, "progress": n, "total": total,
					"message": "Waiting for the user to finish signing in",
				})
			}
		}
		f = si.latest(ctx, cs) // kept in the store: it may end on another replica
	}
}

// flowResult is the result of a sign-in tool for f; elicited is the
// client's answer to a URL elicitation, if one was made.
func (si *signIn) flowResult(cs *agent.Company, f *auth.Flow, elicited string) *mcp.CallToolResult {
	if f.Pending() && !f.Expires.IsZero() && !si.now().Before(f.Expires) && f.End(statusExpired, nil, nil, "The sign-in expired before the user finished it.") {
		f.StopPage()
	}
	st := f.State()
	status, granted, missing, detail := st.Status, st.Granted, st.Missing, st.Detail
	res := statusResult{Domain: f.Domain, Type: string(f.Kind), Status: status, Scopes: granted, Requested: f.Scopes,
		Missing: missing, Elicitation: elicited, Detail: detail, Notice: takeNotice(cs)}
	if sess := cs.Session(); sess != nil {
		info := sess.Info()
		res.SignedIn, res.SessionID = info.SignedIn, info.ID
	}
	if res.Scopes == nil {
		res.Scopes = []string{}
	}
	res.Granted, res.NotRequested = res.Scopes, auth.NotRequested(res.Scopes, f.Scopes)
	if res.Missing == nil {
		res.Missing = []string{}
	}
	if status == statusPending {
		si.pendingFields(&res, f, elicited == "accept")
	}
	res.Next = nextStep(&res)
	text := fmt.Sprintf("%s sign-in with %s: %s.", f.Kind, f.Domain, status)
	if res.Detail != "" {
		text += " " + res.Detail
	}
	if res.Notice != "" {
		text += " " + res.Notice
	}
	if len(res.NotRequested) > 0 {
		text += fmt.Sprintf(" The Company granted scopes that were not asked for (%s): harmless to the user, but the Company breaks the protocol.",
			companyWord(strings.Join(res.NotRequested, " ")))
	}
	if status == statusFailed || status == statusDenied || status == statusExpired {
		return failure(res, "%s %s", text, res.Next)
	}
	return result(res, "%s %s", text, res.Next)
}

// pendingFields adds what the user needs while a sign-in is pending.
func (si *signIn) pendingFields(res *statusResult, f *auth.Flow, accepted bool) {
	left := int64(f.Expires.Sub(si.now()) / time.Second)
	if left > 0 {
		res.ExpiresIn = left
	}
	switch {
	case f.Device != nil:
		res.VerificationURI, res.UserCode = f.Device.VerificationURI, f.Device.UserCode
		res.VerificationURIComplete = f.Device.VerificationURIComplete
	case f.Page != "" && !accepted:
		res.SignInURL = f.Page
	}
}

// nextStep says what the model should do next.
func nextStep(r *statusResult) string {
	switch r.Status {
	case statusComplete:
		if len(r.Missing) > 0 {
			return fmt.Sprintf("The user approved fewer scopes than asked (not %s): tasks needing them will fail; ask the user before signing in again.", strings.Join(r.Missing, " "))
		}
		return "Go on with the task."
	case statusPending:
		show := "Show the user the link " + r.SignInURL
		switch {
		case r.UserCode != "" && r.VerificationURIComplete != "":
			show = fmt.Sprintf("Ask the user to open %s (or %s and enter the code %s)", r.VerificationURIComplete, r.VerificationURI, r.UserCode)
		case r.UserCode != "":
			show = fmt.Sprintf("Ask the user to open %s and enter the code %s", companyWord(r.VerificationURI), companyWord(r.UserCode))
		case r.Elicitation == "accept":
			show = "The user was shown the page"
		case r.Elicitation != "":
			show = fmt.Sprintf("The user did not open the sign-in page the client offered (%s): show them the link %s if they still want to sign in", r.Elicitation, r.SignInURL)
		case r.SignInURL == "":
			show = "The sign-in page was offered to the user; if they did not open it, start the sign-in again"
		}
		return show + "; then call sign_in_status with domain " + r.Domain + " and wait_seconds 30."
	case statusDenied:
		return "Tell the user the sign-in was declined; start another only if they ask."
	case statusExpired:
		return "Start a new sign-in if the user still wants to sign in."
	}
	return "Tell the user the sign-in failed; start a new one if they want to try again."
}

// elicitsURL reports whether the client of this request declared URL-mode
// elicitation: per request for 2026-07-28 clients, per session before.
func elicitsURL(ctx context.Context) bool {
	var caps *mcp.ClientCapabilities
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		caps = info.ClientCapabilities
	} else if sess, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		c := sess.GetClientCapabilities()
		caps = &c
	}
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// elicitURL asks the client to open url (URL mode; MCP forbids form mode for
// passwords and codes). A 2026-07-28 client answers by calling the tool
// again with the answer and f.ID as requestState; see elicited. An earlier
// client is asked here, with elicitation/create: whatever it answers, an
// error included, the result is the normal one (flowResult), so the model
// still gets the code and the link.
func (si *signIn) elicitURL(ctx context.Context, cs *agent.Company, f *auth.Flow, url, message string) *mcp.CallToolResult {
	params := mcp.ElicitationParams{Mode: mcp.ElicitationModeURL, Message: message, ElicitationID: f.ID, URL: url}
	if mcp.IsModernProtocol(server.RequestProtocolVersion(ctx)) {
		return server.NewInputRequestBuilder(f.ID).Elicit("sign_in", params).ToolResult()
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		srv = si.mcp
	}
	res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}, Params: params})
	if err != nil || res == nil {
		si.log.InfoContext(ctx, "the client did not answer the sign-in elicitation", "type", f.Kind, "err", err)
		return si.flowResult(cs, f, "failed")
	}
	return si.flowResult(cs, f, string(res.Action))
}

// elicited returns the flow a retried call answers, and the client's
// action, when the call carries the requestState of cs's current flow: the
// latest kept one, since the retry may come to another replica than the
// call it answers (2026-07-28 has no sessions: docs/operations.md).
func (si *signIn) elicited(ctx context.Context, req mcp.CallToolRequest, cs *agent.Company) (*auth.Flow, string) {
	state := req.Params.RequestState
	if state == "" {
		return nil, ""
	}
	f := si.current(cs)
	if f == nil || f.ID != state {
		f = si.latest(ctx, cs)
	}
	if f == nil || f.ID != state {
		return nil, ""
	}
	action := "cancel"
	if r := server.ElicitationResponse(req.Params.InputResponses, "sign_in"); r != nil {
		action = string(r.Action)
	}
	return f, action
}
