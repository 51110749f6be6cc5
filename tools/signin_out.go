package tools

// This file serves sign_out (Poppy 0.1 §4.9): the Account Token is revoked
// at the Company's revocation_endpoint with the client assertion (RFC 7009),
// forgotten, and the Session is renewed signed out; a Company that ends its
// Sessions at sign-out gets a new Session.

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/poppy-mcp/poppy-mcp/agent"
)

func (si *signIn) signOutTool() tool {
	return newTool("sign_out",
		"Sign the user out of a Company account: poppy-mcp revokes its Account Token there and forgets it. "+
			"The Session continues signed out (a cart or conversation carries on); sign in again when a task needs the account.",
		annotations{title: "Sign out", destructive: true, idempotent: true, openWorld: true},
		si.signOut)
}

// signOutResult is sign_out's structured content.
type signOutResult struct {
	Domain    string `json:"domain"`
	Revoked   bool   `json:"revoked"`
	SignedIn  bool   `json:"signed_in"`
	SessionID string `json:"session_id"`
	Next      string `json:"next"`
}

func (si *signIn) signOut(ctx context.Context, _ mcp.CallToolRequest, args companyArgs) *mcp.CallToolResult {
	domain := args.Domain
	r, err := si.sessions.session(ctx, domain, false)
	if err != nil {
		return si.sessions.failure(ctx, domain, err)
	}
	cs, sess := r.cs, r.sess
	cs.Person().SignIns().Cancel(cs.Issuer(), "The user signed out.")
	acct := sess.Account()
	held, err := sess.Held(ctx)
	revoked := acct != nil || held != nil
	if err == nil {
		// Poppy 0.1 §4.9: auth revokes the Account Tokens and renews the Session signed out.
		err = sess.SignOut(ctx)
	}
	// A revoked Account Token is dropped, whether or not the Session could
	// be renewed after it: it is no longer held.
	kept := held != nil && !held.Dropped() || acct != nil && !acct.Dropped()
	if err != nil {
		return si.signOutFailure(cs, domain, revoked, kept, err)
	}
	si.sessions.saveSignedIn(ctx, cs, sess)
	info := sess.Info()
	res := signOutResult{Domain: domain, Revoked: revoked, SignedIn: info.SignedIn, SessionID: info.ID,
		Next: "The Session continues signed out; sign in again when a task needs the account."}
	if !revoked {
		return result(res, "poppy-mcp held no Account Token for %s: nothing to revoke. %s", domain, res.Next)
	}
	return result(res, "Signed out of %s: the Account Token was revoked and forgotten. Session %s. %s", domain, info.ID, res.Next)
}

// signOutFailure phrases a failed sign-out: whether the Account Token is
// still kept, or only renewing the Session signed out failed after it.
func (si *signIn) signOutFailure(cs *agent.Company, domain string, revoked, kept bool, err error) *mcp.CallToolResult {
	si.log.WarnContext(cs.LogContext(), "sign-out failed", "issuer", cs.Issuer(), "revoked", revoked && !kept, "err", err)
	if kept {
		return failure(map[string]string{"error": "sign_out_failed", "next": "Try sign_out again later."},
			"Could not sign out of %s: %v. The Account Token is kept; try sign_out again later.", domain, err)
	}
	done := "poppy-mcp held no Account Token for %s"
	if revoked {
		done = "The Account Token for %s was revoked and forgotten"
	}
	return failure(map[string]any{"error": "session_not_renewed", "revoked": revoked, "next": "Try sign_out again."},
		done+", but the Session could not be renewed signed out: %v. Try sign_out again.", domain, err)
}
