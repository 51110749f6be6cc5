package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helper processes are this test binary run again with these variables set.
const (
	helperEnv        = "POPPY_STORE_HELPER_DIR" // the state: a directory, or a PostgreSQL DSN
	helperBackendEnv = "POPPY_STORE_HELPER_BACKEND"
	helperIDEnv      = "POPPY_STORE_HELPER_ID"
	helperStartEnv   = "POPPY_STORE_HELPER_START" // the file whose creation starts the race
	helperPrefix     = "HELPER-RESULT "
	helperRounds     = 25
	helperProcs      = 4
)

func helperIssuer(i int) string { return fmt.Sprintf("https://auth.company-%d.example", i) }

// helperResult is what a helper process reports on stdout.
type helperResult struct {
	KeySource string
	UserIDs   []string // by issuer index
	Written   []string // values it stored in the shared secret
}

// TestHelperProcess is not a test: it is the body of a helper process
// started by TestProcessesShareOneState, and does nothing otherwise.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("only runs as a helper process")
	}
	b := sqliteBackend
	if os.Getenv(helperBackendEnv) == postgresBackend.name {
		b = postgresBackend
	}
	res, err := helperMain(b, dir, os.Getenv(helperIDEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(res)
	fmt.Println(helperPrefix + string(out))
	os.Exit(0)
}

// helperMain waits for the start signal, then races the other helpers on
// a fresh state: migrations, state key creation (SQLite), UserID, PutSecret
// and a lease.
func helperMain(b *backend, where, id string) (*helperResult, error) {
	ctx := context.Background()
	start := os.Getenv(helperStartEnv)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(start); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no start signal")
		}
	}
	s, err := b.open(ctx, where, &Options{Keychain: NoKeychain{}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res := &helperResult{KeySource: s.KeySource()}
	for i := range helperRounds {
		uid, err := s.UserID(ctx, helperIssuer(i))
		if err != nil {
			return nil, err
		}
		res.UserIDs = append(res.UserIDs, uid)
		v := fmt.Sprintf("from helper %s round %d", id, i)
		if err := s.PutSecret(ctx, "shared", []byte(v)); err != nil {
			return nil, err
		}
		res.Written = append(res.Written, v)
		if _, err := s.Secret(ctx, "shared"); err != nil {
			return nil, err
		}
		if err := s.MarkSeen(ctx, "https://auth.example.com", "cnv_1", fmt.Sprintf("evt_%d", i)); err != nil {
			return nil, err
		}
		if err := leaseTurn(ctx, s, "counter", fmt.Sprintf("helper %s round %d", id, i)); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func TestProcessesShareOneState(t *testing.T) { forEachBackend(t, testProcessesShareOneState) }

// testProcessesShareOneState starts several processes on one new state at
// once, as an assistant starting several poppy-mcp servers does, or a
// hosted deployment its replicas. They must agree on every User ID and on
// the state key, take turns under a lease, and none may fail with
// "database is locked" or a migration's conflict.
func testProcessesShareOneState(t *testing.T, b *backend) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "state")
	wantSource := "file"
	t.Setenv(envKey, "") // on SQLite, the helpers race on creating state.key
	if b == postgresBackend {
		dir, wantSource = b.fresh(t), "env"
		t.Setenv(envKey, base64.StdEncoding.EncodeToString(testKey)) // one key for every replica
	}
	outs := make([]bytes.Buffer, helperProcs)
	errs := make([]bytes.Buffer, helperProcs)
	cmds := make([]*exec.Cmd, helperProcs)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir, fmt.Sprintf("%s=%d", helperIDEnv, i),
			helperBackendEnv+"="+b.name, helperStartEnv+"="+filepath.Join(root, "start"))
		cmd.Stdout, cmd.Stderr = &outs[i], &errs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	if err := os.WriteFile(filepath.Join(root, "start"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	waitErrs := make([]error, helperProcs)
	for i, cmd := range cmds {
		wg.Go(func() { waitErrs[i] = cmd.Wait() })
	}
	wg.Wait()
	var results []helperResult
	for i := range cmds {
		if waitErrs[i] != nil {
			t.Fatalf("helper %d: %v\nstderr: %s\nstdout: %s", i, waitErrs[i], &errs[i], &outs[i])
		}
		res, err := parseHelper(outs[i].String())
		if err != nil {
			t.Fatalf("helper %d: %v\nstdout: %s", i, err, &outs[i])
		}
		results = append(results, res)
	}
	checkHelpers(t, b, dir, wantSource, results)
}

func parseHelper(out string) (helperResult, error) {
	var res helperResult
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), helperPrefix); ok {
			return res, json.Unmarshal([]byte(line), &res)
		}
	}
	return res, fmt.Errorf("no %q line", helperPrefix)
}

// checkHelpers compares the helpers' results with each other and with the
// state they left.
func checkHelpers(t *testing.T, b *backend, where, wantSource string, results []helperResult) {
	t.Helper()
	ctx := context.Background()
	s := b.openAt(t, where, &Options{})
	if s.KeySource() != wantSource {
		t.Errorf("KeySource after the race = %q, want %s", s.KeySource(), wantSource)
	}
	written := map[string]bool{}
	for i, res := range results {
		if res.KeySource != wantSource {
			t.Errorf("helper %d: KeySource = %q, want %s", i, res.KeySource, wantSource)
		}
		for j, uid := range res.UserIDs {
			if want := results[0].UserIDs[j]; uid != want {
				t.Errorf("helper %d: UserID(%s) = %q, helper 0 got %q", i, helperIssuer(j), uid, want)
			}
		}
		for _, v := range res.Written {
			written[v] = true
		}
	}
	for j := range helperRounds {
		if uid, err := s.UserID(ctx, helperIssuer(j)); err != nil || uid != results[0].UserIDs[j] {
			t.Errorf("UserID(%s) after the race = %q, %v; helpers got %q", helperIssuer(j), uid, err,
				results[0].UserIDs[j])
		}
	}
	v, err := s.Secret(ctx, "shared")
	if err != nil || !written[string(v)] {
		t.Errorf("shared secret after the race = %q, %v; want one of the values written", v, err)
	}
	if seen, err := s.Seen(ctx, "https://auth.example.com", "cnv_1", fmt.Sprintf("evt_%d", helperRounds-1)); err != nil || !seen {
		t.Errorf("Seen after the race = %v, %v", seen, err)
	}
	if v, err := s.Secret(ctx, "counter"); err != nil || string(v) != fmt.Sprint(helperRounds*len(results)) {
		t.Errorf("counter after the race = %q, %v; want %d: two processes held the lease at once",
			v, err, helperRounds*len(results))
	}
}
