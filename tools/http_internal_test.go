package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

var _ server.EventStore = (*eventStore)(nil)

// storeEvents records n events numbered from first on a stream and returns their IDs.
func storeEvents(t *testing.T, s *eventStore, session, stream string, first, n int) []string {
	t.Helper()
	var ids []string
	for i := first; i < first+n; i++ {
		id, err := s.StoreEvent(context.Background(), session, stream, json.RawMessage(strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// replay returns the messages replayed after id, and the stream named.
func replay(s *eventStore, session, id string) (string, []string, error) {
	var got []string
	stream, err := s.ReplayEventsAfter(context.Background(), session, id, func(_ string, m json.RawMessage) error {
		got = append(got, string(m))
		return nil
	})
	return stream, got, err
}

// kept counts the events the store holds, in rings and in indexes.
func (s *eventStore) kept() (events, indexed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.sessions {
		for _, r := range l.streams {
			events += len(r.events)
		}
		indexed += len(l.index)
	}
	return events, indexed
}

// TestEventStoreCap: a stream keeps its last perStream events, so memory
// stops growing; resuming after a recent event replays the rest in order,
// after a dropped one fails as unknown.
func TestEventStoreCap(t *testing.T) {
	t.Parallel()
	s := newEventStore(5, 4)
	ids := storeEvents(t, s, "sess", "get", 1, 12) // events 1..12; 8..12 kept
	if events, indexed := s.kept(); events != 5 || indexed != 5 {
		t.Fatalf("%d events, %d indexed after 12 stored; want 5", events, indexed)
	}
	stream, got, err := replay(s, "sess", ids[7]) // after event 8
	if err != nil || stream != "get" || !slices.Equal(got, []string{"9", "10", "11", "12"}) {
		t.Errorf("replay after 8 = %q %v %v", stream, got, err)
	}
	if _, _, err := replay(s, "sess", ids[6]); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("replay after the dropped event 7: %v, want ErrUnknownEventID", err)
	}
	if _, got, err := replay(s, "sess", ids[11]); err != nil || len(got) != 0 {
		t.Errorf("replay after the last event = %v %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1", ids[8] + "0"} {
		if _, _, err := replay(s, "sess", bad); !errors.Is(err, server.ErrUnknownEventID) {
			t.Errorf("replay after %q: %v", bad, err)
		}
	}
	if _, _, err := replay(s, "other", ids[9]); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("another session resumed this one's event: %v", err)
	}
}

// TestEventStoreStreams: a session keeps maxStreams streams, dropping the one
// written to least recently (a long-lived GET stream that is still written
// to stays); streams do not see each other's events; purging drops all.
func TestEventStoreStreams(t *testing.T) {
	t.Parallel()
	s := newEventStore(5, 3)
	get := storeEvents(t, s, "sess", "get", 1, 1)
	first := storeEvents(t, s, "sess", "post1", 100, 2)
	storeEvents(t, s, "sess", "get", 2, 1)
	for i := 2; i <= 4; i++ {
		storeEvents(t, s, "sess", fmt.Sprintf("post%d", i), 100*i, 2)
		storeEvents(t, s, "sess", "get", 1+i, 1)
	}
	if events, indexed := s.kept(); events != 5+2+2 || indexed != events {
		t.Fatalf("%d events, %d indexed; want 9 in 3 streams", events, indexed)
	}
	if _, _, err := replay(s, "sess", first[0]); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("the stalest stream is still kept: %v", err)
	}
	if stream, got, err := replay(s, "sess", get[0]); err != nil || stream != "get" || !slices.Equal(got, []string{"2", "3", "4", "5"}) {
		t.Errorf("replay of the GET stream = %q %v %v", stream, got, err)
	}
	other := storeEvents(t, s, "other", "get", 1, 2)
	if err := s.PurgeSession(context.Background(), "sess"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := replay(s, "sess", get[0]); !errors.Is(err, server.ErrUnknownEventID) {
		t.Errorf("replay after purge: %v", err)
	}
	if _, got, err := replay(s, "other", other[0]); err != nil || !slices.Equal(got, []string{"2"}) {
		t.Errorf("another session after the purge = %v %v", got, err)
	}
}
