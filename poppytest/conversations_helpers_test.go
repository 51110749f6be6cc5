package poppytest_test

// A hand-made conversation client on the raw agent (agent_test.go): JSON
// requests with a DPoP Session Token and a fresh proof each, written from
// Poppy 0.1 §7, sharing no code with the Server.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

const testConvURL = "https://api.example.com/poppy/conversations"

// convAgent is a raw agent with a Session, talking to conversations.
type convAgent struct {
	*rawAgent
	clock     *clock
	token     string
	sessionID string
}

// newConvCompany starts a Company reporting to a recordingT and an agent
// with a signed-out Session.
func newConvCompany(t *testing.T, opts *poppytest.Options) (*poppytest.Server, *recordingT, *convAgent) {
	t.Helper()
	o := poppytest.Options{}
	if opts != nil {
		o = *opts
	}
	if o.ReplayEvents == 0 {
		o.ReplayEvents = -1 // these hand-made reads check pages exactly; the replay tests ask for replays
	}
	s, rt, a, c := newTestCompany(t, &o)
	ca := &convAgent{rawAgent: a, clock: c}
	ca.newSession()
	return s, rt, ca
}

// newSession starts a new signed-out Session for the same User.
func (a *convAgent) newSession() {
	r := a.startSession()
	a.token, a.sessionID = r.str("access_token"), r.str("session_id")
}

// otherUser is an agent of the same client for another User, with its own
// DPoP key and Session.
func (a *convAgent) otherUser(userID string) *convAgent {
	raw := *a.rawAgent
	raw.userID, raw.dpopKey = userID, newKey(a.t)
	b := &convAgent{rawAgent: &raw, clock: a.clock}
	b.newSession()
	return b
}

// signIn signs the agent's Session in to account with scopes through
// Device Sign-In (Poppy 0.1 §4.6), approved by the test, and takes the new
// Session Token.
func (a *convAgent) signIn(account string, scopes ...string) {
	a.t.Helper()
	form := url.Values{"client_id": {testClientID}, "scope": {strings.Join(scopes, " ")},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {a.clientAssertion(nil)}}
	req, _ := http.NewRequest(http.MethodPost, "https://auth.example.com/oauth/device", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	d := a.do(req)
	if d.status != 200 {
		a.t.Fatalf("device authorization: %d %v", d.status, d.body)
	}
	if err := a.s.ApproveDevice(d.str("user_code"), account, scopes...); err != nil {
		a.t.Fatal(err)
	}
	a.clock.Advance(time.Duration(d.body["interval"].(float64)) * time.Second)
	form = url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {d.str("device_code")},
		"session_id": {a.sessionID}, "client_id": {testClientID},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {a.clientAssertion(nil)}}
	r := a.postToken(form, a.proof("POST", testTokenURL, "", "", nil))
	if r.status != 200 || r.body["signed_in"] != true {
		a.t.Fatalf("device sign-in: %d %v", r.status, r.body)
	}
	a.token = r.str("access_token")
}

// request sends method to the conversation API at path (after the
// endpoint) with query and a JSON body (nil for none).
func (a *convAgent) request(method, path, query string, body any, header http.Header) response {
	a.t.Helper()
	u := testConvURL + path
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	full := u
	if query != "" {
		full += "?" + query
	}
	var req *http.Request
	if rd != nil {
		req, _ = http.NewRequest(method, full, rd)
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, _ = http.NewRequest(method, full, nil)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "DPoP "+a.token)
	// Poppy 0.1 §4.3: htu is the URL "without the query or fragment"
	req.Header.Set("DPoP", a.proof(method, u, a.token, "", nil))
	return a.do(req)
}

// start starts a conversation with msg.
func (a *convAgent) start(msg map[string]any) response {
	a.t.Helper()
	return a.request("POST", "", "", map[string]any{"message": msg}, nil)
}

// mustStart starts a conversation and returns its ID.
func (a *convAgent) mustStart(text string) string {
	a.t.Helper()
	r := a.start(msg(text))
	if r.status != 201 || !strings.HasPrefix(r.str("conversation_id"), "cnv_") {
		a.t.Fatalf("start: %d %v", r.status, r.body)
	}
	return r.str("conversation_id")
}

// send posts msg to the conversation id.
func (a *convAgent) send(id string, msg map[string]any, query string) response {
	a.t.Helper()
	return a.request("POST", "/"+id+"/messages", query, map[string]any{"message": msg}, nil)
}

// read reads the events of id with query.
func (a *convAgent) read(id, query string) response {
	a.t.Helper()
	return a.request("GET", "/"+id+"/events", query, nil, nil)
}

// settle reads from cursor until the conversation is no longer working,
// and returns every event read and the last answer.
func (a *convAgent) settle(id, cursor string) ([]map[string]any, response) {
	a.t.Helper()
	var all []map[string]any
	for range 50 {
		q := url.Values{"wait": {"5"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := a.read(id, q.Encode())
		if r.status != 200 {
			a.t.Fatalf("read %s: %d %v", id, r.status, r.body)
		}
		all = append(all, events(r)...)
		cursor = r.str("cursor")
		if r.str("status") != poppytest.StatusWorking && r.body["has_more"] == false {
			return all, r
		}
	}
	a.t.Fatalf("conversation %s still working", id)
	return nil, response{}
}

// jsonBody is v as a JSON request body.
func jsonBody(v any) (*bytes.Reader, error) {
	b, err := json.Marshal(v)
	return bytes.NewReader(b), err
}

// msg is an agent message with a fresh ID and text.
func msg(text string) map[string]any {
	return map[string]any{"id": "msg_" + jti(), "sender": "agent", "text": text}
}

// events returns the events of a read's answer.
func events(r response) []map[string]any {
	var out []map[string]any
	list, _ := r.body["events"].([]any)
	for _, e := range list {
		out = append(out, e.(map[string]any))
	}
	return out
}

// ofType returns the events of type typ.
func ofType(evs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// companyTexts returns the texts of the Company's messages among evs.
func companyTexts(evs []map[string]any) []string {
	var out []string
	for _, e := range ofType(evs, "message") {
		if m := e["message"].(map[string]any); m["role"] == "company" {
			out = append(out, m["text"].(string))
		}
	}
	return out
}

// wantConvError checks an error answer of the conversation API (Poppy 0.1 §7.13).
func wantConvError(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status || r.str("error") != code || r.str("error_description") == "" {
		t.Errorf("answer %d %v, want %d %s", r.status, r.body, status, code)
	}
}

// wantStatus checks the status and responder of an answer.
func wantStatus(t *testing.T, r response, code int, status, responder string) {
	t.Helper()
	if r.status != code || r.str("status") != status || r.str("responder") != responder {
		t.Errorf("answer %d %v, want %d with status %s and responder %s", r.status, r.body, code, status, responder)
	}
}

// newSettled starts a Company whose Company Agent answers at once, and a
// conversation whose first turn is over. It returns the conversation's ID
// and the cursor after that turn.
func newSettled(t *testing.T, opts *poppytest.Options) (*poppytest.Server, *recordingT, *convAgent, string, string) {
	t.Helper()
	o := poppytest.Options{}
	if opts != nil {
		o = *opts
	}
	o.AgentDelay = -1
	s, rt, a := newConvCompany(t, &o)
	id := a.mustStart("hello")
	_, last := a.settle(id, "")
	return s, rt, a, id, last.str("cursor")
}
