package poppytest_test

// Tests of the MCP server (Poppy 0.1 §6) with a hand-made MCP client: JSON-RPC
// over HTTP, written from the MCP 2025-11-25 transport spec, with Bearer
// Session Tokens the raw agent gets by hand.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// mcpClient speaks MCP over streamable HTTP by hand.
type mcpClient struct {
	a       *rawAgent
	url     string
	token   string
	session string // Mcp-Session-Id
	id      int
}

// rpcAnswer is one HTTP answer: its status, header and JSON-RPC messages
// (one for a JSON body, every data event of an SSE body).
type rpcAnswer struct {
	status int
	header http.Header
	msgs   []map[string]any
}

// result is the result of the answer's response message, or nil.
func (r rpcAnswer) result() map[string]any {
	for _, m := range r.msgs {
		if res, ok := m["result"].(map[string]any); ok && m["id"] != nil {
			return res
		}
	}
	return nil
}

// bearerToken gets a Bearer Session Token for resource (Poppy 0.1 §4.3): the
// renewal of Session sid without a DPoP proof, with resource.
func (a *rawAgent) bearerToken(sid, resource string) string {
	a.t.Helper()
	r := a.postToken(a.grantForm(url.Values{"session_id": {sid}, "resource": {resource}}), "")
	if r.status != 200 || r.str("token_type") != "Bearer" {
		a.t.Fatalf("Bearer token for %s: %d %v", resource, r.status, r.body)
	}
	return r.str("access_token")
}

// newMCPClient starts a Session and returns a client with a Bearer token for the MCP url.
func newMCPClient(a *rawAgent) *mcpClient {
	return &mcpClient{a: a, url: testMCPURL, token: a.bearerToken(a.startSession().str("session_id"), testMCPURL)}
}

// rpc posts one JSON-RPC message; id 0 sends a notification.
func (m *mcpClient) rpc(method string, params any, notification bool) rpcAnswer {
	m.a.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if !notification {
		m.id++
		msg["id"] = m.id
	}
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, m.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if m.token != "" {
		req.Header.Set("Authorization", "Bearer "+m.token)
	}
	if m.session != "" {
		req.Header.Set("Mcp-Session-Id", m.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := m.a.s.Client().Do(req)
	if err != nil {
		m.a.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	ans := rpcAnswer{status: resp.StatusCode, header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				var v map[string]any
				if json.Unmarshal([]byte(strings.TrimSpace(data)), &v) == nil {
					ans.msgs = append(ans.msgs, v)
				}
			}
		}
		return ans
	}
	var v map[string]any
	if json.NewDecoder(resp.Body).Decode(&v) == nil {
		ans.msgs = []map[string]any{v}
	}
	return ans
}

// initialize runs the MCP handshake and keeps the session ID.
func (m *mcpClient) initialize() {
	m.a.t.Helper()
	r := m.rpc("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}}, false)
	if r.status != 200 || r.result() == nil {
		m.a.t.Fatalf("initialize: %d %v", r.status, r.msgs)
	}
	m.session = r.header.Get("Mcp-Session-Id")
	m.rpc("notifications/initialized", nil, true)
}

// toolNames follows tools/list's pages and returns every tool's name and
// how many pages there were.
func (m *mcpClient) toolNames() ([]string, int) {
	m.a.t.Helper()
	var names []string
	cursor, pages := "", 0
	for {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		res := m.rpc("tools/list", params, false).result()
		if res == nil {
			m.a.t.Fatal("tools/list: no result")
		}
		pages++
		for _, t := range res["tools"].([]any) {
			names = append(names, t.(map[string]any)["name"].(string))
		}
		cursor, _ = res["nextCursor"].(string)
		if cursor == "" {
			return names, pages
		}
	}
}

func (m *mcpClient) call(name string, args map[string]any) rpcAnswer {
	m.a.t.Helper()
	return m.rpc("tools/call", map[string]any{"name": name, "arguments": args}, false)
}

func TestMCPServerTools(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, nil)
	m := newMCPClient(a)
	m.initialize()
	names, pages := m.toolNames()
	if strings.Join(names, ",") != "search_products,product_image,order_status,count_slowly" && len(names) != 4 {
		t.Errorf("tools = %v", names)
	}
	if pages < 2 {
		t.Errorf("tools/list came in %d page, want it paginated (MCPPageSize zero: 2)", pages)
	}
	res := m.call("search_products", map[string]any{"query": "jacket", "filters": map[string]any{"sizes": []string{"M"}}}).result()
	products, _ := res["structuredContent"].(map[string]any)["products"].([]any)
	if len(products) != 2 || res["isError"] == true {
		t.Errorf("search_products: %v", res)
	}
	res = m.call("search_products", map[string]any{"query": "umbrella"}).result()
	if res["isError"] != true {
		t.Errorf("a search without results is not an isError result: %v", res)
	}
	res = m.call("product_image", map[string]any{"sku": "rain-hat-os"}).result()
	content, _ := res["content"].([]any)
	if len(content) != 3 || content[1].(map[string]any)["type"] != "image" || content[2].(map[string]any)["type"] != "resource" {
		t.Errorf("product_image: %v", res)
	}
	ans := m.rpc("tools/call", map[string]any{"name": "count_slowly", "arguments": map[string]any{"steps": 3},
		"_meta": map[string]any{"progressToken": "p1"}}, false)
	progress := 0
	for _, msg := range ans.msgs {
		if msg["method"] == "notifications/progress" {
			progress++
		}
	}
	if progress != 3 || ans.result() == nil {
		t.Errorf("count_slowly: %d progress notifications, want 3; %v", progress, ans.msgs)
	}
	wantNoViolation(t, s, rt)
}

func TestMCPServerScopes(t *testing.T) {
	s, rt, a, c := newSignInCompany(t, nil)
	m := newMCPClient(a)
	m.initialize()
	// Poppy 0.1 §6: the MCP server enforces the token's scopes.
	r := m.call("order_status", nil)
	if wa := r.header.Get("WWW-Authenticate"); r.status != 401 || !strings.HasPrefix(wa, `Bearer error="sign_in_required"`) {
		t.Errorf("signed out: %d %q", r.status, wa)
	}
	sid, _, at := signedInDana(a, c, "poppy:write")
	bearer := func(scope string) string {
		f := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {at}, "session_id": {sid}, "resource": {testMCPURL}}
		if scope != "" {
			f.Set("scope", scope)
		}
		r := a.postToken(a.clientForm(testClientID, f), "")
		if r.status != 200 || r.str("token_type") != "Bearer" {
			t.Fatalf("signed-in Bearer token: %d %v", r.status, r.body)
		}
		return r.str("access_token")
	}
	m.token = bearer("")
	r = m.call("order_status", nil)
	if wa := r.header.Get("WWW-Authenticate"); r.status != 403 || !strings.Contains(wa, `error="insufficient_scope"`) || !strings.Contains(wa, `scope="poppy:read"`) {
		t.Errorf("without poppy:read: %d %q", r.status, wa)
	}
	sid, _, at = signedInDana(a, c, "poppy:read")
	m.token = bearer("")
	res := m.call("order_status", map[string]any{"order_id": "ord_1043"}).result()
	orders, _ := res["structuredContent"].(map[string]any)["orders"].([]any)
	if len(orders) != 1 || orders[0].(map[string]any)["status"] != poppytest.OrderShipped {
		t.Errorf("order_status: %v", res)
	}
	wantNoViolation(t, s, rt)
}

// TestMCPServerRefusesOtherTokens: the MCP server takes only Bearer tokens
// issued for its url (Poppy 0.1 §4.3, §6).
func TestMCPServerRefusesOtherTokens(t *testing.T) {
	const otherURL = "https://mcp.example.com/other"
	addOther := func(doc map[string]any) {
		doc["apis"] = append(doc["apis"].([]any), map[string]any{"type": "mcp", "url": otherURL, "description": "Other"})
	}
	for _, tc := range []struct {
		name      string
		token     func(a *rawAgent) (scheme, token string)
		violation string
	}{
		{"no token", func(a *rawAgent) (string, string) { return "", "" }, ""},
		{"token for another MCP server", func(a *rawAgent) (string, string) {
			return "Bearer", a.bearerToken(a.startSession().str("session_id"), otherURL)
		}, "issued for resource"},
		{"DPoP Session Token as Bearer", func(a *rawAgent) (string, string) {
			return "Bearer", a.startSession().str("access_token")
		}, "DPoP-bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a, _ := newTestCompany(t, &poppytest.Options{PoppyJSON: addOther})
			s.Handle("mcp.example.com", "/other", s.MCPHandler(otherURL))
			scheme, tok := tc.token(a)
			m := &mcpClient{a: a, url: testMCPURL}
			r := m.rpc("initialize", map[string]any{}, false)
			if scheme != "" {
				req, _ := http.NewRequest(http.MethodPost, testMCPURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
				req.Header.Set("Authorization", scheme+" "+tok)
				req.Header.Set("Content-Type", "application/json")
				resp := a.do(req)
				r = rpcAnswer{status: resp.status, header: resp.header}
			}
			wa := r.header.Get("WWW-Authenticate")
			if r.status != 401 || !strings.HasPrefix(wa, "Bearer ") ||
				!strings.Contains(wa, `resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`) {
				t.Errorf("answer %d %q, want 401 with a Bearer challenge", r.status, wa)
			}
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, "§4.3", tc.violation)
			}
		})
	}
}

func TestMCPServerKnobs(t *testing.T) {
	s, rt, a, _ := newTestCompany(t, &poppytest.Options{MCPPageSize: 10})
	m := newMCPClient(a)
	m.initialize()
	s.MCPAddTool("size_advice", "Suggests a size.")
	names, pages := m.toolNames()
	if len(names) != 5 || names[4] != "size_advice" && !strings.Contains(strings.Join(names, ","), "size_advice") || pages != 1 {
		t.Errorf("after MCPAddTool: %v in %d pages", names, pages)
	}
	if res := m.call("size_advice", map[string]any{"text": "M"}).result(); res == nil {
		t.Errorf("added tool not callable")
	}
	s.RestartMCP()
	if r := m.rpc("tools/list", nil, false); r.status != http.StatusNotFound {
		t.Errorf("old MCP session after RestartMCP: %d, want 404", r.status)
	}
	m.session = ""
	m.initialize()
	if names, _ := m.toolNames(); !strings.Contains(strings.Join(names, ","), "size_advice") {
		t.Errorf("MCPAddTool's tool lost in the restart: %v", names)
	}
	if !s.MCPRemoveTool("size_advice") || s.MCPRemoveTool("size_advice") {
		t.Errorf("MCPRemoveTool reports wrongly")
	}
	if names, _ := m.toolNames(); len(names) != 4 || s.MCPRestarts() != 1 {
		t.Errorf("after MCPRemoveTool: %v (restarts %d)", names, s.MCPRestarts())
	}
	wantNoViolation(t, s, rt)
}
