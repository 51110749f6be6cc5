package cache

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time source for Transport.timeNow.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// origin is an httptest server that counts and records the requests it
// receives and dates its responses by the test clock.
type origin struct {
	*httptest.Server
	clock *clock
	count atomic.Int64

	mu       sync.Mutex
	received []*http.Request
}

func newOrigin(t testing.TB, clk *clock, h http.HandlerFunc) *origin {
	t.Helper()
	o := &origin{clock: clk}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.count.Add(1)
		o.mu.Lock()
		o.received = append(o.received, r.Clone(r.Context()))
		o.mu.Unlock()
		w.Header().Set("Date", clk.Now().Format(http.TimeFormat))
		h(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

// requests returns how many requests the origin received.
func (o *origin) requests() int { return int(o.count.Load()) }

// last returns the last request received.
func (o *origin) last(t *testing.T) *http.Request {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.received) == 0 {
		t.Fatal("origin received no request")
	}
	return o.received[len(o.received)-1]
}

// bodyTracker wraps a RoundTripper and counts response bodies it handed out
// that are not yet closed.
type bodyTracker struct {
	base http.RoundTripper
	open atomic.Int64
}

type trackedBody struct {
	io.ReadCloser
	once sync.Once
	t    *bodyTracker
}

func (b *trackedBody) Close() error {
	b.once.Do(func() { b.t.open.Add(-1) })
	return b.ReadCloser.Close()
}

func (bt *bodyTracker) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := bt.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	bt.open.Add(1)
	resp.Body = &trackedBody{ReadCloser: resp.Body, t: bt}
	return resp, nil
}

// newTransport returns a Transport to o on clk. When the test ends it checks
// that every body the origin sent was closed, given that the test closed
// every body it got.
func newTransport(t *testing.T, o *origin, opts *Options) *Transport {
	t.Helper()
	bt := &bodyTracker{base: o.Client().Transport}
	tr := New(bt, opts)
	tr.timeNow = o.clock.Now
	t.Cleanup(func() {
		if n := bt.open.Load(); n != 0 {
			t.Errorf("%d response bodies from the origin were left open", n)
		}
	})
	return tr
}

// result is what a test looks at in a response.
type result struct {
	status int
	how    string // X-Poppy-Cache
	body   string
	header http.Header
}

// get sends a GET for path through tr with the given header fields (name,
// value pairs), reads the whole body and closes it.
func get(t *testing.T, tr http.RoundTripper, o *origin, path string, fields ...string) result {
	t.Helper()
	return do(t, tr, http.MethodGet, o.URL+path, fields...)
}

func do(t *testing.T, tr http.RoundTripper, method, url string, fields ...string) result {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header[fields[i]] = append(req.Header[fields[i]], fields[i+1])
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return result{resp.StatusCode, resp.Header.Get(HeaderCache), string(b), resp.Header}
}

// wantHow checks how each response was answered.
func wantHow(t *testing.T, got result, want string) {
	t.Helper()
	if got.how != want {
		t.Errorf("%s = %q, want %q", HeaderCache, got.how, want)
	}
}

// wantRequests checks how many requests the origin received.
func wantRequests(t *testing.T, o *origin, want int) {
	t.Helper()
	if got := o.requests(); got != want {
		t.Errorf("origin received %d requests, want %d", got, want)
	}
}

// wantSent checks a field of the last request the origin received.
func wantSent(t *testing.T, o *origin, field, want string) {
	t.Helper()
	if got := o.last(t).Header.Get(field); got != want {
		t.Errorf("request sent %s %q, want %q", field, got, want)
	}
}

// static answers every request with body and the given header fields.
func static(body string, fields ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(fields); i += 2 {
			w.Header().Add(fields[i], fields[i+1])
		}
		io.WriteString(w, body)
	}
}

// etagged serves body with the ETag *etag and the given header fields, and
// answers a matching If-None-Match with 304 carrying the same fields.
func etagged(etag *atomic.Value, body *atomic.Value, fields ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tag := etag.Load().(string)
		for i := 0; i+1 < len(fields); i += 2 {
			w.Header().Add(fields[i], fields[i+1])
		}
		w.Header().Set("ETag", tag)
		if r.Header.Get("If-None-Match") == tag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		io.WriteString(w, body.Load().(string))
	}
}

func value(s string) *atomic.Value {
	var v atomic.Value
	v.Store(s)
	return &v
}
