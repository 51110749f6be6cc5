package auth

import (
	"context"
	"slices"
	"testing"
)

// TestSignInsPageFinishedElsewhere: a mediated sign-in started through one
// replica's SignIns (a) is kept pending; the other replica (b), where its
// page is used, finds it by ID (Picture) and finishes it with its own
// Session; a then reads it complete (Latest) and its own Session, another
// one, is signed in with the Account Token b stored. A page of an older
// sign-in finds nothing once a newer one replaced it.
func TestSignInsPageFinishedElsewhere(t *testing.T) {
	ctx := context.Background()
	co := newSignInCo(t, nil)
	a, b := newSignIns(t, co), newSignIns(t, co)
	sa := a.open(t, co)
	f := NewFlow(KindMediated, co.c.Domain, []string{"poppy:read"}, nil)
	f.Page = "https://agent.test/pages/p/x"
	a.signIns.StartPage(ctx, co.c.Issuer, f)
	if kept, err := LoadPageFlow(ctx, co.st, co.c.Issuer); err != nil || kept.ID != f.ID || kept.Status != FlowPending {
		t.Fatalf("kept = %+v, %v", kept, err)
	}
	if p := b.signIns.Latest(ctx, co.c.Issuer); p == nil || p.ID != f.ID || !p.Pending() {
		t.Fatalf("b's latest while pending = %+v", p)
	}
	pic := b.signIns.Picture(ctx, co.c.Issuer, f.ID)
	sb := b.open(t, co)
	if pic == nil || sb.Info().ID == sa.Info().ID {
		t.Fatalf("picture %v; sessions %s and %s", pic, sb.Info().ID, sa.Info().ID)
	}
	st, err := sb.SignInMediated(ctx, f.Scopes, creds("dana@example.com", "correct-horse-battery"))
	if err != nil || st.Status != MediatedComplete {
		t.Fatalf("step = %+v, %v", st, err)
	}
	b.signIns.Finish(ctx, co.c.Issuer, sb, pic, st.SignIn, nil)
	if got := a.signIns.Latest(ctx, co.c.Issuer); got != f || f.State().Status != FlowComplete || !slices.Equal(f.State().Granted, []string{"poppy:read"}) {
		t.Fatalf("a's latest = %+v", f.State())
	}
	if !sa.Info().SignedIn {
		t.Error("a's own Session was not signed in with the Account Token b stored")
	}
	newer := NewFlow(KindMediated, co.c.Domain, []string{"poppy:read"}, nil)
	a.signIns.StartPage(ctx, co.c.Issuer, newer)
	if b.signIns.Picture(ctx, co.c.Issuer, f.ID) != nil {
		t.Error("the page of a replaced sign-in still finds it")
	}
}

// TestKeptStepsRoundTrip: a Direct Sign-In and a mediated step waiting for
// its code come back from their kept bytes as they were.
func TestKeptStepsRoundTrip(t *testing.T) {
	d := &DirectSignIn{URL: "https://a.test/authorize?x", State: "st", RedirectURI: "https://agent.test/oauth/callback",
		Scopes: []string{"poppy:read"}, verifier: NewSecret("verifier-1")}
	b, err := d.MarshalKept()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeptDirect(b)
	if err != nil || back.State != "st" || back.verifier.Reveal() != "verifier-1" || back.RedirectURI != d.RedirectURI {
		t.Fatalf("direct back = %+v, %v", back, err)
	}
	step := &MediatedStep{Status: MediatedCodeRequired, SentTo: "d***@example.com", signInID: "sgn_1", scopes: []string{"poppy:read"}, endpoint: "https://a.test/poppy/sign-in"}
	if b, err = step.MarshalKept(); err != nil {
		t.Fatal(err)
	}
	got, err := ParseKeptStep(b)
	if err != nil || got.signInID != "sgn_1" || got.endpoint != step.endpoint || got.SentTo != step.SentTo {
		t.Fatalf("step back = %+v, %v", got, err)
	}
	if _, err := (&MediatedStep{Status: MediatedComplete}).MarshalKept(); err == nil {
		t.Error("a complete step was kept")
	}
}
