package retryafter

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func TestHolds(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var h Holds
	ep := "https://example.com/.well-known/poppy.json"
	if d := h.Remaining(ep, now); d != 0 {
		t.Fatalf("a new Holds holds %v", d)
	}
	h.Hold(ep, now.Add(30*time.Second))
	h.Hold(ep, now.Add(10*time.Second)) // an earlier end does not shorten it
	if d := h.Remaining(ep, now); d != 30*time.Second {
		t.Errorf("Remaining = %v, want 30s", d)
	}
	if d := h.Remaining("https://example.com/other", now); d != 0 {
		t.Errorf("another endpoint is held %v", d)
	}
	if d := h.Remaining(ep, now.Add(31*time.Second)); d != 0 {
		t.Errorf("after the hold: %v", d)
	}
}

func TestObserve(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var h Holds
	u, _ := url.Parse("https://API.example.com/openapi.json?x=1")
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"120"}}, Request: &http.Request{URL: u}}
	if !h.Observe(resp, now) {
		t.Fatal("a 429 was not observed")
	}
	if d := h.Remaining("https://api.example.com/openapi.json", now); d != 2*time.Minute {
		t.Errorf("held %v, want 2m", d)
	}
	resp.StatusCode = 503
	if h.Observe(resp, now) {
		t.Error("a 503 set a hold")
	}
}

// TestHoldsBounded: a Company answering 429 on endless paths cannot grow
// the holds without bound.
func TestHoldsBounded(t *testing.T) {
	now := time.Now()
	var h Holds
	for i := range 3 * maxHolds {
		h.Hold(fmt.Sprintf("https://example.com/%d", i), now.Add(time.Hour+time.Duration(i)))
	}
	if n := len(h.until); n > maxHolds {
		t.Errorf("%d holds kept, want at most %d", n, maxHolds)
	}
	if d := h.Remaining(fmt.Sprintf("https://example.com/%d", 3*maxHolds-1), now); d <= time.Hour {
		t.Errorf("the newest hold was dropped (%v)", d)
	}
}

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"5": 5 * time.Second, " 0 ": 0, "": Default, "soon": Default, "-5": Default,
		"9999999999": Max, now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat): 0,
	} {
		if got := Parse(in, now); got != want {
			t.Errorf("Parse(%q) = %v, want %v", in, got, want)
		}
	}
}

// FuzzParse: whatever a Company sends as Retry-After, the hold is between
// zero and Max, and a plain number of seconds is taken as it is.
func FuzzParse(f *testing.F) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, s := range []string{"5", "", "-1", "99999999999999999999", "Fri, 02 Jan 2026 03:05:05 GMT", "1e3", " 7 ", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d := Parse(v, now)
		if d < 0 || d > Max {
			t.Fatalf("Parse(%q) = %v", v, d)
		}
	})
}
