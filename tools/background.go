package tools

import (
	"context"
	"sync"
)

// background runs a Server's background work: device sign-in polling and the
// retries of a relay that could not list its tools yet. Each piece of work
// gets a context that ends when close begins, and close waits for all of it,
// so what it saves is saved before the store closes. It is safe for
// concurrent use.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu is held while work starts and while close cancels ctx, so that no
	// work starts once close has begun.
	mu sync.Mutex
}

func newBackground() *background {
	b := &background{}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b
}

// Go runs f in the background until close: f must return soon after ctx is
// done. It reports false, without running f, once close has begun.
func (b *background) Go(f func(ctx context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx.Err() != nil {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f(b.ctx)
	}()
	return true
}

// close cancels the background work and waits for it.
func (b *background) close() {
	b.mu.Lock()
	b.cancel()
	b.mu.Unlock()
	b.wg.Wait()
}
