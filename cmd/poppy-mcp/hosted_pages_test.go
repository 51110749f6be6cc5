package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestHostedPagesThroughReplicas: a hosted deployment of two replicas on
// one PostgreSQL database, behind a load balancer without stickiness.
// Each page is opened through replica A (the person's MCP client is on A,
// where sign_in_status waits) and used on replica B:
//
//   - dana's mediated sign-in page opens on B in her browser (signed in with
//     the issuer), never in bob's; her credentials posted there sign her
//     in: sign_in_status on A reads it complete and A's Session calls the
//     API as her account; B did the sign-in (its log says so, A's does not);
//     a replay of the post on either replica answers 410;
//   - sam's Direct Sign-In link, started on A, binds his browser on B and
//     the Company's callback, taken on B, signs him in: A reads it
//     complete; the link opened again answers 410 on both replicas, and
//     the callback replayed is unknown on both;
//   - dana's join page, opened by open_website on A's loopback listener,
//     opens on B's loopback listener (the same path) with the join form,
//     and once only: 410 after that on A's.
//
// No replica logs a page's token or the Direct Sign-In's state.
//
// On main before this test every one of these pages answered 410 on B: it
// was held in A's memory.
func TestHostedPagesThroughReplicas(t *testing.T) {
	t.Parallel()
	dbURL := postgresURL(t)
	h := startHostedWith(t, &deploymentOptions{Replicas: 2, Store: dbURL, Direct: true, PagesAddrs: true})
	dana := h.connectPerson(t, 0, "dana", "acct_dana", "2026-07-28")
	secrets := []string{mediatedOnB(t, h, dana), joinOnB(t, h, dana)}
	sam := h.connectPerson(t, 0, "sam", "acct_sam", "2025-11-25")
	secrets = append(secrets, directOnB(t, h, sam)...)
	logged := h.logged()
	for _, secret := range secrets {
		if secret == "" || strings.Contains(logged, secret) {
			t.Errorf("a page's token or a sign-in's state %.8q... is logged (or empty)", secret)
		}
	}
}

// token is the token of the page link u.
func token(u string) string {
	_, tok, _ := strings.Cut(u, "/p/")
	return tok
}

// mediatedOnB is TestHostedPagesThroughReplicas's mediated sign-in; it
// returns the page's token.
func mediatedOnB(t *testing.T, h *hostedDeployment, dana *hostedPerson) string {
	t.Helper()
	got, _ := dana.call(t, "sign_in_mediated", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
	link, _ := got["sign_in_url"].(string)
	if !strings.HasPrefix(link, h.public+"/pages/p/") {
		t.Fatalf("sign_in_mediated through A = %v\n%s", got, h.logged())
	}
	h.pin(1)
	if code, body := openPage(t, h.browser("bob"), link); code != http.StatusForbidden || strings.Contains(body, "password") {
		t.Fatalf("bob opening dana's page on B: %d\n%s", code, body)
	}
	browser := h.browser("dana")
	if code, body := openPage(t, browser, link); code != 200 || !strings.Contains(body, `name="email"`) {
		t.Fatalf("dana opening her page on B: %d\n%s\n%s", code, body, h.logged())
	}
	creds := url.Values{"email": {"dana@example.com"}, "password": {"correct-horse-battery"}}
	if code, body := postPage(t, h, browser, link, creds); code != 200 || !strings.Contains(body, "You are signed in") {
		t.Fatalf("dana's credentials posted on B: %d\n%s\n%s", code, body, h.logged())
	}
	for i := range h.replicas {
		h.pin(i)
		if code, _ := postPage(t, h, browser, link, creds); code != http.StatusGone {
			t.Errorf("the post replayed on replica %c: %d, want 410", 'A'+i, code)
		}
	}
	h.pin(-1)
	st, _ := dana.call(t, "sign_in_status", map[string]any{"domain": "example.com", "wait_seconds": 20})
	if st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sign_in_status through A = %v\n%s", st, h.logged())
	}
	if orders, isErr := dana.call(t, "call_api", map[string]any{"domain": "example.com", "operation": "listOrders"}); isErr ||
		!strings.Contains(fmt.Sprint(orders), "Stormline jacket, size M") {
		t.Errorf("dana's call_api through A: %v (error %v), want her orders", orders, isErr)
	}
	const did = `msg="signed in" type=mediated`
	if !strings.Contains(h.replicas[1].logged.String(), did) || strings.Contains(h.replicas[0].logged.String(), did) {
		t.Errorf("the sign-in was not done by B alone:\n%s", h.logged())
	}
	return token(link)
}

// directOnB is TestHostedPagesThroughReplicas's Direct Sign-In; it returns
// the start page's token and the sign-in's state.
func directOnB(t *testing.T, h *hostedDeployment, sam *hostedPerson) []string {
	t.Helper()
	got, _ := sam.call(t, "sign_in_direct", map[string]any{"domain": "example.com", "scopes": []string{"poppy:read"}})
	link, _ := got["sign_in_url"].(string)
	if !strings.HasPrefix(link, h.public+"/pages/p/") {
		t.Fatalf("sign_in_direct through A = %v\n%s", got, h.logged())
	}
	h.pin(1)
	browser := h.browser("sam")
	at, body := follow(t, browser, link)
	if at.Query().Get("state") == "" || strings.HasPrefix(at.String(), h.public) {
		t.Fatalf("sam's start link on B led to %v:\n%s\n%s", at, body, h.logged())
	}
	to, err := h.srv.ApproveAuthorization(at.Query().Get("state"), "acct_sam")
	if err != nil {
		t.Fatal(err)
	}
	if _, page := follow(t, browser, to); !strings.Contains(page, "You are signed in") {
		t.Fatalf("the callback on B: %s\n%s", page, h.logged())
	}
	for i := range h.replicas {
		h.pin(i)
		if code, _ := openPage(t, browser, link); code != http.StatusGone {
			t.Errorf("the start link opened again on replica %c: %d, want 410", 'A'+i, code)
		}
		if _, page := follow(t, browser, to); !strings.Contains(page, "unknown or has finished") {
			t.Errorf("the callback replayed on replica %c: %s", 'A'+i, page)
		}
	}
	h.pin(-1)
	st, _ := sam.call(t, "sign_in_status", map[string]any{"domain": "example.com", "wait_seconds": 20})
	if st["status"] != "complete" || st["signed_in"] != true {
		t.Fatalf("sam's sign_in_status through A = %v\n%s", st, h.logged())
	}
	return []string{token(link), at.Query().Get("state")}
}

// joinOnB is TestHostedPagesThroughReplicas's join page; it returns the
// page's token.
func joinOnB(t *testing.T, h *hostedDeployment, dana *hostedPerson) string {
	t.Helper()
	got, _ := dana.call(t, "open_website", map[string]any{"domain": "example.com", "url": "/orders"})
	join, _ := got["join_url"].(string)
	a, b := "http://"+h.replicas[0].pages, "http://"+h.replicas[1].pages
	if !strings.HasPrefix(join, a+"/p/") || got["loopback_only"] != true {
		t.Fatalf("open_website through A = %v", got)
	}
	onB := b + strings.TrimPrefix(join, a)
	if code, body := getLoopback(t, onB); code != 200 || !strings.Contains(body, "/poppy/browser-session") {
		t.Fatalf("the join page on B's loopback: %d\n%s\n%s", code, body, h.logged())
	}
	for _, u := range []string{join, onB} {
		if code, _ := getLoopback(t, u); code != http.StatusGone {
			t.Errorf("the join page again at %s: %d, want 410", u[:strings.Index(u, "/p/")], code)
		}
	}
	return token(join)
}

// postPage posts form to the page u in browser b, from the page's own
// origin, and returns the status and body.
func postPage(t *testing.T, h *hostedDeployment, b *http.Client, u string, form url.Values) (int, string) {
	t.Helper()
	got := visitPage(t, b, http.MethodPost, u, form, h.public)
	return got.code, got.body
}

// follow GETs u in browser b, following redirects, and returns where it
// ended and the body there.
func follow(t *testing.T, b *http.Client, u string) (*url.URL, string) {
	t.Helper()
	got := visitPage(t, b, http.MethodGet, u, nil, "")
	return got.at, got.body
}

// getLoopback GETs u, a loopback page, as the agent's own browser would.
func getLoopback(t *testing.T, u string) (int, string) {
	t.Helper()
	return openPage(t, http.DefaultClient, u)
}
