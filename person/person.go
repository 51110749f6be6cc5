// Package person acts on what poppy-mcp holds for one local user outside a
// running serve: the state opened as that person (a state that serves
// several people, a hosted deployment's, names each ISSUER:SUB), the
// Company a domain names, found from its documents or from what the state
// recorded, and the operations on what the person holds there: signing out
// (Poppy 0.1 §4.9) and forgetting (§4.2). cmd/poppy-mcp's status, sign-out
// and forget parse their flags, ask, print and exit around it.
package person

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/poppy-mcp/poppy-mcp/auth"
	"github.com/poppy-mcp/poppy-mcp/mcpauth"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// State is the state opened as one person. It is safe for concurrent use,
// as *store.Store is.
type State struct {
	// Root is the whole state: the agent's identity, the shared catalogs.
	Root *store.Store
	// Store is the person's view of it (store.Store.ForUser).
	Store *store.Store
	// User is the person as given, ISSUER:SUB; "" for the one person of a
	// single-user state.
	User string
	// Agent makes the agent that acts for the person in st, signing with
	// the state's identity. SignOut and Forget call it only when a token
	// is to be revoked; nil is an error then.
	Agent func(ctx context.Context, st *store.Store) (*auth.Agent, error)
}

// UsageError is a person or a domain that cannot be acted on as given.
type UsageError struct{ Msg string }

// Error is the message, which says what to give.
func (e *UsageError) Error() string { return e.Msg }

// Open opens root as the person user (ISSUER:SUB of their access tokens,
// as the hosted mode keys its people) names, or, with user "", as the one
// person of a single-user state: a state of several people refuses "".
// Root stays the caller's to close.
func Open(ctx context.Context, root *store.Store, user string) (*State, error) {
	users, err := root.LocalUsers(ctx)
	if err != nil {
		return nil, err
	}
	if user == "" {
		if slices.ContainsFunc(users, func(u string) bool { return u != "" }) {
			return nil, &UsageError{"the state in " + root.Where() + " serves several people (hosted mode): say whose with " +
				"--user ISSUER:SUB, the iss and sub of that person's access tokens"}
		}
		return &State{Root: root, Store: root.ForUser("")}, nil
	}
	u, err := ParseUser(user)
	if err != nil {
		return nil, err
	}
	return &State{Root: root, Store: root.ForUser(u.Key()), User: user}, nil
}

// ParseUser reads ISSUER:SUB. The issuer is an https URL, so the colon that
// ends it is the first one after its host and port and a path, if any: a
// SUB may hold colons when the issuer has a path; without a path, the last
// colon ends the issuer.
func ParseUser(v string) (mcpauth.User, error) {
	bad := &UsageError{fmt.Sprintf("--user %q: want ISSUER:SUB, such as https://login.example.org/realms/people:248289761001", v)}
	rest, ok := strings.CutPrefix(v, "https://")
	if !ok {
		return mcpauth.User{}, bad
	}
	var i int
	if slash := strings.IndexByte(rest, '/'); slash >= 0 {
		i = strings.IndexByte(rest[slash:], ':')
		if i >= 0 {
			i += slash
		}
	} else {
		i = strings.LastIndexByte(rest, ':')
	}
	if i <= 0 || i == len(rest)-1 {
		return mcpauth.User{}, bad
	}
	return mcpauth.User{Issuer: "https://" + rest[:i], Subject: rest[i+1:]}, nil
}

// agent is s.Agent's agent for the person.
func (s *State) agent(ctx context.Context) (*auth.Agent, error) {
	if s.Agent == nil {
		return nil, fmt.Errorf("person: no agent to revoke the Account Token with")
	}
	return s.Agent(ctx, s.Store)
}
