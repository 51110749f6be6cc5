package poppytest_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

const (
	testAPI        = "https://api.example.com/store"
	testOpenAPIURL = "https://api.example.com/openapi.json"
	testResource   = "https://api.example.com/store"
)

// storeGet GETs the store API's path with query and a DPoP Session Token;
// the proof's htu has no query (RFC 9449 §4.2).
func (a *rawAgent) storeGet(path, query, token string) response {
	a.t.Helper()
	u := testAPI + path
	req, _ := http.NewRequest(http.MethodGet, u+"?"+query, nil)
	req.Header.Set("Authorization", "DPoP "+token)
	req.Header.Set("DPoP", a.proof("GET", u, token, "", nil))
	return a.do(req)
}

// storePost posts body as JSON to the store API's path.
func (a *rawAgent) storePost(path, token string, body any) response {
	a.t.Helper()
	return a.postJSON(testAPI+path, token, "application/json", body)
}

// list returns the array member name of a list answer.
func list(t *testing.T, r response, name string) []any {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("list %s: %d %v", name, r.status, r.body)
	}
	items, ok := r.body[name].([]any)
	if !ok {
		t.Fatalf("list %s: %v", name, r.body)
	}
	return items
}

// wantChallenge wants status and a DPoP challenge with error code (and
// scope, when given) in WWW-Authenticate (Poppy 0.1 §6).
func wantChallenge(t *testing.T, r response, status int, code, scope string) {
	t.Helper()
	h := r.header.Get("WWW-Authenticate")
	if r.status != status || !strings.HasPrefix(h, "DPoP ") || !strings.Contains(h, `error="`+code+`"`) ||
		scope != "" && !strings.Contains(h, `scope="`+scope+`"`) {
		t.Fatalf("answer %d %q, want %d with %s %s", r.status, h, status, code, scope)
	}
}

func TestStoreAPIDocument(t *testing.T) {
	s, rt, _, _ := newTestCompany(t, nil)
	status, h, body := get(t, s, testOpenAPIURL, nil)
	if status != 200 || h.Get("Content-Type") != "application/json" || h.Get("ETag") == "" {
		t.Fatalf("GET %s: %d %v", testOpenAPIURL, status, h)
	}
	// A third party's reading of the document, not ours.
	doc, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Errorf("the document is not valid OpenAPI: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Servers[0].URL != testAPI || doc.Paths.Len() != 7 {
		t.Errorf("openapi %s, server %s, %d paths", doc.OpenAPI, doc.Servers[0].URL, doc.Paths.Len())
	}
	ex := doc.Paths.Find("/orders/{order_id}/exchanges").Post
	props := ex.RequestBody.Value.Content.Get("application/json").Schema.Value.Properties
	if ex.Parameters[0].Value.Name != "order_id" || props["order_id"] == nil {
		t.Error("createExchange lacks the order_id clash of path and body")
	}
	apis := getJSON(t, s, "https://example.com/.well-known/poppy.json")["apis"].([]any)
	if e := apis[0].(map[string]any); e["url"] != testOpenAPIURL || e["resource"] != nil {
		t.Errorf("poppy.json openapi entry = %v", e)
	}
	wantNoViolation(t, s, rt)
}

func TestStoreAPISignedOut(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	if n := len(list(t, a.storeGet("/products", "", a.token), "products")); n != 8 {
		t.Errorf("%d products, want 8", n)
	}
	if n := len(list(t, a.storeGet("/products", url.Values{"q": {"Stormline M"}}.Encode(), a.token), "products")); n != 2 {
		t.Errorf("%d products for %q, want 2", n, "Stormline M")
	}
	for _, path := range []string{"/orders", "/orders/ord_1042", "/returns", "/exchanges"} {
		wantChallenge(t, a.storeGet(path, "", a.token), 401, "sign_in_required", "")
	}
	wantChallenge(t, a.storePost("/orders/ord_1042/returns", a.token, map[string]any{"reason": "too big"}), 401, "sign_in_required", "")
	wantNoViolation(t, s, rt)
	if s.Served("sign_in_required") != 5 {
		t.Errorf("sign_in_required served %d times", s.Served("sign_in_required"))
	}
	// Poppy 0.1 §4.3: a Session Token on every API request.
	a.call("GET", testAPI+"/products", "", "", "")
	wantViolation(t, s, rt, "§4.3", "without a Session Token")
}

func TestStoreAPISignedIn(t *testing.T) {
	s, rt, a := newConvCompany(t, nil)
	a.signIn("acct_dana", "poppy:read")
	orders := list(t, a.storeGet("/orders", "", a.token), "orders")
	if len(orders) != 2 || orders[0].(map[string]any)["id"] != "ord_1042" {
		t.Fatalf("orders = %v", orders)
	}
	if n := len(list(t, a.storeGet("/orders", "status=shipped", a.token), "orders")); n != 1 {
		t.Errorf("%d shipped orders, want 1", n)
	}
	if r := a.storeGet("/orders/ord_1042", "", a.token); r.status != 200 || len(r.body["items"].([]any)) != 1 {
		t.Errorf("getOrder = %d %v", r.status, r.body)
	}
	if r := a.storeGet("/orders/ord_2001", "", a.token); r.status != 404 || r.str("error") != "order_not_found" {
		t.Errorf("another account's order: %d %v", r.status, r.body)
	}
	wantChallenge(t, a.storePost("/orders/ord_1042/returns", a.token, map[string]any{"reason": "too big"}), 403, "insufficient_scope", "poppy:write")

	a.signIn("acct_dana", "poppy:read", "poppy:write")
	r := a.storePost("/orders/ord_1042/returns", a.token, map[string]any{"reason": "too big"})
	if r.status != 201 || !strings.HasPrefix(r.str("id"), "ret_") || r.str("order_id") != "ord_1042" {
		t.Fatalf("createReturn = %d %v", r.status, r.body)
	}
	if r := a.storePost("/orders/ord_1042/returns", a.token, map[string]any{"reason": "again"}); r.status != 409 {
		t.Errorf("second return: %d %v", r.status, r.body)
	}
	if r := a.storePost("/orders/ord_1043/returns", a.token, map[string]any{"reason": "late"}); r.status != 422 || r.str("error") != "not_delivered" {
		t.Errorf("return of a shipped order: %d %v", r.status, r.body)
	}
	ex := map[string]any{"order_id": "ord_1043", "item_id": "itm_4Qa", "replacement_sku": "stormline-insulated-m"}
	if r := a.storePost("/orders/ord_1042/exchanges", a.token, ex); r.status != 400 || r.str("error") != "order_mismatch" {
		t.Errorf("mismatched order_id: %d %v", r.status, r.body)
	}
	ex["order_id"] = "ord_1042"
	r = a.storePost("/orders/ord_1042/exchanges", a.token, ex)
	if r.status != 201 || r.body["price_difference_usd"] != 70.0 {
		t.Fatalf("createExchange = %d %v", r.status, r.body)
	}
	if len(s.Returns("acct_dana")) != 1 || len(s.Exchanges("acct_dana")) != 1 {
		t.Error("the shop does not hold the return and the exchange")
	}
	if len(list(t, a.storeGet("/returns", "", a.token), "returns")) != 1 || len(list(t, a.storeGet("/exchanges", "", a.token), "exchanges")) != 1 {
		t.Error("listReturns or listExchanges do not show them")
	}
	wantNoViolation(t, s, rt)
}

// TestStoreAPIBodies: a body that breaks the document is the agent's
// violation; a value of the wrong type is the model's, answered alone.
func TestStoreAPIBodies(t *testing.T) {
	for _, tc := range []struct {
		name, contentType string
		body              any
		violation         string
	}{
		{"wrong type", "application/json", map[string]any{"reason": 7}, ""},
		{"empty reason", "application/json", map[string]any{"reason": " "}, ""},
		{"form body", "application/x-www-form-urlencoded", map[string]any{"reason": "x"}, "Content-Type"},
		{"not an object", "application/json", []string{"x"}, "not a JSON object"},
		{"unknown member", "application/json", map[string]any{"reason": "x", "refund": true}, `"refund"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt, a := newConvCompany(t, nil)
			a.signIn("acct_dana", "poppy:write")
			r := a.postJSON(testAPI+"/orders/ord_1042/returns", a.token, tc.contentType, tc.body)
			if r.status != 400 || r.str("error") != "invalid_request" {
				t.Errorf("answer %d %v", r.status, r.body)
			}
			if tc.violation == "" {
				wantNoViolation(t, s, rt)
			} else {
				wantViolation(t, s, rt, "§6", tc.violation)
			}
			if len(s.Returns("acct_dana")) != 0 {
				t.Error("a refused request made a return")
			}
		})
	}
}

// TestStoreAPIResource: with a resource on its entry, the API takes only
// tokens issued for it (Poppy 0.1 §4.3 "Narrower tokens").
func TestStoreAPIResource(t *testing.T) {
	s, rt, a := newConvCompany(t, &poppytest.Options{OpenAPIResource: testResource})
	apis := getJSON(t, s, "https://www.example.com/.well-known/poppy.json")["apis"].([]any)
	if e := apis[0].(map[string]any); e["resource"] != testResource {
		t.Fatalf("poppy.json openapi entry = %v", e)
	}
	r := a.postToken(a.grantForm(url.Values{"session_id": {a.sessionID}, "resource": {testResource}}), a.proof("POST", testTokenURL, "", "", nil))
	if r.status != 200 || r.str("token_type") != "DPoP" {
		t.Fatalf("token for the resource: %d %v", r.status, r.body)
	}
	narrow := r.str("access_token")
	if n := len(list(t, a.storeGet("/products", "", narrow), "products")); n != 8 {
		t.Errorf("%d products", n)
	}
	wantNoViolation(t, s, rt)
	wantChallenge(t, a.storeGet("/products", "", a.token), 401, "invalid_token", "")
	wantViolation(t, s, rt, "§4.3", `issued for resource ""`)
}
