package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestUsersKeptApart(t *testing.T) { forEachBackend(t, testUsersKeptApart) }

// testUsersKeptApart: two people (and the default user) use the same
// issuer, Session ID, conversation ID, event ID, secret name and lease
// name, and never see each other's records. On the code before people were
// kept apart every write of one replaced the other's.
func testUsersKeptApart(t *testing.T, b *backend) {
	ctx := context.Background()
	root := b.openNew(t, nil)
	alice, bob := root.ForUser("alice"), root.ForUser("bob")
	users := map[string]*Store{"": root, "alice": alice, "bob": bob}
	const iss, conv = "https://auth.example.com", "cnv_1"
	ids := map[string]string{}
	for name, s := range users {
		if s.User() != name {
			t.Fatalf("User() = %q, want %q", s.User(), name)
		}
		id, err := s.UserID(ctx, iss)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
		putEverything(t, s, name, id)
	}
	// Poppy 0.1 §4.2: a User ID per person at each Company.
	if ids[""] == ids["alice"] || ids["alice"] == ids["bob"] || ids[""] == ids["bob"] {
		t.Fatalf("two people share a User ID at one Company: %v", ids)
	}
	for name, s := range users {
		checkOwn(t, s, name, ids[name])
	}
	// Deleting one person's records leaves the others'.
	if err := alice.DeleteSession(ctx, iss, "ses_1"); err != nil {
		t.Fatal(err)
	}
	if err := alice.DeleteConversation(ctx, iss, conv); err != nil {
		t.Fatal(err)
	}
	if err := alice.DeleteSecret(ctx, "dpop/x"); err != nil {
		t.Fatal(err)
	}
	if err := alice.DeleteAccountToken(ctx, iss, "usr_same", "personal"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "bob"} {
		checkOwn(t, users[name], name, ids[name])
	}
	// Shared records are shared.
	if err := alice.PutBlob(ctx, "catalog", "v1", []byte("tools")); err != nil {
		t.Fatal(err)
	}
	if _, data, err := bob.Blob(ctx, "catalog"); err != nil || string(data) != "tools" {
		t.Errorf("a blob put through one view is not seen through another: %q, %v", data, err)
	}
}

// putEverything stores one record of every per-person kind for user, under
// the same names for everyone.
func putEverything(t *testing.T, s *Store, user, userID string) {
	t.Helper()
	ctx := context.Background()
	const iss = "https://auth.example.com"
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(s.PutSecret(ctx, "dpop/x", []byte("key of "+user)))
	check(s.PutSession(ctx, Session{Issuer: iss, ID: "ses_1", UserID: userID, Account: "acct of " + user}))
	check(s.PutAccountToken(ctx, AccountToken{Issuer: iss, UserID: "usr_same", Account: "personal",
		Token: NewSecretString("token of " + user)}))
	check(s.PutConversation(ctx, Conversation{Issuer: iss, ID: "cnv_1", Domain: "example.com", Cursor: "cursor of " + user}))
	if user == "alice" {
		check(s.MarkSeen(ctx, iss, "cnv_1", "evt_alice"))
	}
	_, err := s.AcquireLease(ctx, "account-token same", "holder of "+user, time.Minute)
	check(err)
}

// checkOwn checks that s sees its user's records, and no one else's.
func checkOwn(t *testing.T, s *Store, user, userID string) {
	t.Helper()
	ctx := context.Background()
	const iss = "https://auth.example.com"
	if v, err := s.Secret(ctx, "dpop/x"); err != nil || string(v) != "key of "+user {
		t.Errorf("%q: Secret = %q, %v", user, v, err)
	}
	if names, err := s.SecretNames(ctx, "dpop/"); err != nil || !slices.Equal(names, []string{"dpop/x"}) {
		t.Errorf("%q: SecretNames = %q, %v", user, names, err)
	}
	if sess, err := s.Sessions(ctx, iss); err != nil || len(sess) != 1 || sess[0].Account != "acct of "+user || sess[0].UserID != userID {
		t.Errorf("%q: Sessions = %+v, %v", user, sess, err)
	}
	if tok, err := s.AccountToken(ctx, iss, "usr_same", "personal"); err != nil || tok.Token.RevealString() != "token of "+user {
		t.Errorf("%q: AccountToken = %v, %v", user, tok.Token.RevealString(), err)
	}
	if c, err := s.Conversations(ctx, ""); err != nil || len(c) != 1 || c[0].Cursor != "cursor of "+user {
		t.Errorf("%q: Conversations = %+v, %v", user, c, err)
	}
	if seen, err := s.Seen(ctx, iss, "cnv_1", "evt_alice"); err != nil || seen != (user == "alice") {
		t.Errorf("%q: Seen(evt_alice) = %v, %v", user, seen, err)
	}
	if _, err := s.AcquireLease(ctx, "account-token same", "holder of "+user, time.Minute); err != nil {
		t.Errorf("%q: the own lease is not held by its holder: %v", user, err)
	}
}

func TestUsersCiphertextsBound(t *testing.T) { forEachBackend(t, testUsersCiphertextsBound) }

// testUsersCiphertextsBound: a ciphertext copied from one person's row to
// another's, with a database write, does not decrypt.
func testUsersCiphertextsBound(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	root := b.openAt(t, where, nil)
	const iss = "https://auth.example.com"
	for _, u := range []string{"", "alice", "bob"} {
		s := root.ForUser(u)
		if err := s.PutSecret(ctx, "k", []byte("secret of "+u)); err != nil {
			t.Fatal(err)
		}
		if err := s.PutAccountToken(ctx, AccountToken{Issuer: iss, UserID: "usr_1", Account: "a",
			Token: NewSecretString("token of " + u)}); err != nil {
			t.Fatal(err)
		}
	}
	db := b.raw(t, where)
	mustExec(t, db, `UPDATE secrets SET value = (SELECT value FROM secrets WHERE local_user = 'alice') WHERE local_user = 'bob'`)
	mustExec(t, db, `UPDATE account_tokens SET token = (SELECT token FROM account_tokens WHERE local_user = 'alice') WHERE local_user = ''`)
	if _, err := root.ForUser("bob").Secret(ctx, "k"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("alice's secret copied to bob: err = %v, want ErrWrongKey", err)
	}
	if _, err := root.AccountToken(ctx, iss, "usr_1", "a"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("alice's Account Token copied to the default user: err = %v, want ErrWrongKey", err)
	}
	if v, err := root.ForUser("alice").Secret(ctx, "k"); err != nil || string(v) != "secret of alice" {
		t.Errorf("alice's own secret = %q, %v", v, err)
	}
}

// TestSingleUserStateMigrates: a state written before people were kept
// apart (SQLite schema version 3) opens with everything it held belonging
// to the default user, its secrets decrypting as before, and nothing of it
// visible to another user.
func TestSingleUserStateMigrates(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	db := sqliteBackend.raw(t, dir)
	// Back to version 3, as an older poppy-mcp left it.
	for _, table := range []string{"secrets", "user_ids", "sessions", "account_tokens", "conversations", "seen_events", "leases", "meta", "blobs", "agent_metadata", "generations", "lease_tokens", "pages", "mcp_sessions"} {
		mustExec(t, db, `DROP TABLE `+table)
	}
	mustExec(t, db, `DELETE FROM schema_version`)
	s.Close()
	if err := migrateTo(ctx, db, sqliteDialect, time.Now(), 3); err != nil {
		t.Fatal(err)
	}
	aead, err := newAEAD(testKey)
	if err != nil {
		t.Fatal(err)
	}
	const iss = "https://auth.example.com"
	sqliteBackend.exec(t, db, `INSERT INTO meta (name, value) VALUES (?, ?)`, metaKeyCheck,
		sealWith(aead, []byte(keyCheckPlaintext), recordAAD("key-check")))
	sqliteBackend.exec(t, db, `INSERT INTO secrets (name, value, updated_at) VALUES (?, ?, 1)`, "agent-key",
		sealWith(aead, []byte("the signing key"), recordAAD("secret", "agent-key")))
	sqliteBackend.exec(t, db, `INSERT INTO user_ids (issuer, user_id, created_at) VALUES (?, 'usr_old', 1)`, iss)
	sqliteBackend.exec(t, db, `INSERT INTO account_tokens (issuer, user_id, account, scopes, expires_at, token, updated_at)
		VALUES (?, 'usr_old', 'personal', 'poppy:read', 0, ?, 1)`, iss,
		sealWith(aead, []byte("rt-old"), recordAAD("account-token", iss, "usr_old", "personal")))
	sqliteBackend.exec(t, db, `INSERT INTO conversations (issuer, id, domain, user_id, account, parent_id, cursor, status, responder, closed, updated_at)
		VALUES (?, 'cnv_old', 'example.com', 'usr_old', '', '', 'c7', 'open', '', 0, 1)`, iss)
	sqliteBackend.exec(t, db, `INSERT INTO seen_events (issuer, conversation_id, event_id, seen_at) VALUES (?, 'cnv_old', 'evt_1', 1)`, iss)

	s = openTest(t, dir, nil)
	if v, err := s.Secret(ctx, "agent-key"); err != nil || string(v) != "the signing key" {
		t.Errorf("agent-key after migrating = %q, %v", v, err)
	}
	if id, err := s.UserID(ctx, iss); err != nil || id != "usr_old" {
		t.Errorf("UserID after migrating = %q, %v; want usr_old", id, err)
	}
	if tok, err := s.AccountToken(ctx, iss, "usr_old", "personal"); err != nil || tok.Token.RevealString() != "rt-old" {
		t.Errorf("AccountToken after migrating = %q, %v", tok.Token.RevealString(), err)
	}
	if c, err := s.Conversation(ctx, iss, "cnv_old"); err != nil || c.Cursor != "c7" {
		t.Errorf("Conversation after migrating = %+v, %v", c, err)
	}
	if seen, err := s.Seen(ctx, iss, "cnv_old", "evt_1"); err != nil || !seen {
		t.Errorf("Seen after migrating = %v, %v", seen, err)
	}
	other := s.ForUser("someone")
	if _, err := other.Secret(ctx, "agent-key"); !errors.Is(err, ErrNotFound) {
		t.Errorf("another user reads the default user's secret: %v", err)
	}
	if id, err := other.UserID(ctx, iss); err != nil || id == "usr_old" {
		t.Errorf("another user's UserID = %q, %v; want a new one", id, err)
	}
}
