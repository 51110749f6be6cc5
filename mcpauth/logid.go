package mcpauth

// This file is the pseudonymous ID logs name a person by, and the log
// handler that adds it. The ID is keyed by the deployment's secret: stable
// within one deployment, so that a person's lines can be followed, and
// useless anywhere else. An unkeyed hash of (issuer, sub) would not do:
// anyone holding the logs and a list of people could hash each pair and
// find who is who. See docs/architecture.md "People in logs".

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
)

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
	key, err := hkdf.Key(sha256.New, secret, nil, "poppy-mcp mcpauth log id", 32)
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
	m := hmac.New(sha256.New, l.key)
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
