package poppytest

// This file slows responses down, so a test can check that the agent does
// not let a Company hold it: a body that arrives one byte at a time.

import (
	"net/http"
	"time"
)

// SlowBody makes every later response at host and path (any method) send
// its status and headers at once, then its body one byte every interval,
// flushed, until the body ends or the client leaves: a Company that holds
// the agent's read open. A zero or negative interval removes the rule.
func (s *Server) SlowBody(host, path string, interval time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := hostOnly(host) + path
	if interval <= 0 {
		delete(s.slow, key)
		return
	}
	s.slow[key] = interval
}

// slowed returns w, made slow when a SlowBody applies to r.
func (s *Server) slowed(w http.ResponseWriter, r *http.Request, host string) http.ResponseWriter {
	s.mu.Lock()
	interval, ok := s.slow[host+r.URL.Path]
	s.mu.Unlock()
	if !ok {
		return w
	}
	return &slowWriter{ResponseWriter: w, r: r, interval: interval}
}

// slowWriter writes a body one byte per interval.
type slowWriter struct {
	http.ResponseWriter
	r        *http.Request
	interval time.Duration
}

func (w *slowWriter) Write(p []byte) (int, error) {
	rc := http.NewResponseController(w.ResponseWriter)
	for i := range p {
		if _, err := w.ResponseWriter.Write(p[i : i+1]); err != nil {
			return i, err
		}
		if err := rc.Flush(); err != nil {
			return i + 1, err
		}
		t := time.NewTimer(w.interval)
		select {
		case <-t.C:
		case <-w.r.Context().Done():
			t.Stop()
			return i + 1, w.r.Context().Err()
		}
	}
	return len(p), nil
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *slowWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
