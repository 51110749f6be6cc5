package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testKey is a fixed state key for tests that do not test key sources.
var testKey = bytes.Repeat([]byte{0x42}, keySize)

// clock is a test clock that moves forward one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 10, 8, 19, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func TestSecretRoundTrip(t *testing.T) { forEachBackend(t, testSecretRoundTrip) }

func testSecretRoundTrip(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.openNew(t, nil)
	if s.KeySource() != "option" {
		t.Errorf("KeySource = %q, want option", s.KeySource())
	}
	if _, err := s.Secret(ctx, "agent-key"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Secret before Put: err = %v, want ErrNotFound", err)
	}
	for _, v := range [][]byte{[]byte("first"), []byte("second, replacing"), {}, {0, 1, 2, 255}} {
		if err := s.PutSecret(ctx, "agent-key", v); err != nil {
			t.Fatal(err)
		}
		got, err := s.Secret(ctx, "agent-key")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, v) {
			t.Errorf("Secret = %q, want %q", got, v)
		}
	}
	if err := s.DeleteSecret(ctx, "agent-key"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Secret(ctx, "agent-key"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Secret after Delete: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteSecret(ctx, "agent-key"); err != nil {
		t.Errorf("second DeleteSecret: %v", err)
	}
	if err := s.PutSecret(ctx, "", []byte("x")); err == nil {
		t.Error("PutSecret with an empty name succeeded")
	}
}

// TestSecretNames: names are listed by prefix, taken literally (no
// wildcard in it matches more).
func TestSecretNames(t *testing.T) { forEachBackend(t, testSecretNames) }

func testSecretNames(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.openNew(t, nil)
	for _, name := range []string{"pending/a_1/x", "pending/a_1/y", "pending/aX1/z", "other"} {
		if err := s.PutSecret(ctx, name, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.SecretNames(ctx, "pending/a_1/")
	if err != nil || !slices.Equal(got, []string{"pending/a_1/x", "pending/a_1/y"}) {
		t.Errorf("SecretNames = %q, %v", got, err)
	}
	if got, err := s.SecretNames(ctx, "none/"); err != nil || len(got) != 0 {
		t.Errorf("SecretNames of no secret = %q, %v", got, err)
	}
}

// TestSecretHolders: the people who keep a secret under a prefix, found
// across every person's view with one query; none of another prefix.
func TestSecretHolders(t *testing.T) { forEachBackend(t, testSecretHolders) }

func testSecretHolders(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.openNew(t, nil)
	for user, name := range map[string]string{"": "flow/x", "dana": "flow/y", "sam": "other/z"} {
		if err := s.ForUser(user).PutSecret(ctx, name, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, view := range []*Store{s, s.ForUser("sam")} { // whichever view asks: the whole state
		if got, err := view.SecretHolders(ctx, "flow/"); err != nil || !slices.Equal(got, []string{"", "dana"}) {
			t.Errorf("SecretHolders = %q, %v", got, err)
		}
	}
}

func TestUserID(t *testing.T) { forEachBackend(t, testUserID) }

func testUserID(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	a, err := s.UserID(ctx, "https://auth.example.com")
	if err != nil {
		t.Fatal(err)
	}
	// Poppy 0.1 §4.2: opaque, at least 128 random bits.
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(a, "usr_"))
	if !strings.HasPrefix(a, "usr_") || err != nil || len(raw) != 16 {
		t.Errorf("UserID = %q, want usr_ + base64url of 16 bytes", a)
	}
	again, err := s.UserID(ctx, "https://auth.example.com")
	if err != nil || again != a {
		t.Errorf("second UserID = %q, %v; want %q", again, err, a)
	}
	other, err := s.UserID(ctx, "https://auth.other.example")
	if err != nil || other == a {
		t.Errorf("UserID for another issuer = %q, %v; want a different ID from %q", other, err, a)
	}
	if _, err := s.UserID(ctx, ""); err == nil {
		t.Error("UserID with an empty issuer succeeded")
	}
	s.Close()
	s2 := b.openAt(t, where, nil)
	if got, err := s2.UserID(ctx, "https://auth.example.com"); err != nil || got != a {
		t.Errorf("UserID after reopen = %q, %v; want %q", got, err, a)
	}
}

func TestSessionRoundTrip(t *testing.T) { forEachBackend(t, testSessionRoundTrip) }

func testSessionRoundTrip(t *testing.T, b *backend) {
	ctx := context.Background()
	clk := newClock()
	s := b.openNew(t, &Options{Key: testKey, Now: clk.Now})
	const iss = "https://auth.example.com"
	exp := time.Date(2026, 10, 8, 20, 0, 0, 123, time.UTC)
	old := Session{Issuer: iss, UserID: "usr_a", ID: "ses_1", Domain: "example.com", ExpiresAt: exp}
	signedIn := Session{Issuer: iss, UserID: "usr_a", ID: "ses_2", Domain: "example.de",
		Account: "acct_1", SignedIn: true, Scopes: []string{"poppy:read", "orders:write"}}
	other := Session{Issuer: "https://auth.other.example", UserID: "usr_b", ID: "ses_1"}
	for _, sess := range []Session{old, signedIn, other} {
		if err := s.PutSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Session(ctx, iss, "ses_2")
	if err != nil {
		t.Fatal(err)
	}
	if got.UpdatedAt.IsZero() {
		t.Error("UpdatedAt not set")
	}
	signedIn.UpdatedAt = got.UpdatedAt
	if d := cmp.Diff(signedIn, got); d != "" {
		t.Errorf("Session (-want +got):\n%s", d)
	}
	list, err := s.Sessions(ctx, iss)
	if err != nil {
		t.Fatal(err)
	}
	if ids := sessionIDs(list); !cmp.Equal(ids, []string{"ses_2", "ses_1"}) {
		t.Errorf("Sessions = %v, want newest first [ses_2 ses_1]", ids)
	}
	if !list[1].ExpiresAt.Equal(exp) {
		t.Errorf("ExpiresAt = %v, want %v", list[1].ExpiresAt, exp)
	}
	// Storing ses_1 again replaces it and makes it the newest.
	old.SignedIn, old.Account = true, "acct_2"
	if err := s.PutSession(ctx, old); err != nil {
		t.Fatal(err)
	}
	list, _ = s.Sessions(ctx, iss)
	if ids := sessionIDs(list); !cmp.Equal(ids, []string{"ses_1", "ses_2"}) || list[0].Account != "acct_2" {
		t.Errorf("after replace: Sessions = %v, first account %q", ids, list[0].Account)
	}
	if err := s.DeleteSession(ctx, iss, "ses_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, iss, "ses_1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Session after delete: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Session(ctx, "https://auth.other.example", "ses_1"); err != nil {
		t.Errorf("deleting ses_1 at one issuer touched another: %v", err)
	}
	if err := s.PutSession(ctx, Session{Issuer: iss, ID: "x", Scopes: []string{"a b"}}); err == nil {
		t.Error("PutSession accepted a scope with a space")
	}
}

func sessionIDs(list []Session) []string {
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestAccountTokenRoundTrip(t *testing.T) { forEachBackend(t, testAccountTokenRoundTrip) }

func testAccountTokenRoundTrip(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.openNew(t, nil)
	const iss = "https://auth.example.com"
	personal := AccountToken{Issuer: iss, UserID: "usr_a", Account: "personal",
		Scopes: []string{"poppy:read"}, Token: NewSecretString("rt-personal-1")}
	business := AccountToken{Issuer: iss, UserID: "usr_a", Account: "business",
		ExpiresAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), Token: NewSecretString("rt-business")}
	for _, tok := range []AccountToken{personal, business} {
		if err := s.PutAccountToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	// Poppy 0.1 §4.8: "The Personal Agent then MUST use the new one from then on."
	personal.Token, personal.Scopes = NewSecretString("rt-personal-2"), []string{"poppy:read", "poppy:write"}
	if err := s.PutAccountToken(ctx, personal); err != nil {
		t.Fatal(err)
	}
	got, err := s.AccountTokens(ctx, iss, "usr_a")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]AccountToken{business, personal}, got, cmpopts.IgnoreFields(AccountToken{}, "UsedAt")); d != "" {
		t.Errorf("AccountTokens (-want +got):\n%s", d)
	}
	one, err := s.AccountToken(ctx, iss, "usr_a", "personal")
	if err != nil || one.Token.RevealString() != "rt-personal-2" {
		t.Errorf("AccountToken = %v, %v", one.Token.RevealString(), err)
	}
	if err := s.DeleteAccountToken(ctx, iss, "usr_a", "personal"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AccountToken(ctx, iss, "usr_a", "personal"); !errors.Is(err, ErrNotFound) {
		t.Errorf("AccountToken after delete: err = %v, want ErrNotFound", err)
	}
	if got, _ := s.AccountTokens(ctx, iss, "usr_other"); len(got) != 0 {
		t.Errorf("AccountTokens of another user = %v", got)
	}
	if err := s.PutAccountToken(ctx, AccountToken{Issuer: iss, UserID: "usr_a"}); err == nil {
		t.Error("PutAccountToken without Account succeeded")
	}
}

func TestConversationRoundTrip(t *testing.T) { forEachBackend(t, testConversationRoundTrip) }

func testConversationRoundTrip(t *testing.T, b *backend) {
	ctx := context.Background()
	clk := newClock()
	s := b.openNew(t, &Options{Key: testKey, Now: clk.Now})
	const iss = "https://auth.example.com"
	closed := Conversation{ID: "cnv_1", Domain: "example.com", Issuer: iss, UserID: "usr_a",
		Cursor: "c1", Status: "closed", Closed: true}
	open := Conversation{ID: "cnv_2", Domain: "example.com", Issuer: iss, UserID: "usr_a",
		Account: "personal", ParentID: "cnv_1", Cursor: "c9", Status: "open", Responder: "agent"}
	// Another Company may choose the same conversation ID.
	elsewhere := Conversation{ID: "cnv_1", Domain: "other.example", Issuer: "https://auth.other.example"}
	for _, c := range []Conversation{open, closed, elsewhere} {
		if err := s.PutConversation(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Conversation(ctx, iss, "cnv_2")
	if err != nil {
		t.Fatal(err)
	}
	open.UpdatedAt = got.UpdatedAt
	if d := cmp.Diff(open, got); d != "" {
		t.Errorf("Conversation (-want +got):\n%s", d)
	}
	list, err := s.Conversations(ctx, "example.com")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "cnv_2" || list[1].ID != "cnv_1" || list[1].Domain != "example.com" {
		t.Errorf("Conversations(example.com) = %+v, want open cnv_2 then closed cnv_1", list)
	}
	if all, _ := s.Conversations(ctx, ""); len(all) != 3 || all[len(all)-1].Closed != true {
		t.Errorf("Conversations(\"\") = %+v, want 3 with the closed one last", all)
	}
	if err := s.MarkSeen(ctx, iss, "cnv_2", "evt_1", "evt_2"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkSeen(ctx, iss, "cnv_2", "evt_2", "evt_3"); err != nil {
		t.Fatal(err)
	}
	for ev, want := range map[string]bool{"evt_1": true, "evt_2": true, "evt_3": true, "evt_4": false} {
		if seen, err := s.Seen(ctx, iss, "cnv_2", ev); err != nil || seen != want {
			t.Errorf("Seen(%s) = %v, %v; want %v", ev, seen, err, want)
		}
	}
	if seen, _ := s.Seen(ctx, "https://auth.other.example", "cnv_2", "evt_1"); seen {
		t.Error("an event seen at one Company counts as seen at another")
	}
	if err := s.DeleteConversation(ctx, iss, "cnv_2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conversation(ctx, iss, "cnv_2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Conversation after delete: err = %v, want ErrNotFound", err)
	}
	if seen, _ := s.Seen(ctx, iss, "cnv_2", "evt_1"); seen {
		t.Error("DeleteConversation left its seen events")
	}
}

func TestBlobRoundTrip(t *testing.T) { forEachBackend(t, testBlobRoundTrip) }

func testBlobRoundTrip(t *testing.T, b *backend) {
	ctx := context.Background()
	s := b.openNew(t, nil)
	const name = "openapi:https://api.example.com/openapi.json"
	if _, _, err := s.Blob(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Blob before Put: err = %v, want ErrNotFound", err)
	}
	for i, data := range [][]byte{[]byte("catalog v1"), []byte("catalog v2"), nil} {
		etag := `"` + string(rune('a'+i)) + `"`
		if err := s.PutBlob(ctx, name, etag, data); err != nil {
			t.Fatal(err)
		}
		v, got, err := s.Blob(ctx, name)
		if err != nil || v != etag || !bytes.Equal(got, data) {
			t.Errorf("Blob = %q, %q, %v; want %q, %q", v, got, err, etag, data)
		}
	}
	if err := s.DeleteBlob(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Blob(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Errorf("Blob after delete: err = %v, want ErrNotFound", err)
	}
}

func TestPermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix permissions")
	}
	t.Setenv(envKey, "")
	dir := filepath.Join(t.TempDir(), "state", "poppy-mcp")
	s := openTest(t, dir, &Options{})
	if err := s.PutSecret(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	checkMode(t, dir, 0o700)
	for _, f := range []string{dbFileName, dbFileName + "-wal", dbFileName + "-shm", keyFileName} {
		checkMode(t, filepath.Join(dir, f), 0o600)
	}
	s.Close()

	// Looser permissions left by something else are tightened on Open.
	for p, mode := range map[string]os.FileMode{dir: 0o755, filepath.Join(dir, dbFileName): 0o644,
		filepath.Join(dir, keyFileName): 0o644} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	s = openTest(t, dir, &Options{})
	if s.KeySource() != "file" {
		t.Errorf("KeySource = %q, want file", s.KeySource())
	}
	checkMode(t, dir, 0o700)
	checkMode(t, filepath.Join(dir, dbFileName), 0o600)
	checkMode(t, filepath.Join(dir, keyFileName), 0o600)
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %o, want %o", filepath.Base(path), got, want)
	}
}

func TestMigrationsIdempotent(t *testing.T) { forEachBackend(t, testMigrationsIdempotent) }

func testMigrationsIdempotent(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s := b.openAt(t, where, nil)
	if err := s.PutBlob(ctx, "b", "1", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 3 {
		b.openAt(t, where, nil).Close()
	}
	db := b.raw(t, where)
	var n, max int
	if err := db.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if want := len(b.d.migrations); n != want || max != want {
		t.Errorf("schema_version has %d rows, max %d; want %d", n, max, want)
	}
	if _, data, err := b.openAt(t, where, nil).Blob(ctx, "b"); err != nil || string(data) != "kept" {
		t.Errorf("Blob after reopen = %q, %v", data, err)
	}

	// A database from a newer poppy-mcp is refused, not mangled.
	b.exec(t, db, `INSERT INTO schema_version (version, applied_at) VALUES (?, 0)`, len(b.d.migrations)+1)
	_, err := b.open(ctx, where, &Options{Key: testKey})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a newer schema: err = %v, want a 'newer' error", err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/xdg/state")
	if d, err := DefaultDir(); err != nil || d != filepath.Join("/xdg/state", "poppy-mcp") {
		t.Errorf("DefaultDir with XDG_STATE_HOME = %q, %v", d, err)
	}
	t.Setenv("XDG_STATE_HOME", "relative/ignored")
	t.Setenv("HOME", "/home/u")
	if d, err := DefaultDir(); err != nil || d != filepath.Join("/home/u", ".local", "state", "poppy-mcp") {
		t.Errorf("DefaultDir without XDG_STATE_HOME = %q, %v", d, err)
	}
}

// TestOpenOddPath opens a directory whose name holds characters that mean
// something in a URI: the DSN must escape them, not cut the path short.
func TestOpenOddPath(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a dir?with=#odd%20chars")
	s := openTest(t, dir, nil)
	if err := s.PutBlob(ctx, "b", "1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, dbFileName)); err != nil {
		t.Fatalf("the database is not in %q: %v", dir, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("Open created %d entries next to the state directory, want only it", len(entries))
	}
	_, err := s.Secret(ctx, "missing")
	if !errors.Is(err, ErrNotFound) || err.Error() != `store: secret "missing" not found` {
		t.Errorf("Secret(missing) = %v", err)
	}
}

// TestCheck: the health check answers while the database does, and fails
// once the Store is closed, on both backends.
func TestCheck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := b.openNew(t, nil)
		ctx := context.Background()
		if err := s.ForUser("someone").Check(ctx); err != nil {
			t.Fatalf("Check on an open store: %v", err)
		}
		s.Close()
		if err := s.Check(ctx); err == nil {
			t.Fatal("Check on a closed store: no error")
		}
	})
}
