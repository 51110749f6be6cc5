package conversation

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// TestWorkersOnPostgres: two Workers, each on a Store of its own over one
// PostgreSQL database (two replicas' pools), compete for a message left
// pending while the Company was down: one of them sends it, under its
// lease on the person's messages, and the Company has it exactly once,
// after one POST per failure and one more. It runs on the real clock (a
// real socket cannot be in a synctest bubble, docs/testing.md).
func TestWorkersOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgSchema(t)
	co := newCompany(t, nil, nil)
	key := bytes.Repeat([]byte{9}, 32)
	var stores [2]*store.Store
	for i := range stores {
		st, err := store.OpenPostgres(context.Background(), dsn, &store.Options{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		stores[i] = st
	}
	on := *co
	on.st = stores[0]
	const failures = 3
	u := leftDown(t, &on, failures, "Gift wrap, please")
	quick := &WorkerOptions{NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(100 * time.Millisecond) }}
	a, b := co.runWorkerWith(t, stores[0], nil, quick), co.runWorkerWith(t, stores[1], nil, quick)
	path := "/poppy/conversations/" + u.ConversationID + "/messages"
	deadline := time.Now().Add(30 * time.Second)
	for len(co.texts(u.ConversationID)) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // a second sender would have sent again by now
	if got := co.texts(u.ConversationID); !slices.Equal(got, []string{"Hello", "Gift wrap, please"}) {
		t.Fatalf("the Company recorded %q, want the message once", got)
	}
	if n := co.srv.Count("api."+co.srv.Domain(), path); n != failures+1 {
		t.Errorf("%d POSTs, want %d", n, failures+1)
	}
	if na, nb := a.opens.Load(), b.opens.Load(); (na == 0) == (nb == 0) {
		t.Errorf("the Workers opened %d and %d Sessions: want one Worker on the person's messages", na, nb)
	}
	r, err := on.tracker(t).Read(context.Background(), u.ConversationID, nil)
	if err != nil || len(r.Resent) != 1 || r.Resent[0].Outcome != ResentDelivered {
		t.Errorf("the person's next call: %+v, %v", r, err)
	}
}

// pgSchema returns a DSN of a new schema in the database
// POPPY_TEST_POSTGRES names, dropped when the test ends, or skips the test
// (fails it with POPPY_REQUIRE_POSTGRES=1) without one.
func pgSchema(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("POPPY_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("POPPY_REQUIRE_POSTGRES") == "1" {
			t.Fatal("POPPY_REQUIRE_POSTGRES=1 but POPPY_TEST_POSTGRES names no database")
		}
		t.Skip("PostgreSQL not tested: set POPPY_TEST_POSTGRES to a DSN (scripts/pg-test-server.sh start prints one)")
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("POPPY_TEST_POSTGRES: %v", err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	b := make([]byte, 8)
	rand.Read(b)
	schema := "conv_" + hex.EncodeToString(b)
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	if store.IsPostgresURL(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}
