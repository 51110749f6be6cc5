package cache

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchDocument is about the size of a poppy.json document.
var benchDocument = `{"poppy_domains":["example.com"],"organization":"Example",` + strings.Repeat(`"x":"padding",`, 60) + `"v":1}`

func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchDocument)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchGet(b *testing.B, client *http.Client, url string) {
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != int64(len(benchDocument)) {
			b.Fatalf("read %d bytes", n)
		}
	}
}

// BenchmarkHit is a GET answered from the cache.
func BenchmarkHit(b *testing.B) {
	srv := benchServer(b)
	tr := New(srv.Client().Transport, nil)
	benchGet(b, &http.Client{Transport: tr}, srv.URL+"/.well-known/poppy.json")
	if s := tr.Stats(); s.Misses != 1 {
		b.Fatalf("Stats = %+v, want one miss", s)
	}
}

// BenchmarkDirect is the same GET sent to the server on loopback.
func BenchmarkDirect(b *testing.B) {
	srv := benchServer(b)
	benchGet(b, srv.Client(), srv.URL+"/.well-known/poppy.json")
}
