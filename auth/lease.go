// This file implements the lease around the uses of an Account Token that
// must not overlap across processes: refreshing it (which may rotate it,
// Poppy 0.1 §4.8: "The Personal Agent then MUST use the new one from then
// on"), replacing it with a new sign-in's, and revoking it (§4.9). Two
// processes sharing the state that refresh one rotating token at once would
// send it twice; the second gets invalid_grant, and the token is lost. In
// one process the Account's use lock already orders them; the lease, a row
// in the shared store, orders the processes (and later the replicas of a
// hosted agent).

package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

const (
	// leaseTTL is how long an Account Token's lease lasts: longer than the
	// one token request made under it (bounded by leaseWork), short enough
	// that a process that crashed holding it blocks the others briefly.
	leaseTTL = 45 * time.Second
	// leaseWork bounds the work done under a lease, so it ends before the
	// lease does.
	leaseWork = 30 * time.Second
)

// leaseName names the lease of the Account Token of a User at a Company.
func leaseName(issuer, userID, label string) string {
	return "account-token " + issuer + " " + userID + " " + label
}

// withLease runs f, bounded by leaseWork, holding the lease name in st, and
// waits for the lease while another holder has it, as long as ctx allows.
// f writes through w, st fenced by the lease (store.Store.Fenced): a
// process paused past the lease's expiry, which another took over, writes
// nothing, and its error then says it lost the lease. With no store, f
// runs at once with w nil: the token lives in this process only.
func withLease(ctx context.Context, st AccountStore, name string, f func(ctx context.Context, w AccountStore) error) error {
	if st == nil {
		return f(ctx, nil)
	}
	l, err := acquire(ctx, st, name)
	if err != nil {
		return err
	}
	defer func() {
		// Given back even when ctx is done, so others need not wait for expiry.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = st.ReleaseLease(rctx, l) // a lease not given back expires
	}()
	wctx, cancel := context.WithTimeout(ctx, leaseWork)
	defer cancel()
	err = f(wctx, st.Fenced(l))
	if errors.Is(err, store.ErrLeaseLost) {
		return fmt.Errorf("auth: lost the lease of the Account Token to another process, which goes on: %w", err)
	}
	return err
}

// acquire takes the lease name with a holder ID of its own, waiting while
// another holder has it (the store wakes the wait when it is released).
func acquire(ctx context.Context, st AccountStore, name string) (store.Lease, error) {
	b := make([]byte, 16)
	rand.Read(b)
	holder := base64.RawURLEncoding.EncodeToString(b)
	l, err := st.WaitLease(ctx, name, holder, leaseTTL)
	switch {
	case err == nil:
		return l, nil
	case ctx.Err() != nil:
		return store.Lease{}, fmt.Errorf("auth: another process is using the Account Token: %w", ctx.Err())
	}
	return store.Lease{}, fmt.Errorf("auth: lease the Account Token: %w", err)
}
