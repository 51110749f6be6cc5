package main

import (
	"crypto/rand"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newKey is a fresh state key for POPPY_STATE_KEY.
func newKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// TestServeStartupErrors: what stops serve from starting is one line on
// stderr saying what is wrong and what to do, with exit code 1. The old
// code panicked with a nil pointer (the deferred close of a nil app) for
// every one of these and hid the reason.
func TestServeStartupErrors(t *testing.T) {
	t.Parallel()
	state, key := t.TempDir(), newKey()
	noKeychain := "DBUS_SESSION_BUS_ADDRESS="
	if _, errOut, code := runBinary(t, []string{"POPPY_STATE_KEY=" + key}, "init", "--state-dir", state, "--out", t.TempDir(),
		"--client-id", "https://agent.test/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	keyless := t.TempDir() // a state whose key file is gone
	if _, errOut, code := runBinary(t, []string{"POPPY_STATE_KEY=", noKeychain}, "init", "--state-dir", keyless, "--out", t.TempDir(),
		"--client-id", "https://agent.test/agent.json"); code != 0 {
		t.Fatalf("init: %s", errOut)
	}
	if err := os.Remove(filepath.Join(keyless, "state.key")); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		env  []string
		args []string
		want []string
	}{
		"wrong state key": {[]string{"POPPY_STATE_KEY=" + newKey()}, []string{"--state-dir", state},
			[]string{"does not open the state in " + state, "set POPPY_STATE_KEY to the key it was made with"}},
		"short state key": {[]string{"POPPY_STATE_KEY=c2hvcnQ"}, []string{"--state-dir", state},
			[]string{"POPPY_STATE_KEY is not a state key", "head -c 32 /dev/urandom | base64"}},
		"missing state key": {[]string{"POPPY_STATE_KEY=", noKeychain}, []string{"--state-dir", keyless},
			[]string{"cannot be found", "state.key", "another --state-dir"}},
		"busy --pages-addr": {[]string{"POPPY_STATE_KEY=" + key}, []string{"--state-dir", state, "--pages-addr", busy.Addr().String()},
			[]string{"cannot listen on --pages-addr " + busy.Addr().String(), "leave --pages-addr out"}},
		"--store not PostgreSQL": {[]string{"POPPY_STATE_KEY=" + key}, []string{"--store", "mysql://u:hunter2@db.test/poppy"},
			[]string{"--store must be a postgres:// URL", "leave --store out"}},
		"--store without a shared key": {[]string{"POPPY_STATE_KEY="}, []string{"--store", "postgres://u:hunter2@db.test/poppy"},
			[]string{"PostgreSQL needs POPPY_STATE_KEY", "every replica", "head -c 32 /dev/urandom | base64"}},
		"busy --http": {[]string{"POPPY_STATE_KEY=" + key}, []string{"--state-dir", state, "--http", busy.Addr().String()},
			[]string{"cannot listen on --http " + busy.Addr().String(), "pick another port"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, errOut, code := runBinary(t, tc.env, append([]string{"serve"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			last := lines[len(lines)-1]
			if code != 1 || strings.Contains(errOut, "panic") || strings.Contains(errOut, "goroutine") || !strings.HasPrefix(last, "poppy-mcp serve: ") {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			if strings.Contains(errOut, "hunter2") {
				t.Errorf("stderr shows the database password: %s", errOut)
			}
			for _, want := range tc.want {
				if !strings.Contains(last, want) {
					t.Errorf("%q does not say %q", last, want)
				}
			}
		})
	}
}
