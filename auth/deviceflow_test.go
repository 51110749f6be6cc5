package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/teststore"
	"github.com/poppy-mcp/poppy-mcp/store"
)

// keptFlow is a device sign-in as tools keep it.
func keptFlow() *DeviceFlow {
	d := &DeviceAuthorization{UserCode: "ABCD-EFGH", VerificationURI: "https://auth.example.com/device",
		ExpiresAt: time.Now().Add(10 * time.Minute).UTC().Round(time.Second), Interval: 5 * time.Second,
		Scopes: []string{"poppy:read"}, deviceCode: NewSecret("dc-secret-0123456789")}
	return &DeviceFlow{ID: "device_1", Issuer: "https://auth.example.com", Domain: "example.com", Device: d,
		Interval: d.Interval, Status: "pending"}
}

// TestDeviceFlowKept: a kept sign-in reads back as it was saved, device
// code included, in the same person's view only; the store keeps it
// sealed (the device code is not in the database file); a change is
// announced with a key that names neither the person nor the Company.
func TestDeviceFlowKept(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	notes, err := st.Listen(ctx, SignInChannel)
	if err != nil {
		t.Fatal(err)
	}
	f := keptFlow()
	if err := SaveDeviceFlow(ctx, st, f); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-notes:
		if got != FlowKey(st, f.Issuer) || strings.Contains(got, "example") {
			t.Errorf("announced %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement")
	}
	back, err := LoadDeviceFlow(ctx, st, f.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != f.ID || back.Domain != f.Domain || back.Interval != f.Interval || back.Device.deviceCode.Reveal() != "dc-secret-0123456789" ||
		!back.Device.ExpiresAt.Equal(f.Device.ExpiresAt) || !slices.Equal(back.Device.Scopes, f.Device.Scopes) {
		t.Errorf("read back %+v, want %+v", back, f)
	}
	if _, err := LoadDeviceFlow(ctx, st.ForUser("someone else"), f.Issuer); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another person's view: %v", err)
	}
	if FlowKey(st.ForUser("someone else"), f.Issuer) == FlowKey(st, f.Issuer) {
		t.Error("two people's sign-ins share a key")
	}
	all, err := DeviceFlows(ctx, st)
	if err != nil || len(all) != 1 || all[0].ID != f.ID {
		t.Errorf("DeviceFlows = %v, %v", all, err)
	}
}

// TestLeaseDeviceFlow: one poller at a time; a released lease is free at
// once; a poller whose lease another took loses its context.
func TestLeaseDeviceFlow(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	f := keptFlow()
	l, err := LeaseDeviceFlow(ctx, st, f.Issuer, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LeaseDeviceFlow(ctx, st, f.Issuer, false); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("second poller: %v", err)
	}
	l.Release()
	if l.Polling.Err() == nil {
		t.Error("the released poller's context goes on")
	}
	l, err = LeaseDeviceFlow(ctx, st, f.Issuer, false)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l.Release()
}

// TestDeviceFlowSuperseded: a newer sign-in takes the lease from the
// poller of the one it replaces; that poller's outcome, written after,
// changes nothing (ErrLeaseLost), and its check before the next poll says
// the lease is lost. On the
// old code, where each sign-in had a lease of its own, the old outcome
// overwrote the newer sign-in whenever it came between the check and the
// write.
func TestDeviceFlowSuperseded(t *testing.T) {
	ctx := context.Background()
	st := teststore.Open(t)
	old, newer := keptFlow(), keptFlow()
	newer.ID = "device_2"
	ol, err := LeaseDeviceFlow(ctx, st, old.Issuer, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ol.Release()
	if err := SaveDeviceFlow(ctx, ol.Store, old); err != nil {
		t.Fatal(err)
	}
	nl, err := LeaseDeviceFlow(ctx, st, newer.Issuer, true)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Release()
	if err := SaveDeviceFlow(ctx, nl.Store, newer); err != nil {
		t.Fatal(err)
	}
	old.Status = FlowFailed
	if err := SaveDeviceFlow(ctx, ol.Store, old); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the old poller's outcome: %v, want ErrLeaseLost", err)
	}
	if err := ol.Check(ctx); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the old poller's check: %v, want ErrLeaseLost", err)
	}
	if kept, err := LoadDeviceFlow(ctx, st, newer.Issuer); err != nil || kept.ID != newer.ID || kept.Status != FlowPending {
		t.Errorf("kept = %+v, %v; want the newer sign-in, pending", kept, err)
	}
}

// FuzzParseDeviceFlow: a kept sign-in, whatever its bytes, is read or
// refused, never half-read.
func FuzzParseDeviceFlow(f *testing.F) {
	f.Add([]byte(`{"id":"d","issuer":"https://a","device_code":"x","status":"pending","interval_ms":5000,"expires_at":"2030-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"d","issuer":"https://a","device_code":"x","status":"pending","interval_ms":-1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"id":"d","issuer":"https://a","device_code":"x","status":"pending","interval_ms":9223372036854775807,"expires_at":"2030-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := parseDeviceFlow(raw)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("error does not match ErrNotFound: %v", err)
			}
			return
		}
		if d.ID == "" || d.Device == nil || d.Interval <= 0 || d.Interval > maxInterval {
			t.Fatalf("read a bad flow: %+v", d)
		}
	})
}
