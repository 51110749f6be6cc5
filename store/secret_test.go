package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestSecretRedacts(t *testing.T) {
	const plain = "rt-SECRET-value-9f86d081"
	sec := NewSecretString(plain)
	tok := AccountToken{Issuer: "https://auth.example.com", Account: "personal", Token: sec}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %v"} {
		outs = append(outs, fmt.Sprintf(verb, sec), fmt.Sprintf(verb, tok), fmt.Sprintf(verb, &tok))
	}
	outs = append(outs, sec.String(), sec.GoString(), fmt.Sprint(sec), fmt.Sprintln([]Secret{sec}))
	j, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	txt, _ := sec.MarshalText()
	outs = append(outs, string(txt))
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("token", "t", sec, "tok", tok)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("token", "t", sec)
	outs = append(outs, logs.String())
	for _, out := range outs {
		if strings.Contains(out, plain) || strings.Contains(out, fmt.Sprintf("%x", plain)) {
			t.Errorf("secret leaked: %s", out)
		}
	}
	if !strings.Contains(string(j), `"Token":"[REDACTED]"`) {
		t.Errorf("json = %s, want Token redacted", j)
	}
	if sec.RevealString() != plain || string(sec.Reveal()) != plain {
		t.Error("Reveal does not return the secret")
	}
}

func TestSecretValue(t *testing.T) {
	b := []byte("abc")
	sec := NewSecret(b)
	b[0] = 'X' // NewSecret copied
	r := sec.Reveal()
	r[1] = 'Y' // Reveal copied
	if sec.RevealString() != "abc" {
		t.Errorf("secret changed through shared bytes: %q", sec.RevealString())
	}
	if !sec.Equal(NewSecretString("abc")) || sec.Equal(NewSecretString("abd")) || sec.Equal(Secret{}) {
		t.Error("Equal is wrong")
	}
	if !(Secret{}).IsZero() || !NewSecret(nil).IsZero() || sec.IsZero() {
		t.Error("IsZero is wrong")
	}
}

func TestSecretUnmarshalJSON(t *testing.T) {
	var wire struct {
		RefreshToken Secret `json:"refresh_token"`
	}
	if err := json.Unmarshal([]byte(`{"refresh_token":"rt-1\u00e9"}`), &wire); err != nil {
		t.Fatal(err)
	}
	if got := wire.RefreshToken.RevealString(); got != "rt-1é" {
		t.Errorf("refresh_token = %q", got)
	}
	if err := json.Unmarshal([]byte(`{"refresh_token":null}`), &wire); err != nil ||
		wire.RefreshToken.RevealString() != "rt-1é" {
		t.Errorf("null changed the secret or failed: %v", err)
	}
	err := json.Unmarshal([]byte(`{"refresh_token":12345678}`), &wire)
	if err == nil || strings.Contains(err.Error(), "12345678") {
		t.Errorf("a number as a secret: err = %v, want an error that does not quote it", err)
	}
}

// FuzzSecretUnmarshalJSON: a Secret decodes exactly what encoding/json
// decodes into a string, rejects the rest without quoting it, and never
// marshals back its content.
func FuzzSecretUnmarshalJSON(f *testing.F) {
	for _, seed := range []string{`"rt"`, `""`, `null`, `"\u0000\ud800"`, `12`, `{"a":1}`, `"unterminated`, `[]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var sec Secret
		err := sec.UnmarshalJSON(data)
		var want string
		wantErr := json.Unmarshal(data, &want)
		if string(data) == "null" {
			return
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("UnmarshalJSON(%q) err = %v; encoding/json says %v", data, err, wantErr)
		}
		if err != nil {
			if len(data) > 3 && strings.Contains(err.Error(), string(data)) {
				t.Fatalf("error quotes the input: %v", err)
			}
			return
		}
		if sec.RevealString() != want {
			t.Fatalf("UnmarshalJSON(%q) = %q, want %q", data, sec.RevealString(), want)
		}
		if out, _ := json.Marshal(sec); string(out) != `"[REDACTED]"` {
			t.Fatalf("MarshalJSON = %s", out)
		}
	})
}

func TestConcurrentUse(t *testing.T) { forEachBackend(t, testConcurrentUse) }

// testConcurrentUse runs goroutines on two Stores over one state (two
// connection pools, as two processes or replicas would have) under -race.
func testConcurrentUse(t *testing.T, b *backend) {
	ctx := context.Background()
	where := b.fresh(t)
	stores := []*Store{b.openAt(t, where, nil), b.openAt(t, where, nil)}
	const workers, rounds = 8, 20
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			s := stores[w%2]
			for i := range rounds {
				iss := fmt.Sprintf("https://auth.c%d.example", i%5)
				id, err := s.UserID(ctx, iss)
				if err == nil {
					err = s.PutSecret(ctx, fmt.Sprintf("dpop/%s/%d", iss, w), []byte{byte(w), byte(i)})
				}
				if err == nil {
					_, err = s.Secret(ctx, fmt.Sprintf("dpop/%s/%d", iss, w))
				}
				if err == nil {
					err = s.PutSession(ctx, Session{Issuer: iss, UserID: id, ID: fmt.Sprintf("ses_%d", w)})
				}
				if err == nil {
					err = s.MarkSeen(ctx, iss, "cnv", fmt.Sprintf("evt_%d_%d", w, i))
				}
				if err != nil {
					errs <- err
					return
				}
				ids[w] = append(ids[w], id)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range workers {
		if len(ids[w]) != rounds {
			continue // its error is reported above
		}
		for i := range rounds {
			if ids[w][i] != ids[0][i] {
				t.Errorf("worker %d round %d: UserID %q, worker 0 got %q", w, i, ids[w][i], ids[0][i])
			}
		}
	}
	if list, err := stores[0].Sessions(ctx, "https://auth.c0.example"); err != nil || len(list) != workers {
		t.Errorf("Sessions = %d, %v; want %d", len(list), err, workers)
	}
}
