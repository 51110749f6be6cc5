package conversation

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestPendingLeasedElsewhere: a pending message another replica is
// sending (it holds the message's lease) is not sent again by this
// replica's call; once that lease is given back (or expires, as when the
// replica crashed), the next call sends it, and the Company has it once.
// On the old code the message was sent again at once, beside the other
// replica's send.
func TestPendingLeasedElsewhere(t *testing.T) {
	co := newCompany(t, nil, nil)
	ctx := context.Background()
	u := leftPending(t, co, "Yes, the medium one")
	afterHold()
	tr := co.tracker(t)
	names, err := co.st.SecretNames(ctx, tr.pendingPrefix())
	if err != nil || len(names) != 1 {
		t.Fatalf("pending: %q, %v", names, err)
	}
	other, err := co.st.AcquireLease(ctx, "conversation-pending "+names[0], "the other replica", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tr.Read(ctx, u.ConversationID, nil)
	if err != nil || len(r.Resent) != 0 {
		t.Fatalf("while the other replica sends it: resent %+v, %v", r.Resent, err)
	}
	if got := co.texts(u.ConversationID); !slices.Equal(got, []string{"Hello"}) {
		t.Fatalf("the Company recorded %q while the other replica held it", got)
	}
	if err := co.st.ReleaseLease(ctx, other); err != nil {
		t.Fatal(err)
	}
	r, err = tr.Read(ctx, u.ConversationID, nil)
	if err != nil || len(r.Resent) != 1 || r.Resent[0].Outcome != ResentDelivered {
		t.Fatalf("after the other replica gave it back: resent %+v, %v", r.Resent, err)
	}
	if got := co.texts(u.ConversationID); !slices.Equal(got, []string{"Hello", "Yes, the medium one"}) {
		t.Errorf("the Company recorded %q, want the message once", got)
	}
}

// TestPendingLeaseLost: a replica that lost the lease of sending a pending
// message (paused past its expiry while another replica took the message
// over) writes nothing of it: settling it after its send leaves the record
// to the replica that holds the lease now. On the old code it deleted the
// message under the new holder's feet.
func TestPendingLeaseLost(t *testing.T) {
	co := newCompany(t, nil, nil)
	ctx := context.Background()
	leftPending(t, co, "Yes, the medium one")
	afterHold()
	tr := co.tracker(t)
	names, err := co.st.SecretNames(ctx, tr.pendingPrefix())
	if err != nil || len(names) != 1 {
		t.Fatalf("pending: %q, %v", names, err)
	}
	snd, err := tr.leaseSend(ctx, names[0])
	if err != nil || snd.lease == nil {
		t.Fatalf("leaseSend: %+v, %v", snd, err)
	}
	other, err := co.st.TakeLease(ctx, "conversation-pending "+names[0], "the other replica", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer co.st.ReleaseLease(ctx, other)
	tr.settle(ctx, snd, nil)
	if _, err := tr.pending(ctx, names[0]); err != nil {
		t.Errorf("the stale replica's settle removed the message the other replica sends: %v", err)
	}
}
