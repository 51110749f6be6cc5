package main

import (
	"io"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/app"
)

// TestEvictIdleFlag: serve --evict-idle (or POPPY_EVICT_IDLE, which the
// flag overrides) reaches app.Options.EvictIdle; 0 is never, and a bad
// value is refused.
func TestEvictIdleFlag(t *testing.T) {
	for _, tc := range []struct {
		env  string
		args []string
		want time.Duration
	}{
		{want: app.DefaultEvictIdle},
		{args: []string{"--evict-idle", "5m"}, want: 5 * time.Minute},
		{args: []string{"--evict-idle", "0"}, want: -1},
		{env: "30s", want: 30 * time.Second},
		{env: "30s", args: []string{"--evict-idle", "2m"}, want: 2 * time.Minute},
	} {
		if tc.env != "" {
			t.Setenv("POPPY_EVICT_IDLE", tc.env)
		}
		cfg, err := parseServe(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%v (POPPY_EVICT_IDLE=%q): %v", tc.args, tc.env, err)
		}
		if got := cfg.appOptions(nil, io.Discard).EvictIdle; got != tc.want {
			t.Errorf("%v (POPPY_EVICT_IDLE=%q): EvictIdle %v, want %v", tc.args, tc.env, got, tc.want)
		}
	}
	if _, err := parseServe([]string{"--evict-idle", "soon"}, io.Discard); err == nil {
		t.Error("--evict-idle soon accepted")
	}
}
