package mcpauth

// This file is the local user: the person an access token speaks for, the
// pair (issuer, sub), as the rest of poppy-mcp sees it. Stores key their
// records by User.Key, an opaque hash; logs show User.LogID, a shorter one.
// Neither shows the sub, which may be personal data (an e-mail address).

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"log/slog"
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

// LogID is the pseudonymous ID logs carry for the user: the first twelve
// characters of Key (72 bits), enough to tell people apart and to find the
// user's records, and nothing of the subject itself.
func (u User) LogID() string {
	if u.IsZero() {
		return ""
	}
	return u.Key()[:12]
}

// String is the LogID, so that a User printed by mistake shows no subject.
func (u User) String() string { return "user:" + u.LogID() }

// LogValue makes slog log the LogID, never the subject.
func (u User) LogValue() slog.Value { return slog.StringValue(u.LogID()) }

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

// LogHandler wraps h so that every record logged with a context that
// carries a user gets a "user" attribute with its LogID.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if u, ok := UserFrom(ctx); ok {
		r = r.Clone()
		r.AddAttrs(slog.String("user", u.LogID()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
