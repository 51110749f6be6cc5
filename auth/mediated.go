// This file implements Mediated Sign-In (Poppy 0.1 §4.7): the User's
// credentials go, with the Session Token and a DPoP proof, to
// auth.mediated.endpoint and nowhere else; a one-time code goes only to
// {endpoint}/{sign_in_id}. Answers carry status complete, code_required or
// failed, and are read by that status and their error code, whatever their
// 2xx or 4xx status line (our reading: wrong credentials are failed with
// invalid_credentials, often 400 or 401; too many attempts 429, which the
// Session transport holds back for Retry-After).

package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/httpbody"
	"github.com/poppy-mcp/poppy-mcp/internal/untrusted"
)

// Mediated sign-in statuses (Poppy 0.1 §4.7).
const (
	MediatedComplete     = "complete"
	MediatedCodeRequired = "code_required"
	MediatedFailed       = "failed"
)

// mediatedTimeout bounds one mediated request, so a rate limit answers at
// once with *RetryAfterError instead of sending credentials again later.
const mediatedTimeout = 30 * time.Second

// MediatedStep is where a Mediated Sign-In stands after a request. It is
// not changed once returned, so it is safe to share; give each step to one
// SubmitCode.
type MediatedStep struct {
	// Status is MediatedComplete, MediatedCodeRequired or MediatedFailed.
	Status string
	// SignIn is the finished sign-in, when Status is complete.
	SignIn *SignIn
	// SentTo is code.sent_to, where the one-time code went, when Status is
	// code_required. Company text: untrusted, cleaned of control characters.
	SentTo string
	// ExpiresAt is when the code can no longer be given; zero when unknown.
	ExpiresAt time.Time
	// Err is why, when Status is failed: an *Error such as
	// invalid_credentials, or the code step's error.
	Err error

	signInID string
	scopes   []string
	endpoint string // the auth.mediated.endpoint the credentials went to; the code goes there too
}

// mediatedWire is a mediated sign-in answer that is not complete.
type mediatedWire struct {
	Status   string `json:"status"`
	SignInID string `json:"sign_in_id"`
	Code     struct {
		SentTo string `json:"sent_to"`
	} `json:"code"`
	ExpiresAt string `json:"expires_at"`
}

// SignInMediated sends the User's credentials, one value per field of
// auth.mediated.fields, for scopes, to the auth.mediated.endpoint of the
// domain the Session was started through (Site.SignInMediated for
// another). The values are sent once and not kept.
func (s *Session) SignInMediated(ctx context.Context, scopes []string, credentials map[string]Secret) (*MediatedStep, error) {
	return s.site().SignInMediated(ctx, scopes, credentials)
}

// SignInMediated sends the User's credentials, one value per field of
// auth.mediated.fields, for scopes, to this domain's
// auth.mediated.endpoint; the Session is signed in, on every domain of the
// Company. The values are sent once and not kept.
func (w *Site) SignInMediated(ctx context.Context, scopes []string, credentials map[string]Secret) (*MediatedStep, error) {
	s, endpoint := w.s, w.c.MediatedEndpoint
	if err := checkScopes(scopes); err != nil {
		return nil, err
	}
	if _, err := httpsURL("auth.mediated.endpoint", endpoint); err != nil {
		return nil, err
	}
	creds := make(map[string]string, len(credentials))
	for k, v := range credentials {
		creds[k] = v.Reveal()
	}
	defer clear(creds)
	for replaced := false; ; replaced = true {
		body, err := json.Marshal(map[string]any{"scope": strings.Join(scopes, " "), "credentials": creds})
		if err != nil {
			return nil, fmt.Errorf("auth: mediated sign-in: %w", err)
		}
		// Poppy 0.1 §4.7: "Personal Agents MUST NOT send credentials to any
		// endpoint other than the Company's auth.mediated.endpoint."
		st, err := s.postMediated(ctx, endpoint, body, scopes)
		if err == nil {
			st.endpoint = endpoint
		}
		if err != nil || replaced || !st.mismatch() {
			return st, err
		}
		// Poppy 0.1 §4.4: the Session was signed in to another account: "the
		// Personal Agent starts a new Session", and signs that one in.
		if err := s.replace(ctx); err != nil {
			return nil, err
		}
	}
}

// mismatch reports whether the step failed because the Session was signed
// in to another account (Poppy 0.1 §4.4).
func (st *MediatedStep) mismatch() bool {
	return st.Status == MediatedFailed && errors.Is(st.Err, ErrAccountMismatch)
}

// SubmitCode sends the one-time code of a sign-in that answered
// code_required. A wrong code answers code_required again, until the
// Company's attempt limit, then failed.
// Poppy 0.1 §4.7: the agent "submits only the code, not the credentials again".
func (s *Session) SubmitCode(ctx context.Context, step *MediatedStep, code Secret) (*MediatedStep, error) {
	if step == nil || step.Status != MediatedCodeRequired {
		return nil, errors.New("auth: no mediated sign-in is waiting for a code")
	}
	body, err := json.Marshal(map[string]string{"code": code.Reveal()})
	if err != nil {
		return nil, fmt.Errorf("auth: mediated sign-in code: %w", err)
	}
	// Poppy 0.1 §4.7: the code goes where the credentials went (POST https://auth.example.com/poppy/sign-in/sgn_3Hq8).
	u := strings.TrimSuffix(step.endpoint, "/") + "/" + url.PathEscape(step.signInID)
	st, err := s.postMediated(ctx, u, body, step.scopes)
	if err == nil {
		st.endpoint = step.endpoint
	}
	if err == nil && st.mismatch() {
		// The code is used up: a new Session is started for the next sign-in
		// (Poppy 0.1 §4.4), which needs the credentials again.
		if err := s.replace(ctx); err != nil {
			return nil, err
		}
	}
	return st, err
}

// postMediated posts a JSON body through the Session's client, without
// following redirects (the body is a credential), and reads the answer.
func (s *Session) postMediated(ctx context.Context, endpoint string, body []byte, scopes []string) (*MediatedStep, error) {
	defer clear(body)
	ctx, cancel := context.WithTimeout(ctx, mediatedTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("auth: mediated sign-in: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	c := s.newClient(&sessionTransport{s: s})
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: mediated sign-in: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		// Poppy 0.1 §4.7: "Personal Agents MUST NOT send credentials to any
		// endpoint other than the Company's auth.mediated.endpoint."
		return nil, fmt.Errorf("auth: the mediated sign-in endpoint redirected (HTTP %d); the credentials were not sent where it pointed", resp.StatusCode)
	}
	b, err := httpbody.ReadAtMost(resp.Body, s.a.maxBody)
	if err != nil || !httpbody.IsJSON(resp.Header.Get("Content-Type")) {
		return nil, fmt.Errorf("auth: mediated sign-in answered HTTP %d (%s)", resp.StatusCode, untrusted.Text(resp.Header.Get("Content-Type"), 300))
	}
	return s.readMediated(resp.StatusCode, resp.Header, b, scopes)
}

// readMediated interprets a mediated sign-in answer. Poppy 0.1 §4.7 tells
// the answers apart by their status, not by the HTTP status line: any 2xx
// or 4xx answer is read by its body's status and error code. A 5xx (or a
// redirect, not followed) is the Company failing, never a sign-in: read as
// complete, it would take a half-finished answer for a signed-in Session.
func (s *Session) readMediated(status int, h http.Header, body []byte, scopes []string) (*MediatedStep, error) {
	if status/100 != 2 && status/100 != 4 {
		return nil, fmt.Errorf("auth: mediated sign-in answered HTTP %d", status)
	}
	var w mediatedWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("auth: mediated sign-in answer: %w", err)
	}
	e := parseErrorBody(status, h, body)
	switch {
	case w.Status == MediatedComplete && e == nil:
		return s.completeMediated(body, scopes)
	case w.Status == MediatedCodeRequired && e == nil:
		return parseCodeRequired(&w, scopes)
	case w.Status == MediatedFailed || w.Status == "" && e != nil:
		if e == nil {
			e = &Error{Code: "failed", Status: status}
		}
		return &MediatedStep{Status: MediatedFailed, Err: e}, nil
	}
	return nil, fmt.Errorf("auth: mediated sign-in answered HTTP %d with status %q", status, untrusted.Text(w.Status, 300))
}

// completeMediated signs the Session in with a complete answer.
func (s *Session) completeMediated(body []byte, scopes []string) (*MediatedStep, error) {
	// Poppy 0.1 §4.7: "returns complete with the same fields as the response in 4.4"
	tok, err := parseToken(body, "DPoP", s.a.now())
	if err != nil {
		return nil, err
	}
	in, err := s.finishSignIn(tok, scopes)
	if err != nil {
		return nil, err
	}
	return &MediatedStep{Status: MediatedComplete, SignIn: in}, nil
}

// parseCodeRequired checks a code_required answer (Poppy 0.1 §4.7 "One-time codes").
func parseCodeRequired(w *mediatedWire, scopes []string) (*MediatedStep, error) {
	// The ID goes into a URL path: short visible ASCII, no path separators.
	if w.SignInID == "" || !printable(w.SignInID) || strings.ContainsAny(w.SignInID, "/?#%") || w.SignInID == "." || w.SignInID == ".." {
		return nil, errors.New("auth: code_required answer without a usable sign_in_id")
	}
	st := &MediatedStep{Status: MediatedCodeRequired, SentTo: untrusted.Text(w.Code.SentTo, 300), signInID: w.SignInID,
		scopes: slices.Clone(scopes)}
	if t, err := time.Parse(time.RFC3339, w.ExpiresAt); err == nil {
		st.ExpiresAt = t
	}
	return st, nil
}
