package metrics_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// TestNilRecorder: every method of a nil Recorder does nothing, and its
// Transport is the base transport itself.
func TestNilRecorder(t *testing.T) {
	var r *metrics.Recorder
	r.ToolCall("start_session", metrics.OutcomeOK, time.Second)
	r.Waiting()()
	r.SigningIn()()
	r.LeasesHeld(3)
	r.StoreError()
	base := http.DefaultTransport
	if got := r.Transport(base, metrics.EndpointKind); got != base {
		t.Errorf("a nil Recorder's Transport wraps the base: %T", got)
	}
}

// TestGauges: Waiting and SigningIn raise their gauge until done, once
// however often done is called.
func TestGauges(t *testing.T) {
	r := metrics.New()
	done := r.Waiting()
	doneToo := r.Waiting()
	done()
	done()
	if got := value(t, r, "poppy_mcp_waiting_calls", ""); got != 1 {
		t.Errorf("waiting calls: %v, want 1", got)
	}
	doneToo()
}

// TestTransport: a Company request is counted by its kind and its
// response's status class, a failed one as "error".
func TestTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	r := metrics.New()
	c := &http.Client{Transport: r.Transport(http.DefaultTransport, metrics.EndpointKind)}
	resp, err := c.Get(srv.URL + "/.well-known/poppy.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	failing := &http.Client{Transport: r.Transport(failTransport{}, metrics.Fixed(metrics.EndpointDocument))}
	if _, err := failing.Get(srv.URL); err == nil {
		t.Fatal("the failing transport did not fail")
	}
	if got := value(t, r, "poppy_mcp_company_requests_total", `endpoint="document",status="429"`); got != 1 {
		t.Errorf("the 429: counted %v times, want 1", got)
	}
	if got := value(t, r, "poppy_mcp_company_requests_total", `endpoint="document",status="error"`); got != 1 {
		t.Errorf("the failed request: counted %v times, want 1", got)
	}
}

// value is the value of the sample of name with exactly labels (written
// as in the exposition format, sorted), or -1 when there is none.
func value(t *testing.T, r *metrics.Recorder, name, labels string) float64 {
	t.Helper()
	families, err := r.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			if strings.Join(ls, ",") != labels {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

type failTransport struct{}

func (failTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("down") }

// TestEndpointKind: each kind of Company request is told from its method
// and headers.
func TestEndpointKind(t *testing.T) {
	for _, tc := range []struct {
		method  string
		headers map[string]string
		want    string
	}{
		{"GET", nil, metrics.EndpointDocument},
		{"POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "DPoP": "proof"}, metrics.EndpointOAuth},
		{"POST", map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Authorization": "DPoP x"}, metrics.EndpointMCP},
		{"GET", map[string]string{"Accept": "text/event-stream", "Authorization": "DPoP x"}, metrics.EndpointEvents},
		{"POST", map[string]string{"Content-Type": "application/json", "Authorization": "DPoP x"}, metrics.EndpointResource},
		{"DELETE", nil, metrics.EndpointOther},
	} {
		req := httptest.NewRequest(tc.method, "https://example.com/x", nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		if got := metrics.EndpointKind(req); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.method, tc.headers, got, tc.want)
		}
	}
}
