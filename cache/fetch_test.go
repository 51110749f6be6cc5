package cache

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNoCacheRevalidatesEachUse(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, etagged(value(`"v1"`), value("doc"), "Cache-Control", "no-cache"))
	tr := newTransport(t, o, nil)

	wantHow(t, get(t, tr, o, "/"), Miss)
	for range 3 {
		r := get(t, tr, o, "/")
		wantHow(t, r, Revalidated)
		if r.status != 200 || r.body != "doc" {
			t.Errorf("revalidated = %d %q, want 200 \"doc\"", r.status, r.body)
		}
		wantSent(t, o, "If-None-Match", `"v1"`)
		if r.header.Get("Age") != "" {
			t.Errorf("a validated response carries Age %q", r.header.Get("Age"))
		}
	}
	wantRequests(t, o, 4)
	if s := tr.Stats(); s.Revalidated != 3 || s.Misses != 1 || s.Hits != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

// TestNoCacheFreshResponseRevalidatesEachUse: RFC 9111 §5.2.2.4, a
// response with no-cache "MUST NOT be used to satisfy any other request
// without forwarding it for validation", even while it is fresh (here by
// max-age or Expires, which TestNoCacheRevalidatesEachUse's response is
// not). Every use goes to the origin with the stored validator, ETag or
// Last-Modified, and the origin's 304 is what is served.
func TestNoCacheFreshResponseRevalidatesEachUse(t *testing.T) {
	for _, tc := range []struct{ name, validator, freshness, header string }{
		{"ETag, max-age", "ETag", "Cache-Control", "no-cache, max-age=600"},
		{"Last-Modified, max-age", "Last-Modified", "Cache-Control", "no-cache, max-age=600"},
		{"ETag, Expires", "ETag", "Expires", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			validator := map[string]string{"ETag": `"v1"`, "Last-Modified": clk.Now().Add(-time.Hour).Format(http.TimeFormat)}[tc.validator]
			condition := map[string]string{"ETag": "If-None-Match", "Last-Modified": "If-Modified-Since"}[tc.validator]
			var notModified atomic.Int32
			o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
				if tc.freshness == "Expires" {
					w.Header().Set("Cache-Control", "no-cache")
					w.Header().Set("Expires", clk.Now().Add(10*time.Minute).Format(http.TimeFormat))
				} else {
					w.Header().Set(tc.freshness, tc.header)
				}
				w.Header().Set(tc.validator, validator)
				if r.Header.Get(condition) == validator {
					notModified.Add(1)
					w.WriteHeader(http.StatusNotModified)
					return
				}
				io.WriteString(w, "doc")
			})
			tr := newTransport(t, o, nil)
			wantHow(t, get(t, tr, o, "/"), Miss)
			for range 3 {
				clk.Advance(time.Second) // well within the 600s of freshness
				r := get(t, tr, o, "/")
				wantHow(t, r, Revalidated)
				wantSent(t, o, condition, validator)
				if r.status != 200 || r.body != "doc" {
					t.Errorf("revalidated = %d %q, want 200 \"doc\"", r.status, r.body)
				}
			}
			if wantRequests(t, o, 4); notModified.Load() != 3 {
				t.Errorf("the origin answered %d revalidations with 304, want 3", notModified.Load())
			}
		})
	}
}

func TestETagChangeReplaces(t *testing.T) {
	clk := newClock()
	etag, body := value(`"v1"`), value("one")
	o := newOrigin(t, clk, etagged(etag, body, "Cache-Control", "max-age=10"))
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/")
	etag.Store(`"v2"`)
	body.Store("two")
	clk.Advance(11 * time.Second)
	r := get(t, tr, o, "/")
	if r.how != Miss || r.body != "two" {
		t.Errorf("after change: %s %q, want miss \"two\"", r.how, r.body)
	}
	wantSent(t, o, "If-None-Match", `"v1"`)
	clk.Advance(11 * time.Second)
	r = get(t, tr, o, "/")
	if r.how != Revalidated || r.body != "two" {
		t.Errorf("next: %s %q, want revalidated \"two\"", r.how, r.body)
	}
	wantSent(t, o, "If-None-Match", `"v2"`)
}

func TestLastModifiedRevalidationFreshens(t *testing.T) {
	clk := newClock()
	modified := clk.Now().Add(-time.Hour).Format(http.TimeFormat)
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Last-Modified", modified)
		if r.Header.Get("If-Modified-Since") == modified {
			// RFC 9111 §4.3.4: these fields replace the stored ones.
			w.Header().Set("Cache-Control", "max-age=100")
			w.Header().Set("X-Version", "2")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Cache-Control", "max-age=10")
		w.Header().Set("X-Version", "1")
		io.WriteString(w, "doc")
	})
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/")
	clk.Advance(11 * time.Second)
	r := get(t, tr, o, "/")
	wantHow(t, r, Revalidated)
	if r.body != "doc" || r.header.Get("X-Version") != "2" || r.header.Get("Content-Length") != "3" {
		t.Errorf("revalidated = %q %v", r.body, r.header)
	}
	clk.Advance(50 * time.Second) // fresh for 100s from the 304
	r = get(t, tr, o, "/")
	wantHow(t, r, Hit)
	if r.header.Get("Age") != "50" {
		t.Errorf("Age = %q, want 50", r.header.Get("Age"))
	}
	wantRequests(t, o, 2)
}

func TestMismatched304Refetches(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", `"v2"`)
		if r.Header.Get("If-None-Match") != "" {
			// Not the representation the cache holds.
			w.WriteHeader(http.StatusNotModified)
			return
		}
		io.WriteString(w, "two")
	})
	tr := newTransport(t, o, nil)
	tr.put(cacheKey(mustRequest(t, o.URL+"/")), &entry{
		status: "200 OK", statusCode: 200, header: http.Header{}, body: []byte("one"),
		etag: `"v1"`, timing: timing{noCache: true},
	})

	r := get(t, tr, o, "/")
	if r.how != Miss || r.body != "two" {
		t.Errorf("got %s %q, want miss \"two\"", r.how, r.body)
	}
	wantRequests(t, o, 2)
	wantSent(t, o, "If-None-Match", "")
}

func TestRevalidationServerError(t *testing.T) {
	clk := newClock()
	failing := value("yes")
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "" && failing.Load() == "yes" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		etagged(value(`"v1"`), value("doc"), "Cache-Control", "max-age=10, must-revalidate")(w, r)
	})
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/")
	clk.Advance(11 * time.Second)
	r := get(t, tr, o, "/")
	if r.status != http.StatusServiceUnavailable || r.how != Miss {
		t.Errorf("stale must-revalidate with server down = %d %s, want 503 miss", r.status, r.how)
	}
	// The stored response is kept and validated again.
	failing.Store("no")
	r = get(t, tr, o, "/")
	if r.how != Revalidated || r.body != "doc" {
		t.Errorf("after recovery = %s %q, want revalidated \"doc\"", r.how, r.body)
	}
	wantRequests(t, o, 3)
}

func TestRedirectsAreCached(t *testing.T) {
	for _, code := range []int{http.StatusMovedPermanently, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			clk := newClock()
			o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Cache-Control", "max-age=3600")
				if r.URL.Path == "/.well-known/poppy.json" {
					http.Redirect(w, r, "/hosted/poppy.json", code)
					return
				}
				io.WriteString(w, `{"poppy_domains":["example.com"]}`)
			})
			client := &http.Client{Transport: newTransport(t, o, nil)}

			for range 3 {
				resp, err := client.Get(o.URL + "/.well-known/poppy.json")
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(b), "poppy_domains") {
					t.Errorf("GET = %d %q", resp.StatusCode, b)
				}
			}
			wantRequests(t, o, 2)
		})
	}
}

func TestCacheableStatuses(t *testing.T) {
	for code, stored := range map[int]bool{
		http.StatusNotFound:             true,
		http.StatusGone:                 true,
		http.StatusNonAuthoritativeInfo: true,
		http.StatusFound:                false,
		http.StatusInternalServerError:  false,
		http.StatusNoContent:            false,
	} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			clk := newClock()
			o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Cache-Control", "max-age=60")
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(code)
			})
			tr := newTransport(t, o, nil)
			get(t, tr, o, "/")
			r := get(t, tr, o, "/")
			if r.status != code || (r.how == Hit) != stored {
				t.Errorf("second GET = %d %s, want %d stored=%v", r.status, r.how, code, stored)
			}
		})
	}
}

func TestHeadUsesStoredGet(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("document", "Cache-Control", "max-age=60"))
	tr := newTransport(t, o, nil)

	r := do(t, tr, http.MethodHead, o.URL+"/")
	if r.how != "" {
		t.Errorf("HEAD with nothing stored: %s = %q", HeaderCache, r.how)
	}
	get(t, tr, o, "/")
	r = do(t, tr, http.MethodHead, o.URL+"/")
	if r.how != Hit || r.body != "" || r.header.Get("Content-Length") != "8" {
		t.Errorf("HEAD = %s %q %v, want a hit with no body", r.how, r.body, r.header)
	}
	wantRequests(t, o, 2)
	if o.last(t).Method != http.MethodGet {
		t.Errorf("last request %s, want the GET", o.last(t).Method)
	}
}

func TestUnsafeMethodInvalidates(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=600"))
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/doc")
	do(t, tr, http.MethodPost, o.URL+"/doc")
	wantHow(t, get(t, tr, o, "/doc"), Miss)
	wantRequests(t, o, 3)
}

func TestOversizedBodyStreamsThrough(t *testing.T) {
	const limit = 1 << 10
	big := make([]byte, 64<<10)
	rand.Read(big)
	for _, tc := range []struct {
		name   string
		size   int
		stored bool
	}{
		{"at the limit", limit, true},
		{"one byte over", limit + 1, false},
		{"far over", len(big), false},
	} {
		for _, chunked := range []bool{false, true} {
			t.Run(tc.name+" chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
				clk := newClock()
				o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Cache-Control", "max-age=600")
					if !chunked {
						w.Header().Set("Content-Length", strconv.Itoa(tc.size))
					}
					for b := big[:tc.size]; len(b) > 0; b = b[min(len(b), 100):] {
						w.Write(b[:min(len(b), 100)])
						if chunked {
							w.(http.Flusher).Flush()
						}
					}
				})
				tr := newTransport(t, o, &Options{MaxEntryBytes: limit})
				for range 2 {
					if r := get(t, tr, o, "/"); !bytes.Equal([]byte(r.body), big[:tc.size]) {
						t.Fatalf("body of %d bytes came back as %d different bytes", tc.size, len(r.body))
					}
				}
				want := 2
				if tc.stored {
					want = 1
				}
				wantRequests(t, o, want)
			})
		}
	}
}

// TestEndlessBodyIsNotBuffered would hang if the cache read a body past
// MaxEntryBytes before returning it.
func TestEndlessBodyIsNotBuffered(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		chunk := bytes.Repeat([]byte("x"), 4096)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	tr := newTransport(t, o, &Options{MaxEntryBytes: 8 << 10})
	req := mustRequest(t, o.URL+"/")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if n != 1<<20 || err != nil {
		t.Errorf("read %d bytes, %v; want 1 MiB", n, err)
	}
	if s := tr.Stats(); s.Stored != 0 {
		t.Errorf("Stats = %+v, want nothing stored", s)
	}
}

func TestTruncatedBodyReportsError(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 100\r\n\r\nonly ten b")
		buf.Flush()
	})
	tr := newTransport(t, o, nil)
	resp, err := tr.RoundTrip(mustRequest(t, o.URL+"/"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "only ten b" || err == nil || !strings.HasPrefix(err.Error(), "cache: ") {
		t.Errorf("body %q, error %v; want the 10 bytes, then a cache: error", b, err)
	}
	if s := tr.Stats(); s.Stored != 0 {
		t.Errorf("Stats = %+v, want nothing stored", s)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestUnstorableAnswerDropsStored(t *testing.T) {
	clk := newClock()
	cc, etag := value("max-age=10"), value(`"v1"`)
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		etagged(etag, value("doc "+etag.Load().(string)), "Cache-Control", cc.Load().(string))(w, r)
	})
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/")
	cc.Store("no-store")
	// The server answers the validation 304 with no-store.
	wantHow(t, get(t, tr, o, "/", "Cache-Control", "no-cache"), Revalidated)
	if s := tr.Stats(); s.Entries != 0 {
		t.Errorf("Stats = %+v, want the no-store response dropped", s)
	}

	cc.Store("max-age=10")
	get(t, tr, o, "/")
	cc.Store("no-store")
	etag.Store(`"v2"`)
	// The server answers the validation with a full no-store response.
	r := get(t, tr, o, "/", "Cache-Control", "no-cache")
	if r.how != Miss || r.body != `doc "v2"` {
		t.Errorf("got %s %q, want miss with the new body", r.how, r.body)
	}
	if s := tr.Stats(); s.Entries != 0 {
		t.Errorf("Stats = %+v, want the stored response dropped", s)
	}
	wantRequests(t, o, 4)
}

func TestAgeIsPerMessage(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=40")
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") != "" {
			w.WriteHeader(http.StatusNotModified) // no Age: it is new
			return
		}
		w.Header().Set("Age", "30") // from an intermediary
		io.WriteString(w, "doc")
	})
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/")
	clk.Advance(11 * time.Second)
	r := get(t, tr, o, "/")
	wantHow(t, r, Revalidated)
	if r.header.Get("Age") != "" {
		t.Errorf("validated response carries the old Age %q", r.header.Get("Age"))
	}
	clk.Advance(15 * time.Second)
	r = get(t, tr, o, "/")
	if r.how != Hit || r.header.Get("Age") != "15" {
		t.Errorf("after 15s: %s, Age %q; want a hit of age 15", r.how, r.header.Get("Age"))
	}
}

func TestFreshenedWithoutDate(t *testing.T) {
	stored := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	h := http.Header{"Date": {stored.Format(http.TimeFormat)}, "Cache-Control": {"max-age=60"}, "Etag": {`"a"`}}
	e := &entry{header: h, body: []byte("doc")}
	now := stored.Add(time.Hour)
	ne := e.freshened(http.Header{"Etag": {`"a"`}, "Content-Length": {"0"}}, now, now)
	if got := ne.header.Get("Content-Length"); got != "" {
		t.Errorf("Content-Length = %q taken from the 304", got)
	}
	if got := ne.header.Get("Date"); got != now.Format(http.TimeFormat) {
		t.Errorf("Date = %q, want the 304's arrival %q", got, now.Format(http.TimeFormat))
	}
	if !ne.timing.fresh(now.Add(59*time.Second), nil) {
		t.Error("freshened response is stale: its age was taken from the old Date")
	}
	if e.header.Get("Date") != stored.Format(http.TimeFormat) {
		t.Error("freshened changed the stored entry")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingBody counts the bytes read from it.
type countingBody struct {
	io.Reader
	read   int64
	closed bool
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.Reader.Read(p)
	c.read += int64(n)
	return n, err
}

func (c *countingBody) Close() error { c.closed = true; return nil }

func TestDeclaredOversizedBodyIsNotRead(t *testing.T) {
	body := &countingBody{Reader: bytes.NewReader(make([]byte, 4096))}
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{
			StatusCode: 200, ContentLength: 4096, Body: body, Request: r,
			Header: http.Header{"Cache-Control": {"max-age=60"}},
		}, nil
	}), &Options{MaxEntryBytes: 1024})
	resp, err := tr.RoundTrip(mustRequest(t, "https://example.com/"))
	if err != nil {
		t.Fatal(err)
	}
	if body.read != 0 {
		t.Errorf("RoundTrip read %d bytes of a body declared larger than MaxEntryBytes", body.read)
	}
	if n, _ := io.Copy(io.Discard, resp.Body); n != 4096 {
		t.Errorf("read %d bytes, want 4096", n)
	}
	resp.Body.Close()
	if !body.closed {
		t.Error("body not closed")
	}
}

func TestWeakETagValidates(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		if r.Header.Get("If-None-Match") == `W/"v1"` {
			// A compressing proxy weakened the ETag of the 200 only.
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `W/"v1"`)
		io.WriteString(w, "doc")
	})
	tr := newTransport(t, o, nil)
	get(t, tr, o, "/")
	wantHow(t, get(t, tr, o, "/"), Revalidated)
	wantRequests(t, o, 2)
}
