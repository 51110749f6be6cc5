// This file keeps a Device Sign-In (Poppy 0.1 §4.6) in the store while it
// runs, so that every replica sharing the store sees it: the flow is saved
// when it starts (its device code encrypted like every secret), any replica
// reads its state, and exactly one replica polls it, under a lease that
// expires. A poller that crashed stops renewing its lease; another replica
// takes it within seconds and goes on polling from the interval the last
// one reached (RFC 8628 §3.5: "respect any increase in the polling interval
// required by the "slow_down" error"). Each change is announced on
// SignInChannel, so a replica waiting for the outcome hears of it at once.

package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// SignInChannel is the store notification channel on which a change of a
// kept Device Sign-In is announced. The payload is FlowKey's value: it
// names the person and Company without saying who they are.
const SignInChannel = "poppy_signin"

const (
	// deviceFlowPrefix names the kept Device Sign-Ins: one per Company (by
	// issuer), the latest, in each person's view of the store.
	deviceFlowPrefix = "signin/device/"
	// DeviceLeaseTTL is how long a poller's lease lasts unless renewed
	// (store.KeepLease renews it every third): a replica that crashed while
	// polling is replaced this long after.
	DeviceLeaseTTL = 10 * time.Second
)

// FlowStore is what kept sign-ins need of the store: a person's view of it
// (*store.Store, from Store.ForUser).
type FlowStore interface {
	LeaseStore
	TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (store.Lease, error)
	CheckLease(ctx context.Context, l store.Lease) error
	User() string
	PutSecret(ctx context.Context, name string, value []byte) error
	Secret(ctx context.Context, name string) ([]byte, error)
	SecretNames(ctx context.Context, prefix string) ([]string, error)
	Notify(ctx context.Context, channel, payload string) error
}

// DeviceFlow is a Device Sign-In as the store keeps it. Status, Granted,
// Missing and Detail are the sign-in tools' to set: auth keeps them as
// they are given. Detail is shown to the model, so it never holds a secret.
type DeviceFlow struct {
	// ID identifies this sign-in among the Company's (a newer one replaces it).
	ID     string
	Issuer string
	// Domain is the Company's domain the sign-in was started through.
	Domain string
	// Device is what the User needs, and the device code.
	Device *DeviceAuthorization
	// Interval is the wait before each poll as it is now: the Company's
	// interval with every slow_down added.
	Interval time.Duration
	Status   string
	Granted  []string
	Missing  []string
	Detail   string
	// Owner is the caller's note of whom the sign-in is for, kept sealed
	// with the rest and given back as it was; "" for none.
	Owner string
}

// deviceFlowWire is how a DeviceFlow is kept, sealed by the store.
type deviceFlowWire struct {
	ID                      string    `json:"id"`
	Issuer                  string    `json:"issuer"`
	Domain                  string    `json:"domain"`
	DeviceCode              string    `json:"device_code"`
	UserCode                string    `json:"user_code"`
	VerificationURI         string    `json:"verification_uri"`
	VerificationURIComplete string    `json:"verification_uri_complete,omitempty"`
	ExpiresAt               time.Time `json:"expires_at"`
	IntervalMS              int64     `json:"interval_ms"`
	Scopes                  []string  `json:"scopes"`
	Status                  string    `json:"status"`
	Granted                 []string  `json:"granted,omitempty"`
	Missing                 []string  `json:"missing,omitempty"`
	Detail                  string    `json:"detail,omitempty"`
	Owner                   string    `json:"owner,omitempty"`
}

// NewDeviceFlowID returns a new random ID for a sign-in, with prefix.
func NewDeviceFlowID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// FlowKey names the kept sign-ins of the person st is the view of at the
// Company issuer, as SignInChannel's payloads do: a hash, so a
// notification says nothing of who the person is.
func FlowKey(st FlowStore, issuer string) string {
	h := sha256.Sum256([]byte(st.User() + "\x00" + issuer))
	return hex.EncodeToString(h[:16])
}

// SaveDeviceFlow keeps f in place of the Company's earlier sign-in and
// announces it on SignInChannel.
func SaveDeviceFlow(ctx context.Context, st FlowStore, f *DeviceFlow) error {
	if f.Device == nil || f.Issuer == "" || f.ID == "" {
		return errors.New("auth: save device sign-in: an ID, an issuer and the device authorization are required")
	}
	d := f.Device
	raw, err := json.Marshal(deviceFlowWire{ID: f.ID, Issuer: f.Issuer, Domain: f.Domain, DeviceCode: d.deviceCode.Reveal(),
		UserCode: d.UserCode, VerificationURI: d.VerificationURI, VerificationURIComplete: d.VerificationURIComplete,
		ExpiresAt: d.ExpiresAt, IntervalMS: f.Interval.Milliseconds(), Scopes: d.Scopes,
		Status: f.Status, Granted: f.Granted, Missing: f.Missing, Detail: f.Detail, Owner: f.Owner})
	if err != nil {
		return fmt.Errorf("auth: save device sign-in: %w", err)
	}
	if err := st.PutSecret(ctx, deviceFlowPrefix+f.Issuer, raw); err != nil {
		return fmt.Errorf("auth: save device sign-in: %w", err)
	}
	// At most once: a waiter that misses it reads the store again soon.
	_ = st.Notify(ctx, SignInChannel, FlowKey(st, f.Issuer))
	return nil
}

// LoadDeviceFlow returns the Company's kept Device Sign-In, or an error
// matching store.ErrNotFound when there is none.
func LoadDeviceFlow(ctx context.Context, st FlowStore, issuer string) (*DeviceFlow, error) {
	raw, err := st.Secret(ctx, deviceFlowPrefix+issuer)
	if err != nil {
		return nil, fmt.Errorf("auth: load device sign-in: %w", err)
	}
	return parseDeviceFlow(raw)
}

// parseDeviceFlow reads a kept Device Sign-In. The store authenticated it,
// but it is checked as input all the same: an unreadable one is as good as
// none.
func parseDeviceFlow(raw []byte) (*DeviceFlow, error) {
	var w deviceFlowWire
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("auth: kept device sign-in: %w (%w)", err, store.ErrNotFound)
	}
	if w.ID == "" || w.Issuer == "" || w.DeviceCode == "" || w.Status == "" || w.IntervalMS <= 0 || w.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("auth: kept device sign-in is incomplete: %w", store.ErrNotFound)
	}
	d := &DeviceAuthorization{UserCode: w.UserCode, VerificationURI: w.VerificationURI,
		VerificationURIComplete: w.VerificationURIComplete, ExpiresAt: w.ExpiresAt,
		Interval: time.Duration(min(w.IntervalMS, maxInterval.Milliseconds())) * time.Millisecond, Scopes: slices.Clone(w.Scopes),
		deviceCode: NewSecret(w.DeviceCode)}
	return &DeviceFlow{ID: w.ID, Issuer: w.Issuer, Domain: w.Domain, Device: d, Interval: d.Interval,
		Status: w.Status, Granted: w.Granted, Missing: w.Missing, Detail: w.Detail, Owner: w.Owner}, nil
}

// DeviceFlowHolders returns the local users that keep a Device Sign-In in
// st, the whole state, with one query: the people whose kept sign-ins a
// replica looks at when it takes over those no replica polls.
func DeviceFlowHolders(ctx context.Context, st interface {
	SecretHolders(ctx context.Context, prefix string) ([]string, error)
}) ([]string, error) {
	users, err := st.SecretHolders(ctx, deviceFlowPrefix)
	if err != nil {
		return nil, fmt.Errorf("auth: list device sign-ins: %w", err)
	}
	return users, nil
}

// DeviceFlows returns the kept Device Sign-Ins of the person st is the
// view of, skipping any that cannot be read.
func DeviceFlows(ctx context.Context, st FlowStore) ([]*DeviceFlow, error) {
	names, err := st.SecretNames(ctx, deviceFlowPrefix)
	if err != nil {
		return nil, fmt.Errorf("auth: list device sign-ins: %w", err)
	}
	var out []*DeviceFlow
	for _, name := range names {
		f, err := LoadDeviceFlow(ctx, st, strings.TrimPrefix(name, deviceFlowPrefix))
		if err == nil {
			out = append(out, f)
		}
	}
	return out, nil
}

// DeviceLease is the right to poll the Company's kept Device Sign-In and
// to write it (LeaseDeviceFlow): one lease per person and Company, held by
// the poller of the sign-in kept now. Its fencing token makes the writes
// of a poller that lost it (paused past its expiry, or superseded by a
// newer sign-in) fail, whatever it believes.
type DeviceLease struct {
	// Polling ends when the context given LeaseDeviceFlow does, or as soon
	// as the lease is found lost, so a poller that lost it stops.
	Polling context.Context
	// Store is the person's view of the store fenced by the lease: the
	// kept sign-in is written through it (SaveDeviceFlow), and such a
	// write fails with an error matching store.ErrLeaseLost, changing
	// nothing, once the lease is lost.
	Store FlowStore
	st    FlowStore
	lease store.Lease
	stop  func()
}

// Check reports, with an error matching store.ErrLeaseLost, that the lease
// is lost, so a poller does not send the Company a request on behalf of a
// sign-in another poller has now.
func (l *DeviceLease) Check(ctx context.Context) error { return l.st.CheckLease(ctx, l.lease) }

// Release stops renewing the lease and gives it back, so another replica
// can take over at once.
func (l *DeviceLease) Release() {
	l.stop()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(l.Polling), 5*time.Second)
	defer cancel()
	_ = l.st.ReleaseLease(rctx, l.lease) // a lease not given back expires
}

// deviceLeaseName names the lease of the kept Device Sign-In at the
// Company issuer.
func deviceLeaseName(issuer string) string { return "device-signin " + issuer }

// LeaseDeviceFlow takes the lease of polling and keeping the Company
// issuer's Device Sign-In. A new sign-in (newer) takes it from whoever
// holds it, a poller of the one it replaces included, which is fenced off
// from then on; otherwise (taking a kept sign-in over) it is taken at once
// or not at all: an error matching store.ErrLeaseHeld while another poller
// has it. The lease is renewed until Release.
func LeaseDeviceFlow(ctx context.Context, st FlowStore, issuer string, newer bool) (*DeviceLease, error) {
	b := make([]byte, 16)
	rand.Read(b)
	holder, take := base64.RawURLEncoding.EncodeToString(b), st.AcquireLease
	if newer {
		take = st.TakeLease
	}
	l, err := take(ctx, deviceLeaseName(issuer), holder, DeviceLeaseTTL)
	if err != nil {
		return nil, fmt.Errorf("auth: lease the device sign-in: %w", err)
	}
	polling, stop := st.KeepLease(ctx, l, DeviceLeaseTTL)
	return &DeviceLease{Polling: polling, Store: st.Fenced(l), st: st, lease: l, stop: stop}, nil
}

// PollDeviceFlow is PollDevice for a kept sign-in, under its lease l: it
// starts from f's interval (which a poller before it may have increased),
// keeps each increase through l.Store, so a poller that takes over waits
// as long, and before each request checks the lease is still held: a
// poller that lost it stops with an error matching store.ErrLeaseLost,
// writing nothing.
func (s *Session) PollDeviceFlow(ctx context.Context, l *DeviceLease, f *DeviceFlow) (*SignIn, error) {
	return s.pollDevice(ctx, f.Device, f.Interval, pollHooks{
		slowed: func(interval time.Duration) error {
			f.Interval = interval
			err := SaveDeviceFlow(ctx, l.Store, f)
			if errors.Is(err, store.ErrLeaseLost) {
				return err
			}
			return nil // best effort otherwise: a poller that takes over gets slow_down again at worst
		},
		ready: func() error { return l.Check(ctx) },
	})
}
