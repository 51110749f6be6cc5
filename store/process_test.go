package store

import (
	"bufio"
	"bytes"
	"context"
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
	helperEnv    = "POPPY_STORE_HELPER_DIR"
	helperIDEnv  = "POPPY_STORE_HELPER_ID"
	helperPrefix = "HELPER-RESULT "
	helperRounds = 25
	helperProcs  = 4
)

func helperIssuer(i int) string { return fmt.Sprintf("https://auth.company-%d.example", i) }

// helperResult is what a helper process reports on stdout.
type helperResult struct {
	KeySource string
	UserIDs   []string // by issuer index
	Written   []string // values it stored in the shared secret
}

// TestHelperProcess is not a test: it is the body of a helper process
// started by TestProcessesShareOneDir, and does nothing otherwise.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("only runs as a helper process")
	}
	res, err := helperMain(dir, os.Getenv(helperIDEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(res)
	fmt.Println(helperPrefix + string(b))
	os.Exit(0)
}

// helperMain waits for the start signal, then races the other helpers on
// a fresh directory: migrations, state key creation, UserID and PutSecret.
func helperMain(dir, id string) (*helperResult, error) {
	ctx := context.Background()
	start := filepath.Join(dir, "..", "start")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(start); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no start signal")
		}
	}
	s, err := Open(ctx, dir, &Options{Keychain: NoKeychain{}})
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
	}
	return res, nil
}

// TestProcessesShareOneDir starts several processes on one new state
// directory at once, as an assistant starting several poppy-mcp servers
// does. They must agree on every User ID and on the state key, and none
// may fail with "database is locked".
func TestProcessesShareOneDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Setenv(envKey, "") // the helpers race on creating state.key
	root := t.TempDir()
	dir := filepath.Join(root, "state")
	outs := make([]bytes.Buffer, helperProcs)
	errs := make([]bytes.Buffer, helperProcs)
	cmds := make([]*exec.Cmd, helperProcs)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+dir, fmt.Sprintf("%s=%d", helperIDEnv, i))
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
	checkHelpers(t, dir, results)
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
func checkHelpers(t *testing.T, dir string, results []helperResult) {
	t.Helper()
	ctx := context.Background()
	s := openTest(t, dir, &Options{})
	if s.KeySource() != "file" {
		t.Errorf("KeySource after the race = %q, want file", s.KeySource())
	}
	written := map[string]bool{}
	for i, res := range results {
		if res.KeySource != "file" {
			t.Errorf("helper %d: KeySource = %q, want file", i, res.KeySource)
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
}
