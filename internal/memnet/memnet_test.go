package memnet_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/memnet"
)

// TestHTTPInBubble: an HTTP server on a memnet listener answers a client
// in the same bubble, and a handler's hour-long wait passes at once on the
// bubble's clock: the kept-alive connection blocks durably.
func TestHTTPInBubble(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memnet.Network
		hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Hour)
			io.WriteString(w, "late")
		}))
		hs.Listener.Close()
		hs.Listener, _ = n.Listen()
		hs.StartTLS()
		defer hs.Close()
		tr := hs.Client().Transport.(*http.Transport).Clone()
		tr.DialContext = n.DialContext
		defer tr.CloseIdleConnections()
		start := time.Now()
		for range 2 {
			resp, err := (&http.Client{Transport: tr}).Get(hs.URL)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "late" {
				t.Fatalf("body %q", body)
			}
		}
		if got := time.Since(start); got != 2*time.Hour {
			t.Errorf("two requests took %v on the bubble's clock, want 2h", got)
		}
	})
}

// TestDeadlineAndClose: a read waits until its deadline, a closed peer
// reads as EOF after what was written, and a closed listener refuses.
func TestDeadlineAndClose(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n memnet.Network
		ln, _ := n.Listen()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("bye"))
			c.Close()
		}()
		c, err := n.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c)
		if string(got) != "bye" || err != nil {
			t.Errorf("read %q, %v; want bye, nil", got, err)
		}
		c2, c3 := memnet.Pipe(ln.Addr(), ln.Addr())
		defer c3.Close()
		c2.SetReadDeadline(time.Now().Add(time.Minute))
		start := time.Now()
		if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) != time.Minute {
			t.Errorf("read: %v after %v; want a deadline after 1m", err, time.Since(start))
		}
		c2.Close()
		ln.Close()
		if _, err := n.DialContext(context.Background(), "tcp", ln.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial after Close: %v, want ECONNREFUSED", err)
		}
	})
}
