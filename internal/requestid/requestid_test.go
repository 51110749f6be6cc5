package requestid_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/poppy-mcp/poppy-mcp/internal/requestid"
)

// TestMiddleware: a well-formed X-Request-Id is kept and echoed; a missing,
// malformed or overlong one is replaced by a new one; the records logged
// with the request's context carry the ID.
func TestMiddleware(t *testing.T) {
	var logged bytes.Buffer
	log := slog.New(requestid.Handler(slog.NewTextHandler(&logged, nil)))
	h := requestid.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "handled")
	}))
	for _, tc := range []struct {
		sent string
		kept bool
	}{
		{"3f2c9a1e-7b4d-4c6a-9e2f-1a2b3c4d5e6f", true},
		{"Root=1-67891233-abcdef012345678912345678", false}, // "=" is not allowed
		{"", false},
		{"a b", false},
		{"x\nlevel=ERROR msg=forged", false},
		{strings.Repeat("a", 129), false},
		{strings.Repeat("a", 128), true},
	} {
		logged.Reset()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if tc.sent != "" {
			req.Header.Set(requestid.Header, tc.sent)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Header().Get(requestid.Header)
		if tc.kept && got != tc.sent || !tc.kept && (got == tc.sent || !requestid.Valid(got)) {
			t.Errorf("sent %.20q: echoed %q", tc.sent, got)
		}
		if !strings.Contains(logged.String(), "request_id="+got) {
			t.Errorf("sent %.20q: logged %q, want request_id=%s", tc.sent, logged.String(), got)
		}
	}
}

// TestHandlerWithoutRequest: a record logged outside a request gets no
// request_id.
func TestHandlerWithoutRequest(t *testing.T) {
	var logged bytes.Buffer
	slog.New(requestid.Handler(slog.NewTextHandler(&logged, nil))).Info("started")
	if strings.Contains(logged.String(), "request_id") {
		t.Errorf("logged %q", logged.String())
	}
}

// FuzzValid: an ID taken from a request never carries what could break a
// log line (spaces, quotes, "=", control characters) and is never long.
func FuzzValid(f *testing.F) {
	for _, s := range []string{"abc-123", "", "a b", "x\ny", "Root=1-2", strings.Repeat("z", 200), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if requestid.Valid(id) && (len(id) > 128 || strings.ContainsAny(id, " \t\r\n\"'=\\") || strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r > 0x7e })) {
			t.Errorf("Valid(%q)", id)
		}
	})
}
