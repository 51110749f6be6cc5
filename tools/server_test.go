package tools

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poppy-mcp/poppy-mcp/discovery"
)

// TestCloseStopsBackground: Close cancels background work and waits for it;
// no work starts after it.
func TestCloseStopsBackground(t *testing.T) {
	t.Parallel()
	s := New(discovery.New(nil, nil), nil)
	var finished atomic.Bool
	started := make(chan struct{})
	if !s.bg.Go(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond) // state is saved after cancellation
		finished.Store(true)
	}) {
		t.Fatal("Go refused work before Close")
	}
	<-started
	s.Close()
	if !finished.Load() {
		t.Fatal("Close returned before background work finished")
	}
	if s.bg.Go(func(context.Context) {}) {
		t.Error("Go accepted work after Close")
	}
}
