package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/internal/metrics"
)

// gathered is the value of the unlabelled metric name in rec.
func gathered(t *testing.T, rec *metrics.Recorder, name string) float64 {
	t.Helper()
	families, err := rec.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestMetrics: with Options.Metrics, the leases this process holds are
// counted once each (acquiring one held already renews it), released or
// lost ones no more; a statement the database fails counts as a store
// error, a lookup that finds no row does not.
func TestMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		rec := metrics.New()
		st := b.openNew(t, &Options{Key: testKey, Metrics: rec})
		l, err := st.AcquireLease(ctx, "refresh", "me", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AcquireLease(ctx, "refresh", "me", time.Minute); err != nil { // renews
			t.Fatal(err)
		}
		if _, err := st.ForUser("bob").AcquireLease(ctx, "refresh", "me", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AcquireLease(ctx, "refresh", "another", time.Minute); !errors.Is(err, ErrLeaseHeld) { // no row: no store error
			t.Fatalf("another holder's acquire: %v", err)
		}
		if got := gathered(t, rec, "poppy_mcp_leases_held"); got != 2 {
			t.Errorf("leases held: %v, want 2", got)
		}
		if err := st.ReleaseLease(ctx, l); err != nil {
			t.Fatal(err)
		}
		if got := gathered(t, rec, "poppy_mcp_leases_held"); got != 1 {
			t.Errorf("leases held after a release: %v, want 1", got)
		}
		if got := gathered(t, rec, "poppy_mcp_store_errors_total"); got != 0 {
			t.Errorf("store errors before any failed: %v", got)
		}
		st.Close()
		if err := st.Check(ctx); err == nil {
			t.Fatal("Check on a closed store passed")
		}
		if got := gathered(t, rec, "poppy_mcp_store_errors_total"); got != 1 {
			t.Errorf("store errors after a failed Check: %v, want 1", got)
		}
	})
}
