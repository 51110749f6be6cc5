package app

// This file is the deployment's secret: 32 random bytes kept in the state
// that bind MCP sessions to people, seal their browsers' cookies and key
// their log IDs (docs/architecture.md "People in logs"). It is shared by
// every process, and every replica, of the state, so a restart signs no
// browser out.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/poppy-mcp/poppy-mcp/store"
)

// SecretName is the deployment's secret's name in the store (store.Store.Secret).
const SecretName = "mcpauth/secret"

// secretSize is the secret's length in bytes; a shorter one is made again.
const secretSize = 32

// secretTries bounds how many times DeploymentSecret waits for another
// process that holds the lease on the secret.
const secretTries = 50

// DeploymentSecret is the deployment's secret in st, made on the first
// start. Replicas starting at once agree on one: the first to hold the
// lease makes it, the others read it.
func DeploymentSecret(ctx context.Context, st *store.Store) ([]byte, error) {
	holder := randomHolder()
	for range secretTries {
		b, err := StoredDeploymentSecret(ctx, st)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		lease, err := st.AcquireLease(ctx, SecretName, holder, 30*time.Second)
		if errors.Is(err, store.ErrLeaseHeld) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return makeSecret(ctx, st, lease)
	}
	return nil, errors.New("another process held the lease on it for too long")
}

// StoredDeploymentSecret is the deployment's secret in st, or an error
// matching store.ErrNotFound before a hosted serve made one.
func StoredDeploymentSecret(ctx context.Context, st *store.Store) ([]byte, error) {
	b, err := st.Secret(ctx, SecretName)
	if err == nil && len(b) < secretSize {
		return nil, fmt.Errorf("app: the deployment's secret is too short: %w", store.ErrNotFound)
	}
	return b, err
}

// makeSecret makes and stores the secret under lease, unless another
// process did first.
func makeSecret(ctx context.Context, st *store.Store, lease store.Lease) ([]byte, error) {
	defer st.ReleaseLease(context.WithoutCancel(ctx), lease)
	if b, err := StoredDeploymentSecret(ctx, st); err == nil {
		return b, nil
	}
	b := make([]byte, secretSize)
	rand.Read(b)
	return b, st.Fenced(lease).PutSecret(ctx, SecretName, b) // a process that lost the lease stores nothing
}

// randomHolder names this process as a lease holder.
func randomHolder() string {
	b := make([]byte, 12)
	rand.Read(b)
	return fmt.Sprintf("serve-%d-%x", os.Getpid(), b)
}
