package poppytest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/poppytest"
)

// recordingT is a poppytest.Reporter that keeps what the Server reports
// instead of failing the test, so tests can assert that a violation was
// reported.
type recordingT struct {
	poppytest.Reporter

	mu     sync.Mutex
	errors []string // guarded by mu
}

func newRecordingT() *recordingT {
	r := &recordingT{}
	r.Log = func(msg string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.errors = append(r.errors, msg)
	}
	return r
}

func (r *recordingT) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

// newRecorded starts a Server that reports to a recordingT, closed when t ends.
func newRecorded(t *testing.T, opts *poppytest.Options) (*poppytest.Server, *recordingT) {
	t.Helper()
	rt := newRecordingT()
	t.Cleanup(rt.Close)
	return poppytest.NewServer(rt, opts), rt
}

// wantViolation fails unless exactly one violation was reported, to T and in
// Violations, and it contains every one of wants.
func wantViolation(t *testing.T, s *poppytest.Server, rt *recordingT, wants ...string) {
	t.Helper()
	errs, viols := rt.Errors(), s.Violations()
	if len(errs) != 1 || len(viols) != 1 || errs[0] != viols[0] {
		t.Fatalf("want one violation reported and recorded; T got %q, Violations %q", errs, viols)
	}
	for _, w := range wants {
		if !strings.Contains(viols[0], w) {
			t.Errorf("violation %q does not contain %q", viols[0], w)
		}
	}
}

// wantNoViolation fails if the Server reported or recorded a violation.
func wantNoViolation(t *testing.T, s *poppytest.Server, rt *recordingT) {
	t.Helper()
	if errs, viols := rt.Errors(), s.Violations(); len(errs)+len(viols) != 0 {
		t.Fatalf("want no violation; T got %q, Violations %q", errs, viols)
	}
}

// get does a GET through the Server's client and returns status, header, body.
func get(t *testing.T, s *poppytest.Server, url string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, resp.Header, body
}

// getJSON GETs url, wants 200 application/json, and decodes it.
func getJSON(t *testing.T, s *poppytest.Server, url string) map[string]any {
	t.Helper()
	status, h, body := get(t, s, url, nil)
	if status != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %q, want 200 application/json", url, status, h.Get("Content-Type"))
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return v
}
