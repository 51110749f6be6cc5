// Package mcpauth makes poppy-mcp's /mcp an OAuth 2.0 protected resource,
// as the MCP authorization specification (revisions 2025-11-25 and
// 2026-07-28) describes, for a deployment that serves several people with
// an existing authorization server: it publishes its protected resource
// metadata (RFC 9728), answers a request without a usable access token with
// a challenge that points at it (RFC 6750 §3), accepts only JWT access
// tokens (RFC 9068) that the configured issuer made for this resource (RFC
// 8707), and hands every request on with the person it is for (UserFrom).
//
// Pages the person opens in a browser cannot see the MCP client's token:
// Login signs the browser in with the same authorization server (OpenID
// Connect, authorization code with PKCE) and admits to a page only the
// person it was opened for.
package mcpauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// Options configure a Resource. The zero value is usable.
type Options struct {
	// Scopes are required in every access token (serve --auth-scope), and
	// published as scopes_supported. Zero: none is required, and the
	// metadata names none.
	Scopes []string
	// Algorithms are the JWS algorithms accepted. New refuses "none" and
	// HMAC ones. Zero: DefaultAlgorithms.
	Algorithms []jose.SignatureAlgorithm
	// StrictType accepts only tokens whose typ is at+jwt (RFC 9068 §4).
	// Zero: also tokens with the generic typ "JWT" or none, as most
	// authorization servers issue them.
	StrictType bool
	// Leeway is the clock difference tolerated on exp, nbf and iat.
	// Zero: 30 s.
	Leeway time.Duration
	// Documents fetches the issuer's metadata and key set: give it the one
	// public-document client, over the network guard. Zero:
	// discovery.New(nil, nil), unguarded.
	Documents *discovery.Client
	// KeyRefreshInterval is the least time between two fetches of the key
	// set for a token signed with a key it does not hold. Zero: 10 s.
	KeyRefreshInterval time.Duration
	// Secret keys what binds an MCP session to its user and, for Login,
	// the browser's cookies; replicas that share sessions or cookies share
	// it. At least 32 bytes. Zero: random, for this process only.
	Secret []byte
	// Logger gets a line for every refused token (never the token). Zero:
	// nothing is logged.
	Logger *slog.Logger
	// Now is the clock. Zero: time.Now.
	Now func() time.Time
}

// Resource is /mcp as a protected resource of one authorization server. It
// is safe for concurrent use.
type Resource struct {
	issuer, resource string
	scopes           []string
	algs             []jose.SignatureAlgorithm
	strictType       bool
	leeway           time.Duration
	keys             *keySet
	secret           []byte
	logIDs           *LogIDs // keyed by secret
	log              *slog.Logger
	now              func() time.Time
}

// New returns the protected resource resource (the https URL of /mcp, as
// clients reach it) whose tokens issuer (an https issuer identifier, RFC
// 8414 §2) issues. New does no I/O: the issuer's keys are fetched when the
// first token is checked, or by Discover.
func New(issuer, resource string, opts *Options) (*Resource, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := checkIssuer(issuer); err != nil {
		return nil, err
	}
	if u, err := url.Parse(resource); err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		// RFC 8707 §2: the resource "MUST be an absolute URI" and "MUST NOT include a fragment component".
		return nil, fmt.Errorf("mcpauth: the resource %q must be an https URL without query or fragment", resource)
	}
	r := &Resource{issuer: issuer, resource: resource, scopes: slices.Clone(o.Scopes), algs: o.Algorithms,
		strictType: o.StrictType, leeway: o.Leeway, secret: o.Secret, log: o.Logger, now: o.Now}
	if err := r.defaults(o); err != nil {
		return nil, err
	}
	return r, nil
}

// defaults fills in the zero values and refuses unsafe choices.
func (r *Resource) defaults(o Options) error {
	if len(r.algs) == 0 {
		r.algs = DefaultAlgorithms
	}
	for _, a := range r.algs {
		if !slices.Contains(DefaultAlgorithms, a) {
			return fmt.Errorf("mcpauth: the algorithm %q is not allowed: only asymmetric ones (%v)", a, DefaultAlgorithms)
		}
	}
	if r.leeway <= 0 {
		r.leeway = 30 * time.Second
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if len(r.secret) == 0 {
		r.secret = make([]byte, 32)
		rand.Read(r.secret)
	} else if len(r.secret) < 32 {
		return errors.New("mcpauth: Options.Secret must be at least 32 bytes")
	}
	var err error
	if r.logIDs, err = NewLogIDs(r.secret); err != nil {
		return err
	}
	docs := o.Documents
	if docs == nil {
		docs = discovery.New(nil, nil)
	}
	refresh := o.KeyRefreshInterval
	if refresh <= 0 {
		refresh = 10 * time.Second
	}
	r.keys = &keySet{issuer: r.issuer, docs: docs, now: r.now, minRefresh: refresh}
	return nil
}

// checkIssuer refuses what is not an issuer identifier (RFC 8414 §2: "a
// URL that uses the "https" scheme and has no query or fragment components").
func checkIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("mcpauth: the issuer %q must be an https URL without query or fragment", issuer)
	}
	return nil
}

// Issuer is the authorization server's issuer identifier.
func (r *Resource) Issuer() string { return r.issuer }

// URL is the resource identifier: the https URL of /mcp.
func (r *Resource) URL() string { return r.resource }

// Require admits to next only the requests that carry an access token this
// Resource accepts, with the token's user in their context (UserFrom); it
// answers every other one with its challenge. It also binds each MCP
// session to the user who opened it.
func (r *Resource) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		tok, err := r.authenticate(req)
		if err != nil {
			r.refuse(w, req, err)
			return
		}
		r.log.Debug("mcpauth: token accepted", "user", r.logIDs.Of(tok.User), "client_id", tok.ClientID)
		req = req.WithContext(WithUser(req.Context(), tok.User))
		r.bindSession(w, req, tok.User, next)
	})
}

// authenticate finds the request's bearer token and checks it, with the
// scopes required.
func (r *Resource) authenticate(req *http.Request) (*Token, error) {
	if req.URL.Query().Has("access_token") {
		// MCP authorization: "Access tokens MUST NOT be included in the URI
		// query string"; RFC 6750 §2.3 is not supported.
		return nil, &Error{Code: ErrInvalidRequest.Code, Status: ErrInvalidRequest.Status,
			Description: "send the access token in the Authorization header, never in the URL"}
	}
	values := req.Header.Values("Authorization")
	if len(values) > 1 {
		return nil, &Error{Code: ErrInvalidRequest.Code, Status: ErrInvalidRequest.Status, Description: "more than one Authorization header"}
	}
	scheme, token, _ := strings.Cut(strings.Join(values, ""), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, ErrNoToken // RFC 6750 §2.1: "Authorization: Bearer"
	}
	tok, err := r.Verify(req.Context(), strings.TrimSpace(token))
	if err != nil {
		return nil, err
	}
	for _, s := range r.scopes {
		if !slices.Contains(tok.Scopes, s) {
			// RFC 6750 §3.1: insufficient_scope, "The resource server SHOULD
			// respond with the HTTP 403 (Forbidden) status code".
			return nil, &Error{Code: ErrInsufficientScope.Code, Status: ErrInsufficientScope.Status,
				Description: "the token lacks the scope " + s}
		}
	}
	return tok, nil
}

// refuse answers a request that was not admitted: 401, 403 or 400 with the
// Bearer challenge, or 503 when no token can be checked now.
func (r *Resource) refuse(w http.ResponseWriter, req *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Description: "internal error", Err: err}
	}
	level := slog.LevelInfo
	if e == ErrNoToken {
		level = slog.LevelDebug // every client's first request: no news
	}
	r.log.Log(req.Context(), level, "mcpauth: request refused", "status", e.Status, "code", e.Code,
		"reason", e.Description, "cause", e.Err, "remote", req.RemoteAddr)
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "30")
		http.Error(w, "the authorization server cannot be reached; try again later", e.Status)
		return
	}
	if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden || e.Status == http.StatusBadRequest {
		w.Header().Set("WWW-Authenticate", r.challenge(e))
	}
	http.Error(w, strings.TrimPrefix(e.Error(), "mcpauth: "), e.Status)
}

// challenge is the WWW-Authenticate value for a refusal. RFC 6750 §3: the
// Bearer scheme with error and error_description, except when the request
// had no token ("the resource server SHOULD NOT include an error code or
// other error information"); RFC 9728 §5.1: resource_metadata, the URL of
// the metadata, so the client can find the authorization server; the MCP
// specification's scope selection strategy: the scope needed.
func (r *Resource) challenge(e *Error) string {
	var params []string
	if e.Code != "" {
		params = append(params, param("error", e.Code), param("error_description", e.Description))
	}
	if len(r.scopes) > 0 {
		params = append(params, param("scope", strings.Join(r.scopes, " ")))
	}
	params = append(params, param("resource_metadata", r.MetadataURL()))
	return "Bearer " + strings.Join(params, ", ")
}

// param is one auth-param as a quoted-string (RFC 9110 §11.2); values are
// poppy-mcp's own text and URLs, with quotes and backslashes escaped.
func param(name, value string) string {
	return name + `="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(value) + `"`
}

// The package's one error type: a refused request, as RFC 6750
// §3.1 names its reasons, with the HTTP status it is answered with.

// Error is a request refused at /mcp, or a browser sign-in that failed.
// Its Description never holds a token or a subject.
type Error struct {
	// Code is the RFC 6750 §3.1 error code: "invalid_request",
	// "invalid_token" or "insufficient_scope"; "" for a request with no
	// token at all (RFC 6750 §3.1: the challenge then carries no error
	// code) and for the authorization server being unreachable.
	Code string
	// Description says why, for the client's developer (error_description).
	Description string
	// Status is the HTTP status the request is answered with.
	Status int
	// Err is the underlying cause, when there is one (a network error).
	Err error
}

func (e *Error) Error() string {
	msg := "mcpauth: "
	if e.Code != "" {
		msg += e.Code + ": "
	}
	msg += e.Description
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is compares codes and statuses, so errors.Is(err, ErrInvalidToken) holds
// for every invalid token, whatever its description.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code && t.Status == e.Status
}

// The refusals, for errors.Is.
var (
	// ErrNoToken: the request carries no bearer token (401).
	ErrNoToken = &Error{Status: http.StatusUnauthorized, Description: "an access token is required"}
	// ErrInvalidRequest: a malformed request, such as a token in the URL (400).
	ErrInvalidRequest = &Error{Code: "invalid_request", Status: http.StatusBadRequest}
	// ErrInvalidToken: the token is expired, forged, or not for this
	// resource or issuer (401).
	ErrInvalidToken = &Error{Code: "invalid_token", Status: http.StatusUnauthorized}
	// ErrInsufficientScope: a valid token without a required scope (403).
	ErrInsufficientScope = &Error{Code: "insufficient_scope", Status: http.StatusForbidden}
	// ErrUnavailable: the authorization server's keys cannot be had now, so
	// no token can be checked (503): a client should retry, not sign in again.
	ErrUnavailable = &Error{Status: http.StatusServiceUnavailable, Description: "the authorization server cannot be reached"}
)

// invalidToken is an ErrInvalidToken saying why.
func invalidToken(why string) *Error {
	return &Error{Code: ErrInvalidToken.Code, Status: ErrInvalidToken.Status, Description: why}
}

// OAuth 2.0 Protected Resource Metadata (RFC 9728) for
// /mcp: the document that tells an MCP client which authorization server
// issues tokens for it, served at the well-known URL made from the
// resource identifier and, for clients that look only there, at the root.

// wellKnown is the well-known URI suffix of RFC 9728 §3.
const wellKnown = "/.well-known/oauth-protected-resource"

// Metadata is the protected resource metadata document.
func (r *Resource) Metadata() *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		// RFC 9728 §2: resource, "the protected resource's resource identifier".
		Resource: r.resource,
		// The MCP authorization specification: "MUST include the
		// authorization_servers field containing at least one authorization server".
		AuthorizationServers: []string{r.issuer},
		// RFC 6750 §2.1 only: tokens in a query or a form body are refused.
		BearerMethodsSupported: []string{"header"},
		ScopesSupported:        r.scopes,
		ResourceName:           "poppy-mcp",
	}
}

// MetadataURL is where the metadata is: RFC 9728 §3.1, the well-known
// suffix inserted between the resource identifier's host and its path
// (https://agent.example/mcp: https://agent.example/.well-known/oauth-protected-resource/mcp).
// It is the URL the challenge's resource_metadata names.
func (r *Resource) MetadataURL() string {
	u, _ := url.Parse(r.resource) // New checked it
	return u.Scheme + "://" + u.Host + r.MetadataPaths()[0]
}

// MetadataPaths are the paths MetadataHandler must be mounted at on the
// resource's host: the well-known URL of RFC 9728 §3.1, and the root
// well-known URL, which MCP clients try when the first is missing.
func (r *Resource) MetadataPaths() []string {
	u, _ := url.Parse(r.resource)
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{wellKnown}
	}
	return []string{wellKnown + path, wellKnown}
}

// MetadataHandler serves the metadata as application/json (RFC 9728 §3.2),
// to any origin: it is public, and browser-based clients read it too.
func (r *Resource) MetadataHandler() http.Handler {
	body, _ := json.Marshal(r.Metadata())
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		switch req.Method {
		case http.MethodOptions:
			w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "MCP-Protocol-Version")
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodGet, http.MethodHead:
		default:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Write(body)
	})
}

// Discover fetches the issuer's metadata and keys now, so that a
// deployment learns at start that its --auth-issuer is wrong or out of
// reach, rather than at the first request.
func (r *Resource) Discover(ctx context.Context) error {
	_, err := r.keys.metadata(ctx)
	return err
}

// LogIDs are the pseudonymous IDs this deployment's logs name people by,
// keyed by Options.Secret: give them to LogHandler.
func (r *Resource) LogIDs() *LogIDs { return r.logIDs }

// Ready reports whether the Resource can check tokens with current keys:
// the issuer's metadata and key set were fetched within their lifetime (an
// hour; a failed refetch keeps the old keys in use, but not Ready). When
// they are older, or were never fetched, Ready fetches them, waiting until
// ctx ends. It is meant for a readiness probe (serve's /readyz).
func (r *Resource) Ready(ctx context.Context) error { return r.keys.ready(ctx) }
