package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

func TestGeneration(t *testing.T) { forEachBackend(t, testGeneration) }

// testGeneration: sign-outs and forgets are counted per person and per
// Company, and a second Store on the same state (another process, another
// replica) reads what the first counted.
func testGeneration(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	s, other := b.openAt(t, where, nil), b.openAt(t, where, nil)
	const iss = "https://auth.example.com"
	if g, err := s.Generation(ctx, iss); err != nil || g != (Generation{}) {
		t.Fatalf("Generation before any = %+v, %v", g, err)
	}
	if g, err := s.CountSignOut(ctx, iss, true); err != nil || g != (Generation{SignOuts: 1}) {
		t.Fatalf("CountSignOut = %+v, %v", g, err)
	}
	if g, err := s.CountSignOut(ctx, iss, false); err != nil || g != (Generation{SignOuts: 2, Unrevoked: 1}) {
		t.Fatalf("CountSignOut unrevoked = %+v, %v", g, err)
	}
	if _, err := s.Forget(ctx, iss); err != nil {
		t.Fatal(err)
	}
	if g, err := other.Generation(ctx, iss); err != nil || g != (Generation{SignOuts: 2, Unrevoked: 1, Forgets: 1}) {
		t.Errorf("Generation through another Store = %+v, %v; want 2 sign-outs, 1 unrevoked, and 1 forget", g, err)
	}
	for _, g := range []func() (Generation, error){
		func() (Generation, error) { return s.Generation(ctx, "https://auth.other.example") },
		func() (Generation, error) { return s.ForUser("alice").Generation(ctx, iss) },
	} {
		if got, err := g(); err != nil || got != (Generation{}) {
			t.Errorf("another Company's or person's generation = %+v, %v", got, err)
		}
	}
	if _, err := s.CountSignOut(ctx, "", true); err == nil {
		t.Error("CountSignOut with no issuer succeeded")
	}
}

func TestForget(t *testing.T) { forEachBackend(t, testForget) }

// testForget: Forget deletes every record of one person at one Company,
// the User ID included, and nothing of another Company's (even one whose
// issuer begins with the same characters) nor of another person's.
func testForget(t *testing.T, b *backend) {
	ctx := context.Background()
	root := b.openNew(t, nil)
	const iss, lookalike = "https://auth.example.com", "https://auth.example.com.evil"
	stores := []*Store{root, root.ForUser("alice")}
	before := map[string]string{}
	for _, s := range stores {
		for _, i := range []string{iss, lookalike} {
			id := fillCompany(t, s, i)
			before[s.User()+" "+i] = id
		}
	}
	f, err := root.Forget(ctx, iss)
	if err != nil {
		t.Fatal(err)
	}
	want := Forgotten{UserID: before[" "+iss], Sessions: 1, AccountTokens: 1, Conversations: 2, SeenEvents: 2, Secrets: 3,
		Generation: Generation{Forgets: 1}}
	if f != want {
		t.Errorf("Forget = %+v, want %+v", f, want)
	}
	if n := countCompany(t, root, iss); n != 0 {
		t.Errorf("%d records left at the forgotten Company", n)
	}
	if seen, _ := root.Seen(ctx, iss, "cnv_1", "evt_1"); seen {
		t.Error("Forget left the seen events")
	}
	if _, err := root.FindUserID(ctx, iss); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindUserID after Forget: %v, want ErrNotFound", err)
	}
	if id, err := root.UserID(ctx, iss); err != nil || id == before[" "+iss] {
		t.Errorf("UserID after Forget = %q, %v: the Company must see a new User", id, err)
	}
	for _, s := range stores {
		for _, i := range []string{iss, lookalike} {
			if s == root && i == iss {
				continue
			}
			if n := countCompany(t, s, i); n != 8 {
				t.Errorf("%q at %s: %d records left, want 7", s.User(), i, n)
			}
			if id, _ := s.FindUserID(ctx, i); id != before[s.User()+" "+i] {
				t.Errorf("%q at %s: User ID changed", s.User(), i)
			}
		}
	}
	if _, _, err := root.Blob(ctx, "catalog "+iss); err != nil {
		t.Errorf("Forget deleted a shared blob: %v", err)
	}
}

// fillCompany gives s's person one of every record at issuer and returns
// the User ID.
func fillCompany(t *testing.T, s *Store, issuer string) string {
	t.Helper()
	ctx := context.Background()
	id, err := s.UserID(ctx, issuer)
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(err)
	check(s.PutSession(ctx, Session{Issuer: issuer, ID: "ses_1", UserID: id}))
	check(s.PutAccountToken(ctx, AccountToken{Issuer: issuer, UserID: id, Account: "default", Token: NewSecretString("rt")}))
	check(s.PutConversation(ctx, Conversation{Issuer: issuer, ID: "cnv_1", Domain: "example.com"}))
	check(s.PutConversation(ctx, Conversation{Issuer: issuer, ID: "cnv_2", Domain: "example.co.uk", ParentID: "cnv_1"}))
	check(s.MarkSeen(ctx, issuer, "cnv_1", "evt_1", "msg_1"))
	check(s.PutSecret(ctx, "dpop/"+issuer+"/"+id, []byte("key")))
	check(s.PutSecret(ctx, "conversation/pending/"+issuer+"/"+id+"/m1", []byte("message")))
	check(s.PutSecret(ctx, "signin/device/"+issuer, []byte("device sign-in")))
	check(s.PutBlob(ctx, "catalog "+issuer, "v", []byte("tools")))
	return id
}

// countCompany counts s's person's records at issuer that fillCompany makes:
// the User ID, a Session, an Account Token, two conversations and three
// secrets.
func countCompany(t *testing.T, s *Store, issuer string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	if _, err := s.FindUserID(ctx, issuer); err == nil {
		n++
	}
	sess, _ := s.Sessions(ctx, issuer)
	n += len(sess)
	for _, c := range mustConversations(t, s) {
		if c.Issuer == issuer {
			n++
		}
	}
	if id, err := s.FindUserID(ctx, issuer); err == nil {
		if toks, _ := s.AccountTokens(ctx, issuer, id); len(toks) == 1 {
			n++
		}
	}
	for _, p := range []string{"dpop/" + issuer + "/", "conversation/pending/" + issuer + "/"} {
		names, _ := s.SecretNames(ctx, p)
		n += len(names)
	}
	if _, err := s.Secret(ctx, "signin/device/"+issuer); err == nil {
		n++
	}
	return n
}

func mustConversations(t *testing.T, s *Store) []Conversation {
	t.Helper()
	c, err := s.Conversations(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestIssuersAndLocalUsers(t *testing.T) { forEachBackend(t, testIssuersAndLocalUsers) }

func testIssuersAndLocalUsers(t *testing.T, b *backend) {
	ctx := context.Background()
	root := b.openNew(t, nil)
	if u, err := root.LocalUsers(ctx); err != nil || len(u) != 0 {
		t.Errorf("LocalUsers of a new state = %q, %v", u, err)
	}
	if _, err := root.UserID(ctx, "https://b.example"); err != nil {
		t.Fatal(err)
	}
	if err := root.PutConversation(ctx, Conversation{Issuer: "https://a.example", ID: "cnv_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.ForUser("alice").UserID(ctx, "https://c.example"); err != nil {
		t.Fatal(err)
	}
	if iss, err := root.Issuers(ctx); err != nil || !slices.Equal(iss, []string{"https://a.example", "https://b.example"}) {
		t.Errorf("Issuers = %q, %v", iss, err)
	}
	if u, err := root.LocalUsers(ctx); err != nil || !slices.Equal(u, []string{"", "alice"}) {
		t.Errorf("LocalUsers = %q, %v", u, err)
	}
	if err := root.PutBlob(ctx, "https://api.example.com/openapi.json", "v", nil); err != nil {
		t.Fatal(err)
	}
	if names, err := root.BlobNames(ctx); err != nil || !slices.Equal(names, []string{"https://api.example.com/openapi.json"}) {
		t.Errorf("BlobNames = %q, %v", names, err)
	}
}

func TestAccountTokenUsed(t *testing.T) { forEachBackend(t, testAccountTokenUsed) }

// testAccountTokenUsed: storing an Account Token is a use, and so is each
// recorded grant.
func testAccountTokenUsed(t *testing.T, b *backend) {
	ctx := context.Background()
	clk := newClock()
	s := b.openNew(t, &Options{Key: testKey, Now: clk.Now})
	const iss = "https://auth.example.com"
	if err := s.PutAccountToken(ctx, AccountToken{Issuer: iss, UserID: "usr_a", Account: "default", Token: NewSecretString("rt")}); err != nil {
		t.Fatal(err)
	}
	first, err := s.AccountToken(ctx, iss, "usr_a", "default")
	if err != nil || first.UsedAt.IsZero() {
		t.Fatalf("UsedAt after Put = %v, %v", first.UsedAt, err)
	}
	if err := s.AccountTokenUsed(ctx, iss, "usr_a", "default"); err != nil {
		t.Fatal(err)
	}
	later, _ := s.AccountToken(ctx, iss, "usr_a", "default")
	if !later.UsedAt.After(first.UsedAt) || later.UsedAt.Location() != time.UTC {
		t.Errorf("UsedAt after a use = %v, want after %v", later.UsedAt, first.UsedAt)
	}
	if err := s.AccountTokenUsed(ctx, iss, "usr_b", "default"); err != nil {
		t.Errorf("a use of a missing token: %v", err)
	}
}
