package mcpauth

// This file is the local user: the person an access token speaks for, the
// pair (issuer, sub), as the rest of poppy-mcp sees it, and the MCP
// sessions bound to it, and the pseudonymous ID logs name it by. Stores key
// their records by User.Key, an opaque hash; logs show a keyed ID
// (LogIDs). Neither shows the sub, which may be personal data (an e-mail
// address).

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/http"
	"strings"
)

// User is one person: the subject an authorization server vouches for.
// RFC 9068 §2.2: sub with iss identifies the resource owner ("the
// combination of iss and sub is unique"). The zero User is nobody.
type User struct {
	// Issuer is the authorization server's issuer identifier (iss).
	Issuer string
	// Subject is the subject identifier it gave the person (sub). It may
	// be personal data: never log it; log the User itself (LogValue).
	Subject string
}

// IsZero reports whether u is nobody.
func (u User) IsZero() bool { return u.Issuer == "" && u.Subject == "" }

// Key is the opaque, stable key of the local user, for per-user storage:
// the SHA-256 of issuer and subject (each length-prefixed, so no two pairs
// share a key), base64url without padding: 43 characters. The zero User's
// key is "", which no person has.
func (u User) Key() string {
	if u.IsZero() {
		return ""
	}
	h := sha256.New()
	h.Write([]byte("poppy-mcp local user\x00"))
	for _, part := range []string{u.Issuer, u.Subject} {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(part))))
		h.Write([]byte(part))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// String shows no more of u than that it is a user: neither the subject
// nor a hash of it, which a list of people would reverse. Log a user
// through LogHandler or LogIDs.
func (u User) String() string { return "user" }

// LogValue makes slog log what String shows, never the subject: a user
// logged by mistake is not named, even pseudonymously.
func (u User) LogValue() slog.Value { return slog.StringValue(u.String()) }

type userKey struct{}

// WithUser returns ctx carrying u: Resource.Require does this for every
// request it admits.
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user ctx carries, and whether it carries one: a
// request to /mcp with an authorization server (--auth-issuer) always
// does; one person's deployment (a static bearer token, stdio) never does.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok && !u.IsZero()
}

// KeyFrom is UserFrom(ctx)'s Key: "" when ctx carries no user.
func KeyFrom(ctx context.Context) string {
	u, _ := UserFrom(ctx)
	return u.Key()
}

// Each MCP session (the 2025-11-25 revision's
// Mcp-Session-Id) is bound to the user who opened it. A session ID is not a
// credential, and it travels (logs, proxies): without the binding, a person
// who learned another's session ID could send requests into that session,
// or open its stream and read what is sent to it, with their own valid
// token. The MCP specification's security best practices: servers "MUST
// NOT use sessions for authentication" and "SHOULD bind session IDs to
// user-specific information".
//
// The binding is stateless: the session ID the client sees is the MCP
// server's with a MAC of the user and that ID appended, and a request's
// session ID is checked against the request's own user and handed on
// without the MAC.

// sessionHeader is the streamable HTTP transport's session header.
const sessionHeader = "Mcp-Session-Id"

// sessionTagLen is the length of the MAC appended: 128 bits, base64url.
const sessionTagLen = 22

// sessionTag is the MAC binding the MCP server's session ID id to u.
func (r *Resource) sessionTag(u User, id string) string {
	m := hmac.New(sha256.New, r.secret)
	m.Write([]byte("poppy-mcp mcp session\x00"))
	m.Write([]byte(u.Key()))
	m.Write([]byte{0})
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))[:sessionTagLen]
}

// untag returns the MCP server's session ID in the client's tagged, when
// it is bound to u.
func (r *Resource) untag(u User, tagged string) (string, bool) {
	i := strings.LastIndexByte(tagged, '.')
	if i < 0 {
		return "", false
	}
	id, tag := tagged[:i], tagged[i+1:]
	return id, hmac.Equal([]byte(tag), []byte(r.sessionTag(u, id)))
}

// bindSession serves req, from u, with next: a session ID in the request
// must be bound to u (else 404, the transport's answer to a session it
// does not know, which makes a client start a new one), and a session ID
// in the response is bound to u.
func (r *Resource) bindSession(w http.ResponseWriter, req *http.Request, u User, next http.Handler) {
	if ids := req.Header.Values(sessionHeader); len(ids) > 0 {
		id, ok := r.untag(u, ids[0])
		if len(ids) > 1 || !ok {
			r.log.Info("mcpauth: a request named an MCP session that is not its user's", "user", r.logIDs.Of(u), "remote", req.RemoteAddr)
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		req = req.Clone(req.Context())
		req.Header.Set(sessionHeader, id)
	}
	next.ServeHTTP(&sessionWriter{ResponseWriter: w, r: r, u: u}, req)
}

// sessionWriter binds the session ID of a response to its user, once, just
// before the header is written.
type sessionWriter struct {
	http.ResponseWriter
	r       *Resource
	u       User
	written bool
}

func (w *sessionWriter) WriteHeader(status int) {
	if !w.written {
		w.written = true
		if id := w.Header().Get(sessionHeader); id != "" {
			w.Header().Set(sessionHeader, id+"."+w.r.sessionTag(w.u, id))
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *sessionWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush lets streams (SSE) through as they are written.
func (w *sessionWriter) Flush() {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath (write
// deadlines on streams).
func (w *sessionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A person's log ID is keyed by the deployment's secret: stable within one
// deployment, so that a person's lines can be followed, and useless
// anywhere else. An unkeyed hash of (issuer, sub) would not do: anyone
// holding the logs and a list of people could hash each pair and find who
// is who. See docs/architecture.md "People in logs".

// logIDLen is the length of a log ID: 12 base64url characters, 72 bits,
// enough to tell people apart.
const logIDLen = 12

// LogIDs makes the pseudonymous IDs logs carry for people. It is safe for
// concurrent use.
type LogIDs struct{ key []byte }

// NewLogIDs returns the log IDs of the deployment whose secret is secret
// (at least 32 bytes; Options.Secret). The HMAC key is derived from it with
// a label of its own (RFC 5869 HKDF-SHA-256), so it is not the secret, and
// none of the secret's other uses (session bindings, cookies) share it.
func NewLogIDs(secret []byte) (*LogIDs, error) {
	if len(secret) < 32 {
		return nil, errors.New("mcpauth: the log IDs' secret must be at least 32 bytes")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "poppy-mcp mcpauth log id", 32) // RFC 5869 §2: extract, then expand with the label as info
	if err != nil {
		return nil, err
	}
	return &LogIDs{key: key}, nil
}

// Of is u's log ID: "" for the zero User.
func (l *LogIDs) Of(u User) string { return l.OfKey(u.Key()) }

// OfKey is the log ID of the user whose Key is key, for work that holds
// the key alone: the first 12 characters of the base64url HMAC-SHA-256 of
// the key (which is unique to one (issuer, sub), see User.Key). "" for the
// default user "".
func (l *LogIDs) OfKey(key string) string {
	if key == "" {
		return ""
	}
	m := hmac.New(sha256.New, l.key) // RFC 2104: HMAC, a keyed hash nobody without the key can compute
	m.Write([]byte("poppy-mcp log id\x00"))
	m.Write([]byte(key))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))[:logIDLen]
}

// LogHandler wraps h so that every record logged with a context that
// carries a user gets a "user" attribute with the user's log ID in ids.
func LogHandler(h slog.Handler, ids *LogIDs) slog.Handler { return logHandler{h, ids} }

type logHandler struct {
	slog.Handler
	ids *LogIDs
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if u, ok := UserFrom(ctx); ok {
		r = r.Clone()
		r.AddAttrs(slog.String("user", l.ids.Of(u)))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(attrs), l.ids}
}

func (l logHandler) WithGroup(name string) slog.Handler {
	return logHandler{l.Handler.WithGroup(name), l.ids}
}

// ForUser returns a logger whose records are handled as if logged with a
// context that carries u, for u's work that logs without a request's
// context (a relay's connection): under LogHandler its lines name u as a
// request's do. The zero User leaves l as it is.
func ForUser(l *slog.Logger, u User) *slog.Logger {
	if u.IsZero() {
		return l
	}
	return slog.New(userHandler{l.Handler(), u})
}

type userHandler struct {
	slog.Handler
	u User
}

func (h userHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.Handler.Enabled(WithUser(ctx, h.u), level)
}

func (h userHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.Handler.Handle(WithUser(ctx, h.u), r)
}

func (h userHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return userHandler{h.Handler.WithAttrs(attrs), h.u}
}

func (h userHandler) WithGroup(name string) slog.Handler {
	return userHandler{h.Handler.WithGroup(name), h.u}
}
