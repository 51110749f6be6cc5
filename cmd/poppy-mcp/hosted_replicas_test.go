package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/poppytest"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// TestHostedPeopleThroughReplicas: the journey of TestHostedPeopleAtOneCompany
// through a hosted deployment of two replicas on one PostgreSQL database
// (one POPPY_STATE_KEY, one issuer), dana's client on replica A at MCP
// 2025-11-25 and sam's on replica B at 2026-07-28, with the same checks.
// Then each person's second client connects to the OTHER replica (dana's
// to B at 2026-07-28, sam's to A at 2025-11-25): it reads its person's
// conversation, lists it, calls the API as their account without signing
// in again (their sealed Account Token, used by the other replica, gives
// their own orders) and lists their Companies' tools, so state follows the
// person across replicas; it received nothing of the other person's, nor a
// list_changed for the other's tools. The Company sees two User IDs, the
// ones the store keeps for each person; every row of the database that
// names one person's conversation, Session or User ID is that person's
// (the Company's account names are not kept in clear: an Account Token is
// sealed under its label); each replica's log lines carry the right
// pseudonymous IDs.
//
// On main before this test, the lines of the relay that connects to a
// Company's MCP server for one person carried no user ID: it fails there.
func TestHostedPeopleThroughReplicas(t *testing.T) {
	t.Parallel()
	dbURL := postgresURL(t)
	other := poppytest.NewServer(t, &poppytest.Options{Domain: "outdoor.example"})
	h := startHostedWith(t, &deploymentOptions{Others: []*poppytest.Server{other}, Replicas: 2, Store: dbURL})
	dana := h.connectPerson(t, 0, "dana", "acct_dana", "2025-11-25")
	sam := h.connectPerson(t, 1, "sam", "acct_sam", "2026-07-28")
	peopleJourney(t, h, dana, sam)

	danaB := h.connectPerson(t, 1, "dana", "acct_dana", "2026-07-28")
	samA := h.connectPerson(t, 0, "sam", "acct_sam", "2025-11-25")
	// A replica brings back a person's Companies at their first request, so
	// sam's client on A lists outdoor.example's tools, a Company he used
	// only through B, without using it there first.
	checkFollows(t, samA, sam, "Rain hat", true)
	danaChanges := danaB.listChanged.Load()
	checkFollows(t, danaB, dana, "Stormline jacket, size M", false)
	if _, isErr := samA.call(t, "start_session", map[string]any{"domain": "outdoor.example", "new": true}); isErr { // sam's tools change on A
		t.Fatal("sam: a new Session at outdoor.example through A")
	}
	danaB.call(t, "sign_in_status", map[string]any{"domain": "example.com"}) // a round trip, for a stray notification to arrive
	if got := danaB.listChanged.Load(); got != danaChanges {
		t.Errorf("dana's client on B got %d notifications/tools/list_changed when sam's tools changed on A", got-danaChanges)
	}
	for _, c := range []struct {
		who, other *hostedPerson
		theirs     []string
	}{
		{danaB, sam, []string{"Rain hat", "outdoor_example"}},
		{samA, dana, []string{"Stormline jacket, size M"}},
	} {
		for _, s := range append(c.theirs, c.other.conversation, c.other.userCode, c.other.account) {
			if strings.Contains(c.who.wire.String(), s) {
				t.Errorf("%s's client on the other replica received %q, which is %s's", c.who.name, s, c.other.name)
			}
		}
	}
	checkNotReadable(t, danaB, sam)
	checkNotReadable(t, samA, dana)

	users := checkStoredRecords(t, h, dana, sam)
	checkCompanyUserIDs(t, h.srv, users, dana, sam)
	for _, s := range other.Sessions() { // sam's two Sessions there, one through each replica
		if !slices.Contains(mapValues(users[sam].userIDs), s.UserID) {
			t.Errorf("outdoor.example saw User %s, not sam's %v", s.UserID, users[sam].userIDs)
		}
	}
	checkLogIDs(t, h, dana, sam)
	checkReplicaLogs(t, h, users, dana, sam)
}

// checkFollows: p2, the person's second client on the other replica, sees
// the state p's client made: their conversation read and listed, their
// account's orders (own) through call_api without a new sign-in, and the
// tools of their Companies (outdoor.example's only when hasOther).
func checkFollows(t *testing.T, p2, p *hostedPerson, own string, hasOther bool) {
	t.Helper()
	p2.conversation, p2.userCode = p.conversation, p.userCode
	got, isErr := p2.call(t, "read_events", map[string]any{"domain": "example.com", "conversation_id": p.conversation, "wait_seconds": 0})
	if isErr || !strings.Contains(fmt.Sprint(got), p.conversation) {
		t.Errorf("%s reads their conversation through the other replica: %v (error %v)", p.name, got, isErr)
	}
	listed, _ := p2.call(t, "list_conversations", map[string]any{})
	if !strings.Contains(fmt.Sprint(listed), p.conversation) {
		t.Errorf("%s's list_conversations through the other replica: %v", p.name, listed)
	}
	if got, isErr := p2.call(t, "call_api", map[string]any{"domain": "example.com", "operation": "listOrders"}); isErr ||
		!strings.Contains(fmt.Sprint(got), own) {
		t.Errorf("%s's call_api through the other replica: %v (error %v), want their orders", p.name, got, isErr)
	}
	tools := p2.tools(t)
	if !slices.ContainsFunc(tools, func(n string) bool { return strings.HasPrefix(n, "example_com_") }) ||
		slices.ContainsFunc(tools, func(n string) bool { return strings.HasPrefix(n, "outdoor_example_") }) != hasOther {
		t.Errorf("%s's tools through the other replica: %v", p.name, tools)
	}
}

// storedUser is what the store keeps of one person, read through their
// view (store.ForUser) of the deployment's database.
type storedUser struct {
	key      string            // their local user key
	userIDs  map[string]string // issuer -> User ID
	sessions []string          // their Sessions' IDs
	records  string            // every record of theirs, printed
}

// checkStoredRecords reads each person's records through their own view of
// the database, as the replicas do, and every row of every table: each
// person's view holds their conversation, Sessions and User IDs and
// nothing of the other's; no row names a person's conversation, Session or
// User ID
// unless it is that person's; the only local users are the two people.
func checkStoredRecords(t *testing.T, h *hostedDeployment, dana, sam *hostedPerson) map[*hostedPerson]storedUser {
	t.Helper()
	ctx := context.Background()
	key, _ := base64.StdEncoding.DecodeString(h.stateKey)
	st, err := store.OpenPostgres(ctx, h.store, &store.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	users := map[*hostedPerson]storedUser{}
	for _, p := range []*hostedPerson{dana, sam} {
		users[p] = readStoredUser(t, st.ForUser(mcpauth.User{Issuer: h.idp.Issuer(), Subject: p.name}.Key()))
	}
	locals, err := st.LocalUsers(ctx)
	if want := []string{users[dana].key, users[sam].key}; err != nil || !slices.Equal(slices.Sorted(slices.Values(locals)), slices.Sorted(slices.Values(want))) {
		t.Errorf("the database's local users: %q (%v), want dana's and sam's %q", locals, err, want)
	}
	marks := map[*hostedPerson][]string{}
	for _, c := range []struct{ p, other *hostedPerson }{{dana, sam}, {sam, dana}} {
		u := users[c.p]
		marks[c.p] = append(append([]string{c.p.conversation}, mapValues(u.userIDs)...), u.sessions...)
		if !strings.Contains(u.records, c.p.conversation) || len(u.userIDs) == 0 || len(u.sessions) == 0 {
			t.Fatalf("%s's records lack their conversation, User IDs or Sessions: the scan below would prove nothing\n%s", c.p.name, u.records)
		}
	}
	for _, c := range []struct{ p, other *hostedPerson }{{dana, sam}, {sam, dana}} {
		for _, s := range marks[c.other] {
			if strings.Contains(users[c.p].records, s) {
				t.Errorf("%s's records hold %q, which is %s's", c.p.name, s, c.other.name)
			}
		}
	}
	checkRows(t, h.store, map[string][]string{users[dana].key: marks[dana], users[sam].key: marks[sam]},
		dana.account, sam.account, dana.userCode, sam.userCode)
	return users
}

// readStoredUser prints every record of v's person: User IDs, Sessions,
// Account Tokens by Company, conversations, and the names of their secrets.
func readStoredUser(t *testing.T, v *store.Store) storedUser {
	t.Helper()
	ctx := context.Background()
	u := storedUser{key: v.User(), userIDs: map[string]string{}}
	var b strings.Builder
	issuers, err := v.Issuers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, iss := range issuers {
		id, err := v.FindUserID(ctx, iss)
		if err != nil {
			t.Fatalf("User ID at %s: %v", iss, err)
		}
		u.userIDs[iss] = id
		sessions, err1 := v.Sessions(ctx, iss)
		tokens, err2 := v.AccountTokens(ctx, iss, id)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		for _, sess := range sessions {
			u.sessions = append(u.sessions, sess.ID)
		}
		fmt.Fprintf(&b, "%s: user %s\nsessions %+v\naccount tokens %+v\n", iss, id, sessions, tokens)
	}
	convs, err1 := v.Conversations(ctx, "")
	secrets, err2 := v.SecretNames(ctx, "")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	fmt.Fprintf(&b, "conversations %+v\nsecrets %q\n", convs, secrets)
	u.records = b.String()
	return u
}

// checkRows reads every row of every table of the database at dbURL as
// text: a row that holds one of a person's marks belongs to that person
// (its local_user is theirs), a table without local_user holds no
// person's mark at all, and no row holds any of absent in clear.
func checkRows(t *testing.T, dbURL string, marks map[string][]string, absent ...string) {
	t.Helper()
	db := openPostgres(t, dbURL)
	found := map[string]bool{}
	for table, has := range tablesOf(t, db) {
		owner := "''"
		if has {
			owner = "local_user"
		}
		rs, err := db.Query(`SELECT ` + owner + `, row_to_json(r)::text FROM ` + pgx.Identifier{table}.Sanitize() + ` r`)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var user, row string
			if err := rs.Scan(&user, &row); err != nil {
				t.Fatal(err)
			}
			for _, a := range absent {
				if strings.Contains(row, a) {
					t.Errorf("a row of %s holds %q in clear: %s", table, a, row)
				}
			}
			for person, ms := range marks {
				for _, m := range ms {
					found[m] = found[m] || strings.Contains(row, m)
					if person != user && strings.Contains(row, m) {
						t.Errorf("a row of %s of local user %.12q holds %q, another person's: %s", table, user, m, row)
					}
				}
			}
		}
		rs.Close()
	}
	for _, ms := range marks {
		for _, m := range ms {
			if !found[m] {
				t.Errorf("no row holds %q: the scan proved nothing of it", m)
			}
		}
	}
}

// tablesOf returns the tables of the database's current schema, each with
// whether it has a local_user column.
func tablesOf(t *testing.T, db *sql.DB) map[string]bool {
	t.Helper()
	rows, err := db.Query(`SELECT table_name, bool_or(column_name = 'local_user') FROM information_schema.columns
		WHERE table_schema = current_schema() GROUP BY table_name ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	perUser := map[string]bool{}
	for rows.Next() {
		var table string
		var has bool
		if err := rows.Scan(&table, &has); err != nil {
			t.Fatal(err)
		}
		perUser[table] = has
	}
	if len(perUser) == 0 {
		t.Fatal("the database has no tables: the scan would prove nothing")
	}
	return perUser
}

// checkCompanyUserIDs: the Company's signed-in Users at example.com are
// the User IDs the store keeps for each person, and each person's
// conversation was started by theirs.
func checkCompanyUserIDs(t *testing.T, srv *poppytest.Server, users map[*hostedPerson]storedUser, people ...*hostedPerson) {
	t.Helper()
	byAccount := map[string]string{}
	for _, s := range srv.SignedInSessions() {
		byAccount[s.Account] = s.UserID
	}
	starter := map[string]string{}
	for _, c := range srv.Conversations() {
		starter[c.ID] = c.UserID
	}
	for _, p := range people {
		ids := mapValues(users[p].userIDs)
		if !slices.Contains(ids, byAccount[p.account]) || !slices.Contains(ids, starter[p.conversation]) {
			t.Errorf("%s: the Company's User of %s is %q, of their conversation %q; the store keeps %v",
				p.name, p.account, byAccount[p.account], starter[p.conversation], ids)
		}
	}
}

// checkReplicaLogs: each replica logged the device sign-in of the person
// whose client is on it, with their pseudonymous ID, and a line of the
// second client of the other person; the lines of the relay to
// outdoor.example's MCP server, which only sam uses, carry sam's ID; no
// line carrying one person's ID names the other's conversation or User ID.
func checkReplicaLogs(t *testing.T, h *hostedDeployment, users map[*hostedPerson]storedUser, dana, sam *hostedPerson) {
	t.Helper()
	ids := h.logIDs(t)
	id := func(p *hostedPerson) string {
		return "user=" + ids.Of(mcpauth.User{Issuer: h.idp.Issuer(), Subject: p.name})
	}
	for i, c := range []struct{ first, second *hostedPerson }{{dana, sam}, {sam, dana}} {
		lines := strings.Split(h.replicas[i].logged.String(), "\n")
		if !slices.ContainsFunc(lines, func(l string) bool {
			return strings.Contains(l, `msg="device sign-in started"`) && strings.Contains(l, id(c.first))
		}) {
			t.Errorf("replica %c logged no device sign-in with %s's ID", 'A'+i, c.first.name)
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, id(c.second)) }) {
			t.Errorf("replica %c logged no line with %s's ID, whose second client used it", 'A'+i, c.second.name)
		}
		for _, l := range lines {
			if strings.Contains(l, "url=https://mcp.outdoor.example/") && !strings.Contains(l, id(sam)) {
				t.Errorf("replica %c logged sam's relay without sam's ID: %s", 'A'+i, l)
			}
			for _, pair := range [][2]*hostedPerson{{dana, sam}, {sam, dana}} {
				if !strings.Contains(l, id(pair[0])) {
					continue
				}
				for _, m := range append([]string{pair[1].conversation}, mapValues(users[pair[1]].userIDs)...) {
					if strings.Contains(l, m) {
						t.Errorf("replica %c logged %s's %q on a line of %s's: %s", 'A'+i, pair[1].name, m, pair[0].name, l)
					}
				}
			}
		}
	}
}

// mapValues returns m's values, in no order.
func mapValues(m map[string]string) []string {
	return slices.Collect(maps.Values(m))
}
