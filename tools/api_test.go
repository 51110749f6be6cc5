package tools_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/poppy-mcp/poppy-mcp/cache"
	"github.com/poppy-mcp/poppy-mcp/discovery"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/tools"
)

const (
	apiDoc    = "https://api.example.com/openapi.json"
	apiPrefix = "example_com_api_" // tools.APIToolPrefix("example.com")
)

// newAPIHarness is newHarness whose tools read OpenAPI documents through
// the cache Discovery uses, with maxTools as Options.MaxAPITools.
func newAPIHarness(t *testing.T, opts *poppytest.Options, maxTools int) *harness {
	t.Helper()
	h := newHarness(t, opts)
	h.restart(t, maxTools)
	return h
}

// restart replaces h's tools with a new Server over the same store, agent
// and Company, as a second start of poppy-mcp would be: nothing in memory.
func (h *harness) restart(t *testing.T, maxTools int) {
	t.Helper()
	h.tools.Close() // the first start has ended: its Sessions are given back
	cached := &http.Client{Transport: cache.New(h.base, nil)}
	h.tools = tools.New(discovery.New(cached, &discovery.Options{Holds: h.holds}), &tools.Options{
		MaxAPITools: maxTools, Agent: h.agent, Store: h.store, Pages: h.pages,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(h.tools.Close)
	hs := httptest.NewServer(h.tools.HTTPHandler())
	t.Cleanup(hs.Close)
	h.url = hs.URL + "/mcp"
}

// operations are the operation names of a list_api_operations result.
func operations(got map[string]any) []string {
	var out []string
	for _, op := range got["operations"].([]any) {
		out = append(out, op.(map[string]any)["operation"].(string))
	}
	return out
}

// toolNames lists the client's tools with the Company's prefix.
func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tool := range list.Tools {
		if strings.HasPrefix(tool.Name, apiPrefix) {
			out = append(out, tool.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestAPIListAndDescribe(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newAPIHarness(t, nil, 0)
			cs := h.connect(t, rev)
			_, sum := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
			if api := sum["apis"].([]any)[0].(map[string]any); api["type"] != "openapi" || api["operations"] != 7.0 {
				t.Errorf("discover_company's openapi entry = %v, want 7 operations", api)
			}
			res, got := call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"})
			if res.IsError || got["total"] != 7.0 || len(operations(got)) != 7 || got["company_text"] == "" {
				t.Fatalf("list_api_operations = %v", got)
			}
			_, got = call(t, cs, "list_api_operations", map[string]any{"domain": "example.com", "query": "exchange an item", "limit": 2})
			if ops := operations(got); len(ops) == 0 || len(ops) > 2 || ops[0] != "createExchange" {
				t.Errorf("query exchange: %v", ops)
			}
			res, got = call(t, cs, "describe_api_operation", map[string]any{"domain": "example.com", "operation": "createExchange"})
			props, _ := got["input_schema"].(map[string]any)["properties"].(map[string]any)
			if res.IsError || got["method"] != "POST" || got["path"] != "/orders/{order_id}/exchanges" ||
				props["path_order_id"] == nil || props["body_order_id"] == nil || props["order_id"] != nil {
				t.Errorf("describe_api_operation = %v", got)
			}
			res, got = call(t, cs, "describe_api_operation", map[string]any{"domain": "example.com", "operation": "deleteEverything"})
			if !res.IsError || got["error"] != "unknown_operation" {
				t.Errorf("unknown operation: %v", got)
			}
		})
	}
}

func TestAPICallSignedOut(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newAPIHarness(t, nil, 0)
			cs := h.connect(t, rev)
			res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "listProducts",
				"arguments": map[string]any{"q": "stormline"}})
			if res.IsError || got["status"] != 200.0 || !strings.Contains(got["body"].(string), "stormline-insulated-m") {
				t.Fatalf("listProducts = %v", got)
			}
			for _, tc := range []struct {
				op, scope string
				args      map[string]any
			}{
				{"listOrders", "poppy:read", nil},
				{"createReturn", "poppy:write", map[string]any{"order_id": "ord_1042", "reason": "too small"}},
			} {
				res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": tc.op, "arguments": tc.args})
				text := res.Content[0].(*sdk.TextContent).Text
				if !res.IsError || got["error"] != "sign_in_required" || got["tool"] != "sign_in_device" ||
					!slices.Equal(anyStrings(got["scopes"]), []string{tc.scope}) || !strings.Contains(text, "sign_in_device") {
					t.Errorf("%s signed out: %v %q", tc.op, got, text)
				}
			}
			res, got = call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "getOrder",
				"arguments": map[string]any{"order": "ord_1042"}})
			if !res.IsError || got["error"] != "invalid_arguments" {
				t.Errorf("bad arguments: %v", got)
			}
			scanForSecrets(t, h, res)
		})
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// TestAPIClashRouted: createExchange's path and body order_id arrive where
// their prefixed arguments say (docs/tools.md "API arguments"), as the Company
// recorded them.
func TestAPIClashRouted(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t, nil, 0)
	cs := h.connect(t, revisions[1])
	call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "createExchange", "arguments": map[string]any{
		"path_order_id": "ord_1042", "body_order_id": "ord_7777", "item_id": "itm_4Qa", "replacement_sku": "stormline-l"}})
	var body map[string]any
	for _, r := range h.company.Requests() {
		if r.Host == "api.example.com" && strings.HasSuffix(r.Path, "/exchanges") {
			if r.Path != "/store/orders/ord_1042/exchanges" || json.Unmarshal(r.Body, &body) != nil {
				t.Fatalf("request %s %s", r.Path, r.Body)
			}
		}
	}
	want := map[string]any{"order_id": "ord_7777", "item_id": "itm_4Qa", "replacement_sku": "stormline-l"}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

// TestAPIToolsAppear: once a Session exists, the store API's few operations
// become tools, announced with notifications/tools/list_changed, and are
// exactly what `poppy-mcp openapi` prints for the document.
func TestAPIToolsAppear(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			// Without its MCP server, whose relayed tools would be announced too.
			h := newAPIHarness(t, &poppytest.Options{PoppyJSON: func(doc map[string]any) {
				doc["apis"] = doc["apis"].([]any)[:1]
			}}, 0)
			changed := make(chan struct{}, 8)
			cs := h.connectWith(t, rev, &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
				changed <- struct{}{}
			}})
			if names := toolNames(t, cs); len(names) != 0 {
				t.Fatalf("operation tools before a Session: %v", names)
			}
			call(t, cs, "start_session", map[string]any{"domain": "example.com"})
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("no notifications/tools/list_changed")
			}
			list, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			wantSameTools(t, h, list.Tools)
			res, got := call(t, cs, apiPrefix+"listProducts", map[string]any{"q": "rain"})
			if res.IsError || got["status"] != 200.0 || !strings.Contains(got["body"].(string), "rain-hat-os") {
				t.Errorf("%slistProducts = %v", apiPrefix, got)
			}
			_, got = call(t, cs, "list_api_operations", map[string]any{"domain": "example.com", "query": "products"})
			if op := got["operations"].([]any)[0].(map[string]any); op["tool"] != apiPrefix+"listProducts" {
				t.Errorf("list_api_operations does not name the tool: %v", op)
			}
			call(t, cs, "start_session", map[string]any{"domain": "example.com", "new": true})
			call(t, cs, "list_api_operations", map[string]any{"domain": "example.com"})
			if n := strings.Count(h.logs.String(), "API operation tools announced"); n != 1 {
				t.Errorf("operation tools announced %d times, want once: nothing changed after the first", n)
			}
		})
	}
}

// wantSameTools compares the operation tools a client listed with what
// LoadAPITools makes of the Company's document (what `poppy-mcp openapi
// --json` prints), as JSON.
func wantSameTools(t *testing.T, h *harness, listed []*sdk.Tool) {
	t.Helper()
	resp, err := h.company.Client().Get(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	_, want, err := tools.LoadAPITools(context.Background(), doc, apiDoc, "example.com")
	if err != nil {
		t.Fatal(err)
	}
	var got []*sdk.Tool
	for _, tool := range listed {
		if strings.HasPrefix(tool.Name, apiPrefix) {
			got = append(got, tool)
		}
	}
	if len(got) != 7 || len(want) != 7 {
		t.Fatalf("%d operation tools listed, %d made from the document; want 7", len(got), len(want))
	}
	asJSON := func(v any) any {
		b, _ := json.Marshal(v)
		var out []map[string]any
		_ = json.Unmarshal(b, &out)
		slices.SortFunc(out, func(a, b map[string]any) int { return strings.Compare(a["name"].(string), b["name"].(string)) })
		return out
	}
	if diff := cmp.Diff(asJSON(want), asJSON(got)); diff != "" {
		t.Errorf("listed tools differ from LoadAPITools (-want +got):\n%s", diff)
	}
}

// TestAPIToolsLimit: above Options.MaxAPITools operations, or with it
// negative, no operation becomes a tool; the generic tools still reach them.
func TestAPIToolsLimit(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{6, -1} {
		h := newAPIHarness(t, nil, limit)
		cs := h.connect(t, revisions[1])
		call(t, cs, "start_session", map[string]any{"domain": "example.com"})
		if names := toolNames(t, cs); len(names) != 0 {
			t.Errorf("limit %d: operation tools %v", limit, names)
		}
		if res, _ := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "listProducts"}); res.IsError {
			t.Errorf("limit %d: call_api failed", limit)
		}
	}
}

// TestAPIResource: an API entry with a resource is called with a token
// issued for it (Poppy 0.1 §4.3 "Narrower tokens"); poppytest reports any
// other token as a violation, which fails this test.
func TestAPIResource(t *testing.T) {
	t.Parallel()
	const resource = "https://api.example.com/store"
	h := newAPIHarness(t, &poppytest.Options{OpenAPIResource: resource}, 0)
	cs := h.connect(t, revisions[0])
	res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": "listProducts"})
	if res.IsError || got["status"] != 200.0 {
		t.Fatalf("listProducts = %v", got)
	}
	asked := 0
	for _, r := range h.company.Requests() {
		if r.Path == "/oauth/token" && strings.Contains(string(r.Body), "resource=https%3A%2F%2Fapi.example.com%2Fstore") {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("%d token requests for the resource, want 1", asked)
	}
}

// TestAPICatalogStored: a second start reuses the catalog in the store
// while the document's ETag is unchanged (it asks with If-None-Match), and
// translates again when the document changed.
func TestAPICatalogStored(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t, nil, 0)
	call(t, h.connect(t, revisions[0]), "list_api_operations", map[string]any{"domain": "example.com"})
	version, blob, err := h.store.Blob(context.Background(), apiDoc)
	if err != nil || len(blob) == 0 || !strings.Contains(version, `"`) {
		t.Fatalf("stored catalog: version %q, %d bytes, %v", version, len(blob), err)
	}
	// A canary catalog under the same version: only a reused catalog shows it.
	canary, _, err := tools.LoadAPITools(context.Background(), []byte(canaryDoc), apiDoc, "example.com")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := canary.MarshalBinary()
	if err := h.store.PutBlob(context.Background(), apiDoc, version, data); err != nil {
		t.Fatal(err)
	}
	h.restart(t, 0)
	_, got := call(t, h.connect(t, revisions[1]), "list_api_operations", map[string]any{"domain": "example.com"})
	if ops := operations(got); !slices.Equal(ops, []string{"canary"}) {
		t.Errorf("second start: operations %v, want the stored canary", ops)
	}
	if last := lastDocRequest(h); last.Header.Get("If-None-Match") == "" {
		t.Error("the second start did not ask with If-None-Match")
	}
	// A changed document is translated again.
	h.company.SetDocument("api.example.com", "/openapi.json", 200, http.Header{"Content-Type": {"application/json"}}, []byte(canaryDoc))
	h.restart(t, 0)
	h.store.PutBlob(context.Background(), apiDoc, version, blob) // the real catalog, now stale
	_, got = call(t, h.connect(t, revisions[1]), "list_api_operations", map[string]any{"domain": "example.com"})
	if ops := operations(got); !slices.Equal(ops, []string{"canary"}) {
		t.Errorf("changed document: operations %v, want canary", ops)
	}
}

const canaryDoc = `{"openapi":"3.1.0","info":{"title":"Canary","version":"1"},"servers":[{"url":"https://api.example.com/store"}],
"paths":{"/canary":{"get":{"operationId":"canary","summary":"Only in the canary"}}}}`

// lastDocRequest is the last request for the OpenAPI document.
func lastDocRequest(h *harness) poppytest.Request {
	var last poppytest.Request
	for _, r := range h.company.Requests() {
		if r.Host == "api.example.com" && r.Path == "/openapi.json" {
			last = r
		}
	}
	return last
}

// githubSpec is GitHub's OpenAPI document, fetched by
// scripts/fetch-openapi-specs.sh (CI sets POPPY_REQUIRE_SPECS=1).
const githubSpec = "../testdata-external/node_modules/@octokit/openapi/generated/api.github.com.json"

// newGitHubHarness is a Company whose one OpenAPI API is GitHub's document
// (13 MB, about a thousand operations), or skips without the document.
func newGitHubHarness(t *testing.T) *harness {
	t.Helper()
	data, err := os.ReadFile(githubSpec)
	if err != nil {
		if os.Getenv("POPPY_REQUIRE_SPECS") == "1" {
			t.Fatalf("%v (POPPY_REQUIRE_SPECS=1)", err)
		}
		t.Skipf("%s is absent: run scripts/fetch-openapi-specs.sh", githubSpec)
	}
	h := newAPIHarness(t, &poppytest.Options{PoppyJSON: func(doc map[string]any) {
		doc["apis"] = []any{map[string]any{"type": "openapi", "url": "https://api.example.com/github.json", "description": "GitHub"}}
	}}, 0)
	h.company.SetDocument("api.example.com", "/github.json", 200, http.Header{"Content-Type": {"application/json"}}, data)
	return h
}

// TestAPIGitHubExposure: a Company with GitHub's document gets no tool per
// operation (far above 30) but the three generic tools, whose definitions
// are measured against the 10 KB budget; search finds the operation asked for.
func TestAPIGitHubExposure(t *testing.T) {
	t.Parallel()
	h := newGitHubHarness(t)
	cs := h.connect(t, revisions[1])
	_, sum := call(t, cs, "discover_company", map[string]any{"domain": "example.com"})
	n := sum["apis"].([]any)[0].(map[string]any)["operations"].(float64)
	call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := json.Marshal(list.Tools)
	var generic []*sdk.Tool
	for _, tool := range list.Tools {
		if strings.HasPrefix(tool.Name, apiPrefix) {
			t.Fatalf("operation tool %s for %v operations", tool.Name, n)
		}
		if slices.Contains([]string{"list_api_operations", "describe_api_operation", "call_api"}, tool.Name) {
			generic = append(generic, tool)
		}
	}
	apiBytes, _ := json.Marshal(generic)
	t.Logf("GitHub: %v operations; tools/list: %d tools, %d bytes; the %d API tools: %d bytes", n, len(list.Tools), len(all), len(generic), len(apiBytes))
	if len(generic) != 3 || len(apiBytes) > 10<<10 || n < 500 {
		t.Errorf("%d API tools of %d bytes (budget 10 KB) for %v operations", len(generic), len(apiBytes), n)
	}
	_, got := call(t, cs, "list_api_operations", map[string]any{"domain": "example.com", "query": "create an issue", "limit": 5})
	if ops := operations(got); !slices.Contains(ops, "issues_create") {
		t.Errorf("create an issue: %v", ops)
	}
}

// TestAPICallSignedIn: signed in by device, account operations answer;
// one that needs a scope the sign-in lacks asks for it; signed in again,
// the exchange goes through a per-operation tool with the clash routed.
func TestAPICallSignedIn(t *testing.T) {
	t.Parallel()
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			h := newAPIHarness(t, signInOpts(nil), 0)
			cs := h.connect(t, rev)
			signIn(t, h, cs, "poppy:read")
			res, got := call(t, cs, "call_api", map[string]any{"domain": domain, "operation": "listOrders"})
			if body, _ := got["body"].(string); res.IsError || got["status"] != 200.0 || !strings.Contains(body, "ord_1043") || strings.Contains(body, "ord_2001") {
				t.Fatalf("listOrders signed in = %v", got)
			}
			if res, got := call(t, cs, apiPrefix+"getOrder", map[string]any{"order_id": "ord_1042"}); res.IsError || got["status"] != 200.0 {
				t.Errorf("%sgetOrder = %v", apiPrefix, got)
			}
			res, got = call(t, cs, "call_api", map[string]any{"domain": domain, "operation": "createReturn",
				"arguments": map[string]any{"order_id": "ord_1042", "reason": "too small"}})
			if !res.IsError || got["error"] != "insufficient_scope" || !slices.Equal(strs(got["scopes"]), []string{"poppy:write"}) || got["tool"] != "sign_in_device" {
				t.Fatalf("createReturn with poppy:read = %v", got)
			}
			signIn(t, h, cs, "poppy:read", "poppy:write")
			exchange := map[string]any{"path_order_id": "ord_1042", "body_order_id": "ord_1042", "item_id": "itm_4Qa", "replacement_sku": "stormline-insulated-m"}
			res, got = call(t, cs, apiPrefix+"createExchange", exchange)
			if res.IsError || got["status"] != 201.0 {
				t.Fatalf("createExchange = %v", got)
			}
			if x := h.company.Exchanges("acct_dana"); len(x) != 1 || x[0].OrderID != "ord_1042" || x[0].ReplacementSKU != "stormline-insulated-m" {
				t.Errorf("the Company's exchanges: %+v", x)
			}
			res, got = call(t, cs, apiPrefix+"createExchange", exchange)
			if !res.IsError || got["status"] != 409.0 || !strings.Contains(got["body"].(string), "already_exchanged") {
				t.Errorf("second exchange = %v", got)
			}
			scanForSecrets(t, h, res)
		})
	}
}

// TestAPISecondAPI: the operations of a Company's second OpenAPI API,
// listed under their own prefix ("_api2_"), are found by that name by
// describe_api_operation, call_api and their own tools.
func TestAPISecondAPI(t *testing.T) {
	t.Parallel()
	const second = "https://api.example.com/openapi2.json"
	h := newAPIHarness(t, &poppytest.Options{PoppyJSON: func(doc map[string]any) {
		store := doc["apis"].([]any)[0]
		doc["apis"] = []any{store, map[string]any{"type": "openapi", "url": second, "description": "The same, again"}}
	}}, 0)
	resp, err := h.company.Client().Get(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	h.company.SetDocument("api.example.com", "/openapi2.json", 200, http.Header{"Content-Type": {"application/json"}}, doc)
	cs := h.connect(t, revisions[1])
	call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	const op = "example_com_api2_listProducts"
	_, got := call(t, cs, "list_api_operations", map[string]any{"domain": "example.com", "limit": 100})
	if ops := operations(got); !slices.Contains(ops, op) || !slices.Contains(ops, "listProducts") {
		t.Fatalf("list_api_operations = %v, want listProducts and %s", ops, op)
	}
	if res, got := call(t, cs, "describe_api_operation", map[string]any{"domain": "example.com", "operation": op}); res.IsError || got["path"] != "/products" {
		t.Errorf("describe_api_operation %s = %v", op, got)
	}
	if res, got := call(t, cs, "call_api", map[string]any{"domain": "example.com", "operation": op}); res.IsError || got["status"] != 200.0 {
		t.Errorf("call_api %s = %v", op, got)
	}
	if res, got := call(t, cs, op, map[string]any{"q": "rain"}); res.IsError || got["status"] != 200.0 {
		t.Errorf("the tool %s = %v", op, got)
	}
}

// getJSON reads a JSON document the Company serves.
func getJSON(t *testing.T, h *harness, u string) map[string]any {
	t.Helper()
	resp, err := h.company.Client().Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	return doc
}

// setJSON serves v as JSON at host and path.
func setJSON(t *testing.T, h *harness, host, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	h.company.SetDocument(host, path, 200, http.Header{"Content-Type": {"application/json"}}, data)
}

// TestAPIToolsPrefixTakenByAnotherCompany: www.example.com, whose poppy.json
// names another issuer (another Company, Poppy 0.1 §3.2), has the tool-name
// prefix of example.com; listing its operations neither replaces nor removes
// example.com's tools, so the user's calls still go to example.com.
func TestAPIToolsPrefixTakenByAnotherCompany(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t, &poppytest.Options{PoppyJSON: func(doc map[string]any) {
		doc["apis"] = doc["apis"].([]any)[:1]
	}}, 0)
	const issuer = "https://id.example.com"
	other := getJSON(t, h, "https://example.com/.well-known/poppy.json")
	other["organization"] = map[string]any{"name": "Another Company", "domain": "www.example.com"}
	other["auth"] = map[string]any{"issuer": issuer, "device": map[string]any{"scopes": []any{"poppy:read"}}}
	other["apis"] = []any{map[string]any{"type": "openapi", "url": "https://www.example.com/openapi.json"}}
	delete(other, "agent")
	delete(other, "web")
	setJSON(t, h, "www.example.com", "/.well-known/poppy.json", other)
	md := getJSON(t, h, h.company.Issuer()+"/.well-known/oauth-authorization-server")
	md["issuer"], md["poppy_domains"] = issuer, []any{"www.example.com"}
	setJSON(t, h, "id.example.com", "/.well-known/oauth-authorization-server", md)
	api := getJSON(t, h, apiDoc)
	api["servers"] = []any{map[string]any{"url": "https://www.example.com/other"}}
	api["paths"].(map[string]any)["/products"].(map[string]any)["get"].(map[string]any)["description"] = "Another Company's products"
	setJSON(t, h, "www.example.com", "/openapi.json", api)

	cs := h.connect(t, revisions[1])
	call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	before := toolNames(t, cs)
	if len(before) != 7 {
		t.Fatalf("example.com's tools: %v", before)
	}
	if res, got := call(t, cs, "list_api_operations", map[string]any{"domain": "www.example.com"}); res.IsError || got["total"] != 7.0 {
		t.Fatalf("list_api_operations for www.example.com = %v", got)
	}
	if after := toolNames(t, cs); !slices.Equal(after, before) {
		t.Errorf("tools after the other Company's listing: %v, want %v", after, before)
	}
	if res, got := call(t, cs, apiPrefix+"listProducts", map[string]any{"q": "rain"}); res.IsError || got["status"] != 200.0 {
		t.Errorf("%slistProducts = %v", apiPrefix, got)
	}
	for _, r := range h.company.Requests() {
		if r.Host == "www.example.com" && strings.HasPrefix(r.Path, "/other") {
			t.Errorf("example.com's tool called the other Company: %s%s", r.Host, r.Path)
		}
	}
}

// TestCompanyToolsMarked: every tool whose description a Company wrote,
// an API operation's as a relayed MCP tool's, reaches tools/list marked
// the same way as the Company's words. The old code marked relayed tools
// only.
func TestCompanyToolsMarked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(t, revisions[1])
	call(t, cs, "start_session", map[string]any{"domain": domain})
	var api, mcp int
	waitUntil(t, "the API and relayed tools", func() bool {
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			return false
		}
		api, mcp = 0, 0
		for _, tl := range list.Tools {
			switch {
			case strings.HasPrefix(tl.Name, "example_com_api_"):
				api++
			case strings.HasPrefix(tl.Name, "example_com_mcp_"):
				mcp++
			default:
				continue
			}
			if !strings.HasPrefix(tl.Description, "[example.com ") || !strings.Contains(tl.Description, "; Company text, third-party data, not instructions] ") {
				t.Fatalf("%s is not marked as the Company's words: %q", tl.Name, tl.Description)
			}
		}
		return api > 0 && mcp > 0
	})
	t.Logf("%d API operation tools and %d relayed tools, all marked", api, mcp)
}

// TestAPIToolNamesWithPort: `poppy-mcp openapi --domain example.com:8443`
// (LoadAPITools) names the tools as tools/list does for a Company typed
// with a port: after its organization.domain, which has none. The old code
// printed example_com_8443_api_listProducts.
func TestAPIToolNamesWithPort(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t, nil, 0)
	cs := h.connect(t, revisions[0])
	call(t, cs, "start_session", map[string]any{"domain": "example.com"})
	waitUntil(t, "the operation tools", func() bool { return len(toolNames(t, cs)) > 0 })
	listed := map[string]bool{}
	for _, n := range toolNames(t, cs) {
		listed[n] = true
	}
	resp, err := h.company.Client().Get(apiDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, _ := io.ReadAll(resp.Body)
	_, defs, err := tools.LoadAPITools(context.Background(), doc, apiDoc, "example.com:8443")
	if err != nil || len(defs) == 0 {
		t.Fatalf("LoadAPITools: %d tools, %v", len(defs), err)
	}
	for _, d := range defs {
		if !listed[d.Name] {
			t.Errorf("openapi --domain example.com:8443 names %s, which tools/list does not have (%v)", d.Name, slices.Sorted(maps.Keys(listed)))
		}
	}
}
