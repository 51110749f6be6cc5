package cache

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRepeatedGetWithinMaxAgeSendsNothing(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=60"))
	tr := newTransport(t, o, nil)

	first := get(t, tr, o, "/.well-known/poppy.json")
	wantHow(t, first, Miss)
	clk.Advance(10 * time.Second)
	for range 3 {
		r := get(t, tr, o, "/.well-known/poppy.json")
		wantHow(t, r, Hit)
		if r.status != 200 || r.body != "doc" {
			t.Errorf("hit = %d %q, want 200 \"doc\"", r.status, r.body)
		}
		if age := r.header.Get("Age"); age != "10" {
			t.Errorf("Age = %q, want 10", age)
		}
	}
	wantRequests(t, o, 1)
	s := tr.Stats()
	if s.Hits != 3 || s.Misses != 1 || s.Stored != 1 || s.Entries != 1 || s.Bytes != 3 {
		t.Errorf("Stats = %+v", s)
	}
}

func TestExpiryThroughClock(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=60"))
	tr := newTransport(t, o, nil)

	wantHow(t, get(t, tr, o, "/"), Miss)
	clk.Advance(59 * time.Second)
	wantHow(t, get(t, tr, o, "/"), Hit)
	clk.Advance(time.Second) // age 60 = lifetime: stale, and no validator
	wantHow(t, get(t, tr, o, "/"), Miss)
	wantRequests(t, o, 2)
}

func TestResponseNoStore(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "no-store, max-age=60", "ETag", `"v1"`))
	tr := newTransport(t, o, nil)

	for range 3 {
		r := get(t, tr, o, "/")
		wantHow(t, r, Miss)
		if r.body != "doc" {
			t.Errorf("body = %q", r.body)
		}
	}
	wantRequests(t, o, 3)
	if s := tr.Stats(); s.Stored != 0 || s.Entries != 0 {
		t.Errorf("Stats = %+v, want nothing stored", s)
	}
}

func TestNotStoredWithoutFreshnessOrValidator(t *testing.T) {
	for _, fields := range [][]string{
		nil,
		{"Cache-Control", "max-age=0"},
		{"Cache-Control", "no-cache, max-age=60"},
		{"Expires", "0"},
		{"Cache-Control", "max-age=ten"},
		{"Cache-Control", "max-age=60", "Vary", "Accept, *"},
		{"Cache-Control", "max-age=60", "Age", "60"},
	} {
		t.Run(fmt.Sprint(fields), func(t *testing.T) {
			o := newOrigin(t, newClock(), static("doc", fields...))
			tr := newTransport(t, o, nil)
			get(t, tr, o, "/")
			wantHow(t, get(t, tr, o, "/"), Miss)
			wantRequests(t, o, 2)
			if s := tr.Stats(); s.Stored != 0 {
				t.Errorf("Stats = %+v, want nothing stored", s)
			}
		})
	}
}

func TestExpires(t *testing.T) {
	clk := newClock()
	expires := clk.Now().Add(30 * time.Second).Format(http.TimeFormat)
	o := newOrigin(t, clk, static("doc", "Expires", expires))
	tr := newTransport(t, o, nil)

	wantHow(t, get(t, tr, o, "/"), Miss)
	clk.Advance(29 * time.Second)
	wantHow(t, get(t, tr, o, "/"), Hit)
	clk.Advance(2 * time.Second)
	wantHow(t, get(t, tr, o, "/"), Miss)
	wantRequests(t, o, 2)
}

func TestMaxAgeOverridesExpires(t *testing.T) {
	clk := newClock()
	expires := clk.Now().Add(time.Hour).Format(http.TimeFormat)
	o := newOrigin(t, clk, static("doc", "Expires", expires, "Cache-Control", "max-age=5"))
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/")
	clk.Advance(6 * time.Second)
	wantHow(t, get(t, tr, o, "/"), Miss)
}

func TestAgeAndDate(t *testing.T) {
	t.Run("Age", func(t *testing.T) {
		clk := newClock()
		o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=60", "Age", "50"))
		tr := newTransport(t, o, nil)
		get(t, tr, o, "/")
		clk.Advance(9 * time.Second)
		r := get(t, tr, o, "/")
		wantHow(t, r, Hit)
		if r.header.Get("Age") != "59" {
			t.Errorf("Age = %q, want 59", r.header.Get("Age"))
		}
		clk.Advance(time.Second)
		wantHow(t, get(t, tr, o, "/"), Miss)
	})
	t.Run("Date", func(t *testing.T) {
		clk := newClock()
		o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
			// The response was generated 50 seconds ago.
			w.Header().Set("Date", clk.Now().Add(-50*time.Second).Format(http.TimeFormat))
			static("doc", "Cache-Control", "max-age=60")(w, r)
		})
		tr := newTransport(t, o, nil)
		get(t, tr, o, "/")
		clk.Advance(9 * time.Second)
		wantHow(t, get(t, tr, o, "/"), Hit)
		clk.Advance(time.Second)
		wantHow(t, get(t, tr, o, "/"), Miss)
	})
}

func TestVary(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("Vary", "Accept-Language")
		io.WriteString(w, "doc in "+r.Header.Get("Accept-Language"))
	})
	tr := newTransport(t, o, nil)

	steps := []struct{ lang, how string }{
		{"en", Miss},
		{"en", Hit},
		{"fr", Miss}, // the stored response does not match; it is replaced
		{"fr", Hit},
		{"en", Miss}, // one response is kept per URL
	}
	for i, s := range steps {
		r := get(t, tr, o, "/", "Accept-Language", s.lang)
		if r.how != s.how || r.body != "doc in "+s.lang {
			t.Errorf("step %d (%s): %s %q, want %s %q", i, s.lang, r.how, r.body, s.how, "doc in "+s.lang)
		}
	}
	wantRequests(t, o, 3)
}

func TestCredentialsBypass(t *testing.T) {
	for _, field := range [][]string{
		{"Authorization", "DPoP secret-token"},
		{"DPoP", "proof"}, // set as written, not canonicalised
		{"Dpop", "proof"},
	} {
		t.Run(field[0], func(t *testing.T) {
			clk := newClock()
			o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=60", "ETag", `"v1"`))
			tr := newTransport(t, o, nil)

			for range 2 {
				r := get(t, tr, o, "/", field...)
				if r.how != "" {
					t.Errorf("%s = %q on a Session request", HeaderCache, r.how)
				}
			}
			if s := tr.Stats(); s != (Stats{}) {
				t.Errorf("Stats = %+v after Session requests, want zero", s)
			}
			// A stored public response is not served to a Session request.
			wantHow(t, get(t, tr, o, "/"), Miss)
			get(t, tr, o, "/", field...)
			wantRequests(t, o, 4)
			wantSent(t, o, "If-None-Match", "")
		})
	}
}

func TestRequestDirectivesForceValidation(t *testing.T) {
	for _, field := range [][]string{
		{"Cache-Control", "no-cache"},
		{"Cache-Control", "max-age=0"},
		{"Pragma", "no-cache"},
	} {
		t.Run(strings.Join(field, ": "), func(t *testing.T) {
			clk := newClock()
			o := newOrigin(t, clk, etagged(value(`"v1"`), value("doc"), "Cache-Control", "max-age=600"))
			tr := newTransport(t, o, nil)

			get(t, tr, o, "/")
			r := get(t, tr, o, "/", field...)
			wantHow(t, r, Revalidated)
			if r.status != 200 || r.body != "doc" {
				t.Errorf("revalidated = %d %q, want 200 \"doc\"", r.status, r.body)
			}
			wantSent(t, o, "If-None-Match", `"v1"`)
			wantHow(t, get(t, tr, o, "/"), Hit)
			wantRequests(t, o, 2)
		})
	}
}

func TestRequestNoCacheWithoutValidatorRefetches(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=600"))
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/")
	wantHow(t, get(t, tr, o, "/", "Cache-Control", "no-cache"), Miss)
	wantRequests(t, o, 2)
}

func TestRequestNoStore(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=600"))
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/", "Cache-Control", "no-store")
	wantHow(t, get(t, tr, o, "/"), Miss)
	// RFC 9111 §5.2.1.5 forbids storing, not serving what is stored.
	wantHow(t, get(t, tr, o, "/", "Cache-Control", "no-store"), Hit)
	wantRequests(t, o, 2)
}

func TestEvictionByEntries(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=600"))
	tr := newTransport(t, o, &Options{MaxEntries: 2})

	get(t, tr, o, "/a")
	get(t, tr, o, "/b")
	wantHow(t, get(t, tr, o, "/a"), Hit) // /b is now the least recently used
	get(t, tr, o, "/c")
	wantHow(t, get(t, tr, o, "/a"), Hit)
	wantHow(t, get(t, tr, o, "/c"), Hit)
	wantHow(t, get(t, tr, o, "/b"), Miss)
	wantRequests(t, o, 4)
	if s := tr.Stats(); s.Evicted != 2 || s.Entries != 2 {
		t.Errorf("Stats = %+v, want 2 evicted, 2 held", s)
	}
}

func TestEvictionByBytes(t *testing.T) {
	clk := newClock()
	body := strings.Repeat("x", 40)
	o := newOrigin(t, clk, static(body, "Cache-Control", "max-age=600"))
	tr := newTransport(t, o, &Options{MaxBytes: 100})

	get(t, tr, o, "/a")
	get(t, tr, o, "/b")
	wantHow(t, get(t, tr, o, "/a"), Hit)
	get(t, tr, o, "/c") // 120 bytes: /b, the least recently used, goes
	if s := tr.Stats(); s.Bytes != 80 || s.Entries != 2 || s.Evicted != 1 {
		t.Errorf("Stats = %+v, want 80 bytes in 2 entries, 1 evicted", s)
	}
	wantHow(t, get(t, tr, o, "/a"), Hit)
	wantHow(t, get(t, tr, o, "/c"), Hit)
	wantHow(t, get(t, tr, o, "/b"), Miss)
	wantRequests(t, o, 4)
}

func TestReplacingKeepsByteCount(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("12345", "Cache-Control", "max-age=1"))
	tr := newTransport(t, o, nil)
	for range 3 {
		get(t, tr, o, "/")
		clk.Advance(2 * time.Second)
	}
	if s := tr.Stats(); s.Bytes != 5 || s.Entries != 1 || s.Stored != 3 || s.Evicted != 0 {
		t.Errorf("Stats = %+v, want one 5-byte entry stored 3 times", s)
	}
}

func TestConcurrentUse(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, func(w http.ResponseWriter, r *http.Request) {
		etagged(value(`"`+r.URL.Path+`"`), value("doc "+r.URL.Path), "Cache-Control", "max-age=5")(w, r)
	})
	tr := newTransport(t, o, &Options{MaxEntries: 8, MaxBytes: 64})

	const workers, each = 8, 100
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				path := fmt.Sprintf("/%d", (w*7+i)%20)
				var fields []string
				if i%9 == 0 {
					fields = []string{"Cache-Control", "no-cache"}
				}
				if r := get(t, tr, o, path, fields...); r.body != "doc "+path {
					t.Errorf("GET %s = %q", path, r.body)
				}
				if i%25 == 0 {
					clk.Advance(time.Second)
				}
			}
		})
	}
	wg.Wait()
	s := tr.Stats()
	if got := s.Hits + s.Misses + s.Revalidated; got != workers*each {
		t.Errorf("hits+misses+revalidated = %d, want %d (%+v)", got, workers*each, s)
	}
	if got := s.Misses + s.Revalidated; got != int64(o.requests()) {
		t.Errorf("misses+revalidated = %d, origin saw %d", got, o.requests())
	}
	if s.Hits == 0 || s.Revalidated == 0 || s.Evicted == 0 || s.Entries > 8 || s.Bytes > 64 {
		t.Errorf("Stats = %+v: want hits, revalidations and evictions within limits", s)
	}
}

func TestResponseIsFreshCopy(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=60"))
	tr := newTransport(t, o, nil)
	get(t, tr, o, "/")

	req, _ := http.NewRequest(http.MethodGet, o.URL+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("Cache-Control", "no-store")
	resp.Header.Set("X-Extra", "1")
	io.ReadAll(resp.Body)
	resp.Body.Close()

	r := get(t, tr, o, "/")
	if r.body != "doc" || r.header.Get("X-Extra") != "" || r.header.Get("Cache-Control") != "max-age=60" {
		t.Errorf("second hit saw the first caller's changes: %q %v", r.body, r.header)
	}
}

func TestOptionsDefaults(t *testing.T) {
	tr := New(nil, nil)
	if tr.base != http.DefaultTransport || tr.maxBytes != DefaultMaxBytes || tr.maxEntryBytes != DefaultMaxEntryBytes {
		t.Errorf("New(nil, nil) = base %v, maxBytes %d, maxEntryBytes %d", tr.base, tr.maxBytes, tr.maxEntryBytes)
	}
	tr = New(nil, &Options{MaxBytes: 10, MaxEntryBytes: 20})
	if tr.maxEntryBytes != 10 {
		t.Errorf("maxEntryBytes = %d, want it lowered to MaxBytes 10", tr.maxEntryBytes)
	}
}

func TestRequestsThatBypass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*http.Request)
	}{
		{"Range", func(r *http.Request) { r.Header.Set("Range", "bytes=0-1") }},
		{"If-None-Match", func(r *http.Request) { r.Header.Set("If-None-Match", `"v1"`) }},
		{"If-Modified-Since", func(r *http.Request) { r.Header.Set("If-Modified-Since", "Wed, 04 Mar 2026 05:06:07 GMT") }},
		{"If-Match", func(r *http.Request) { r.Header.Set("If-Match", `"v1"`) }},
		{"If-Unmodified-Since", func(r *http.Request) { r.Header.Set("If-Unmodified-Since", "Wed, 04 Mar 2026 05:06:07 GMT") }},
		{"If-Range", func(r *http.Request) { r.Header.Set("If-Range", `"v1"`) }},
		{"body", func(r *http.Request) { r.Body = io.NopCloser(strings.NewReader("q")); r.ContentLength = 1 }},
		{"userinfo", func(r *http.Request) { r.URL.User = url.UserPassword("u", "secret") }},
		{"OPTIONS", func(r *http.Request) { r.Method = http.MethodOptions }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			o := newOrigin(t, clk, etagged(value(`"v1"`), value("doc"), "Cache-Control", "max-age=600"))
			tr := newTransport(t, o, nil)
			get(t, tr, o, "/")

			req := mustRequest(t, o.URL+"/")
			tc.setup(req)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if how := resp.Header.Get(HeaderCache); how != "" {
				t.Errorf("%s = %q, want the request sent as it is", HeaderCache, how)
			}
			wantRequests(t, o, 2)
			wantHow(t, get(t, tr, o, "/"), Hit)
		})
	}
}

func TestCacheKey(t *testing.T) {
	clk := newClock()
	o := newOrigin(t, clk, static("doc", "Cache-Control", "max-age=600"))
	tr := newTransport(t, o, nil)

	get(t, tr, o, "/doc#one")
	wantHow(t, get(t, tr, o, "/doc#two"), Hit)
	wantHow(t, get(t, tr, o, "/doc?q=1"), Miss)

	other := mustRequest(t, o.URL+"/doc")
	other.Host = "other.example"
	resp, err := tr.RoundTrip(other)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if how := resp.Header.Get(HeaderCache); how != Miss {
		t.Errorf("request for another Host: %s = %q, want miss", HeaderCache, how)
	}
	wantRequests(t, o, 3)
}
