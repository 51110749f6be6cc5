// Package poppytest is a strict reference Company for the Personal Agent
// Protocol (Poppy draft 0.1), in one process, for tests and demos.
//
// Like net/http/httptest, NewServer starts a TLS server on a loopback port with
// its own freshly generated certificate authority. It serves every host of one
// Company (Domain, www.Domain, auth.Domain, api.Domain, mcp.Domain, and the
// same of each of its Options.OtherDomains) and the agent's own host
// (AgentHost) from that one listener, routing by the Host
// header. Several Servers can share one listener and CA instead: a Front
// (Options.Front), as poppytest serve does with a Company per test run.
// Server.Client and Server.Transport trust only that CA and dial every
// one of those names, at any port, to the listener, so the agent under test
// uses the real https URLs of the spec.
//
// The Server enforces the Company's side of the spec and reports the agent's
// protocol violations through the T it was given, as test failures. It records
// every request it receives, so a test can assert that a retry really happened.
//
// poppytest imports none of the agent's packages: it checks the agent with its
// own code, so one misreading of the spec cannot hide on both sides.
//
// The Server is split by concern (documents, Sessions and tokens, sign-in,
// conversations, the shop and its API, MCP, the website, what it recorded):
// each is a type with its own files, which the Server embeds (concerns.go).
// Each registers its handlers with Server.Handle from an install method
// called by NewUnstartedServer (see install below), and tests can override
// any endpoint the same way. Token grants register in
// s.grants the same way; the token endpoint checks the DPoP proof and client
// assertion before calling them. Resource handlers call Server.Authenticate.
package poppytest

import (
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// T is what poppytest needs from a test; *testing.T and testing.TB satisfy it.
// The demo passes its own. Errorf may be called from server goroutines.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Cleanup(func())
}

// Options configure a Server. The zero value of every field is usable.
type Options struct {
	// Domain is the Company's domain. Zero: "example.com". The Server serves
	// Domain and "www."+Domain (poppy.json, website), "auth."+Domain (OAuth
	// server), "api."+Domain (APIs, conversations) and "mcp."+Domain (MCP).
	Domain string
	// AgentHost is the agent's host, where the Server serves the documents
	// given to SetAgentDocuments. Zero: "agent.example".
	AgentHost string
	// OtherDomains are more domains of the Company under its one issuer,
	// such as "example.co.uk" (Poppy 0.1 §3.2: "Several domains MAY name
	// the same issuer, such as a Company with a domain for each country,
	// and they are then one Company"). Each is listed in the metadata's
	// poppy_domains and has documents of its own (domains.go): its
	// poppy.json, its store API at api.<d> (a document of its own, with one
	// more operation, getStoreInfo), its MCP server at mcp.<d> (other tools:
	// search_products, order_status and store_info), its website and
	// browser-session endpoint at <d>, its mediated endpoint at auth.<d> and
	// its conversations endpoint at api.<d>. Accounts, Sessions, tokens and
	// conversations are the Company's, shared by every domain; the mutators
	// below and the MCP knobs apply to Domain's documents only. Nil: Domain
	// alone.
	OtherDomains []string

	// Mutators, applied to the default documents before they are served, so a
	// test can break one rule at a time. Nil: the defaults are served.

	// PoppyJSON edits the poppy.json document (spec §3).
	PoppyJSON func(doc map[string]any)
	// Metadata edits the issuer's RFC 8414 authorization server metadata.
	Metadata func(md map[string]any)
	// ResourceMetadata edits the MCP server's RFC 9728 protected resource metadata.
	ResourceMetadata func(md map[string]any)

	// The MCP server (Poppy 0.1 §6; mcpserver.go).

	// MCPPageSize is the most tools one tools/list page of the MCP server
	// holds; a longer list is paginated with nextCursor. Zero: 2.
	MCPPageSize int

	// NoNonce turns DPoP nonces off: proofs need none, and no response
	// carries DPoP-Nonce. Zero: every DPoP proof must carry the Server's
	// current nonce for its host (RFC 9449 §8, §9; Poppy 0.1 §4.3: "Personal
	// Agents MUST support nonces"): a proof without it gets use_dpop_nonce,
	// and every response of a Company host carries the current DPoP-Nonce.
	// Each host has its own nonce; RotateNonce changes them.
	NoNonce bool
	// RequireNonce is the default now and changes nothing.
	//
	// Deprecated: nonces are required unless NoNonce is set.
	RequireNonce bool
	// TokenLifetime is the lifetime of the Session Tokens issued. Zero: 1 h.
	TokenLifetime time.Duration

	// CacheControl is the Cache-Control header of the discovery documents.
	// Zero: "max-age=300". An ETag is always set.
	CacheControl string
	// DocumentContentType is the Content-Type of the discovery documents
	// and the store API's OpenAPI document, such as "text/plain" (a file
	// host's) or "text/html". Zero: "application/json".
	DocumentContentType string
	// Now is the Server's clock. Zero: time.Now.
	Now func() time.Time

	// Conversations (Poppy 0.1 §7) and the scripted Company Agent.

	// AgentDelay is how long the Company Agent takes to reply; the status
	// is working meanwhile. Zero: 50 ms. Negative: no delay.
	AgentDelay time.Duration
	// NoHumans makes a handoff find no one: the status goes back to idle
	// and the Company Agent says why (§7.9). Zero: a handoff stays queued
	// until the test's Person joins.
	NoHumans bool
	// OnEvent is called with every event the Company adds to a
	// conversation, in order, while the Server holds the conversations'
	// lock: it must return at once and must not call the Server (start a
	// timer or goroutine for that, as the demo Company's person does to
	// join a handoff, package democompany). The Event is a copy. Nil: no
	// one is told.
	OnEvent func(conversationID string, e Event)
	// EventPageSize is the most events one read returns; a read that has
	// more sets has_more (§7.5). Zero: 100.
	EventPageSize int
	// StreamLifetime ends each event stream cleanly after this long (§7.6:
	// "The Company MAY close a stream at any time"). Zero: a stream lasts
	// until the client leaves, the conversation closes or the Server closes.
	StreamLifetime time.Duration
	// ReplayEvents is how many events up to a read's cursor (or a stream's
	// Last-Event-ID) the Company returns again before the new ones, as §7.5
	// allows ("A read after a reconnect can return events again, so it
	// skips event IDs it has already handled"): an agent that does not skip
	// them handles them twice. Events are replayed only beside new ones, so
	// a held read still waits. Zero: 1. Negative: none.
	ReplayEvents int
	// EndlessHasMore makes the Company hostile: every read of events adds
	// a Company message to the conversation first and answers has_more
	// true, forever (§7.5: "When has_more is true, the Personal Agent
	// reads again right away"), so an agent that follows has_more without a
	// limit never stops. Zero: has_more only when a page is full.
	EndlessHasMore bool
	// AgentRole is the role the Company gives the Personal Agent's own
	// messages in events. The spec defines only "company" (§7.5, §7.7), so
	// an agent must recognize its own messages by the IDs it sent. Zero:
	// "personal_agent".
	AgentRole string

	// Sign-in (Poppy 0.1 §4.4-4.9): accounts, Account Tokens, sign-out.

	// Accounts are the Company's accounts. Nil: DefaultAccounts (acct_dana
	// and acct_sam).
	Accounts []Account
	// DeviceInterval is the interval of Device Sign-In, rounded up to whole
	// seconds, at least one (RFC 8628 §3.2). Zero: 5 s.
	DeviceInterval time.Duration
	// AutoApprove approves every device sign-in without a person, for
	// demos. Nil: only the verification page or ApproveDevice approves.
	AutoApprove *AutoApproval
	// MediatedAttempts is how many wrong answers Mediated Sign-In takes:
	// wrong one-time codes before a sign-in fails, and wrong credentials in
	// a row from one client and User before further attempts get 429 for a
	// minute (§4.7). Zero: 3.
	MediatedAttempts int
	// MediatedHTTPStatus sets the HTTP status line of Mediated Sign-In
	// answers (§4.7) by what their body says: its status ("complete",
	// "code_required") or, for one that failed, its error code
	// ("invalid_credentials", "invalid_code", ...), for example
	// {"invalid_credentials": 401, "code_required": 202}. The body is the
	// same whatever the status line: an agent must follow it. A 401 carries
	// a DPoP challenge without an error. Nil: 200 for complete and
	// code_required, and each error's own status (400 for
	// invalid_credentials, 429 for too many attempts).
	MediatedHTTPStatus map[string]int
	// MediatedRedirect answers every post to auth.mediated.endpoint with
	// this redirect status (307 or 308, which keep the method and body) to
	// MediatedMovedPath on the same host, where credentials are taken as at
	// the endpoint. Following it is the agent's violation of §4.7
	// ("Personal Agents MUST NOT send credentials to any endpoint other than
	// the Company's auth.mediated.endpoint"). Zero: no redirect.
	MediatedRedirect int
	// NoAccountTokens makes every sign-in answer without refresh_token,
	// breaking Poppy 0.1 §4.4 ("the Company returns an Account Token as
	// refresh_token"): the Session is signed in, but the agent holds nothing
	// to renew it with, and renewing it with the JWT bearer grant is still
	// refused (§4.2: "A signed-in Session is renewed with the Account Token
	// instead"). Zero: every sign-in issues an Account Token.
	NoAccountTokens bool
	// RotateRefreshTokens makes each refresh_token grant return a new
	// Account Token; the old one then gets invalid_grant (§4.8). Zero: the
	// Account Token stays the same.
	RotateRefreshTokens bool
	// EndSessionsOnSignOut ends the Sessions signed in with a revoked
	// Account Token instead of signing them out, so renewing them gets
	// invalid_session (§4.9). Zero: they continue signed out.
	EndSessionsOnSignOut bool
	// LateSignOut leaves the Session Tokens issued before a sign-out signed
	// in until they expire, as Poppy 0.1 §4.9 allows ("Session Tokens issued
	// before sign-out may still be valid"; Companies "SHOULD check on each
	// request whether the Session is still signed in"): an agent that sends
	// one after the User signed out still acts in the account. Renewals are
	// signed out as usual. Zero: a sign-out takes effect at once, on every
	// token of the Sessions it signs out.
	LateSignOut bool
	// AccountTokenLifetime is the lifetime of the Account Tokens issued,
	// sent as refresh_token_expires_in. Zero: they do not expire.
	AccountTokenLifetime time.Duration

	// The store API (Poppy 0.1 §6; openapi.go, openapi_api.go).

	// OpenAPI edits the store API's OpenAPI document before it is served at
	// https://api.<Domain>/openapi.json. Nil: the default is served.
	OpenAPI func(doc map[string]any)
	// OpenAPIResource gives the openapi entry of poppy.json this resource
	// (§4.3 "Narrower tokens"): the store API then accepts only Session
	// Tokens issued for it. Zero: no resource, general DPoP Session Tokens.
	OpenAPIResource string

	// Flaws make the Server break Company-side rules one at a time (flaws.go),
	// for tools that check Companies. Zero: it breaks none.
	Flaws Flaws

	// Sharing a listener, and agents from elsewhere (front.go, client.go),
	// as poppytest serve runs a Company per test run.

	// Front is the listener and CA the Server shares with other Servers.
	// Nil: Start makes a Front of its own, with a CA of its own.
	Front *Front
	// Listen and Dial, both set, replace the loopback port of a Server
	// without a Front: its own Front listens on what Listen returns and
	// its Transport dials Addr with Dial. For an in-memory network, so a
	// test runs in a testing/synctest bubble (docs/architecture.md, "Time
	// in tests"). Nil: a loopback TCP port.
	Listen func() (net.Listener, error)
	Dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	// ClientID, when set, is the only agent the Company serves: a request
	// authenticated as another client_id is refused with invalid_client, and
	// is not counted as a violation (it is some other test's agent). Zero:
	// any agent.
	ClientID string
	// AgentClient fetches the agent's client_id document and key set
	// (§4.1), for an agent under test that publishes its own, such as at
	// https://localhost:8443/agent.json; it does not follow redirects. Nil:
	// the Server's own Client, which reaches only the Server's hosts
	// (documents given to SetAgentDocuments).
	AgentClient *http.Client

	// MCPTools replace the MCP server's default tools with tools that give
	// canned results (scenario_company.go). Nil: the default tools.
	MCPTools []MCPTool
	// Scenario shapes the Company (scenario.go): its domain when Domain is
	// empty, accounts when Accounts is nil, MCP tools when MCPTools is nil,
	// and its documents, APIs and pages; the mutators above apply after
	// it. The Server does not change it. Nil: the example Company.
	Scenario *Scenario
}

// Server is a reference Company. Its methods are safe for concurrent use,
// from the test and from the Server's own handlers.
type Server struct {
	t         T
	domain    string
	others    []string // Options.OtherDomains, lowercased, without Domain or repeats
	agentHost string
	opts      Options
	timeNow   func() time.Time
	tls       *authority

	// mu guards the fields of every concern below but those with a lock of
	// their own.
	mu sync.Mutex

	// The concerns (concerns.go), each a type with its own files.
	*lifecycle     // the listener, Start and Close, the transport to the Server (lifecycle.go)
	*router        // the hosts and their handlers, and every request's way to one (routes.go)
	*documents     // discovery documents and those a test sets (documents.go)
	*recorder      // what the Server received, answered and found (record.go, violation.go, errors.go)
	*faults        // rate limits, required extensions, slow bodies (faults.go)
	*sessionTokens // Sessions and their tokens, and the checks of every request for one (token.go, flaws.go, assertion.go, client.go, dpop.go, resource.go)
	*signInState   // accounts, every sign-in type and Account Tokens (accounts.go, refresh.go, consent.go, device.go, authorize.go, mediated.go, inspect.go)
	*convState     // conversations, the scripted Company Agent and event streams; its own lock (conversations*.go, companyagent.go, sse.go)
	*shop          // the store's orders, returns and exchanges; its own lock (shop.go)
	*storeAPI      // the store API, an OpenAPI document and its operations (openapi.go, openapi_api.go)
	*mcpState      // the Company's MCP server; its own lock (mcpserver*.go)
	*webState      // the website and the browser-session endpoint (Poppy 0.1 §5); its own lock (web.go, web_site.go)
}

// NewServer returns a started Server. Its Close is registered with t.Cleanup.
func NewServer(t T, opts *Options) *Server {
	t.Helper()
	s := NewUnstartedServer(t, opts)
	s.Start()
	return s
}

// NewUnstartedServer returns a Server that serves nothing until Start, so a
// test can add handlers and documents first. Close is registered with
// t.Cleanup, and is safe to call on a Server that never started.
func NewUnstartedServer(t T, opts *Options) *Server {
	t.Helper()
	s := &Server{t: t}
	s.newConcerns()
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Scenario != nil && s.opts.Domain == "" {
		s.opts.Domain = s.opts.Scenario.Domain
	}
	s.domain = strings.ToLower(orDefault(s.opts.Domain, "example.com"))
	s.agentHost = strings.ToLower(orDefault(s.opts.AgentHost, "agent.example"))
	s.opts.CacheControl = orDefault(s.opts.CacheControl, "max-age=300")
	s.opts.DocumentContentType = orDefault(s.opts.DocumentContentType, "application/json")
	s.timeNow = s.opts.Now
	if s.timeNow == nil {
		s.timeNow = time.Now
	}
	s.others = otherDomains(s.domain, s.opts.OtherDomains)
	s.issueCertificate()
	if s.opts.Scenario != nil {
		s.applyScenario()
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.transport = s.newTransport()
	s.client = &http.Client{Transport: s.transport}
	s.install()
	t.Cleanup(s.Close)
	return s
}

// issueCertificate gives s its certificate: from its Front's CA, or from a
// CA of its own.
func (s *Server) issueCertificate() {
	// Certificates follow the real clock, which TLS clients check, not Options.Now.
	var auth *authority
	var err error
	if s.front = s.opts.Front; s.front != nil {
		auth, err = s.front.ca.issue(s.Domains(), s.agentHost, time.Now())
	} else {
		s.ca, auth, err = newAuthority(s.Domains(), s.agentHost, time.Now())
	}
	if err != nil {
		panic("poppytest: " + err.Error()) // only a broken crypto/rand gets here
	}
	s.tls = auth
}

// install registers the handlers of every feature. Each feature lives in its
// own file and adds its endpoints with s.Handle.
func (s *Server) install() {
	for _, h := range []string{s.domain, "www." + s.domain, "auth." + s.domain,
		"api." + s.domain, "mcp." + s.domain, s.agentHost} {
		s.addHost(h)
	}
	s.installDiscovery()
	s.installToken()
	s.installResource()
	s.installMCPServer()
	s.installConversations()
	s.installSignIn()
	s.installOpenAPI()
	s.installWeb()
	s.installOtherDomains()
	if s.opts.Scenario != nil {
		s.installScenario()
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Domain is the Company's domain, such as "example.com".
func (s *Server) Domain() string { return s.domain }

// Domains are every domain of the Company: Domain, then OtherDomains.
func (s *Server) Domains() []string { return append([]string{s.domain}, s.others...) }

// AgentHost is the agent's host, such as "agent.example".
func (s *Server) AgentHost() string { return s.agentHost }

// Issuer is the Company's auth.issuer, "https://auth.<domain>".
func (s *Server) Issuer() string { return s.URL("auth."+s.domain, "") }

// URL returns "https://" + host + path. It has no port: Client and Transport
// dial every port of the Server's hosts to its listener.
func (s *Server) URL(host, path string) string { return "https://" + host + path }

// CAPEM is the PEM encoding of the Server's CA certificate, for SSL_CERT_FILE.
func (s *Server) CAPEM() []byte { return append([]byte(nil), s.tls.caPEM...) }

// CertPool returns a new pool holding only the Server's CA.
func (s *Server) CertPool() *x509.CertPool { return s.tls.pool.Clone() }
