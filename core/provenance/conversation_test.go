package provenance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const convA, convB = "0f8fad5b-d9cb-469f-a165-70867728950e", "7c9e6679-7425-40de-944b-e07fc1f90ae7"

// A conversation's first taint is recorded on disk, kept over later ones,
// read back as earlier by a store opened afresh on the same folder (a
// restarted core), and cleared; another conversation is untouched.
func TestConversationsRecordLookupClear(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conversations")
	c, err := NewConversations(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.Lookup(convA); found || err != nil {
		t.Fatalf("lookup before any record: found %v, %v", found, err)
	}
	at := time.Date(2026, 11, 27, 10, 42, 0, 0, time.UTC)
	first := Taint{Tool: "web_fetch", Source: "https://a.example/page", Time: at}
	if w, err := c.Record(convA, "s-one", first); !w || err != nil {
		t.Fatalf("first record: written %v, %v", w, err)
	}
	if w, err := c.Record(convA, "s-two", Taint{Tool: "web_search", Source: "later", Time: at.Add(time.Hour)}); w || err != nil {
		t.Fatalf("second record: written %v, %v (the first taint is kept)", w, err)
	}
	info, err := os.Stat(filepath.Join(dir, convA+".json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the record on disk: %v, %v", info, err)
	}

	reopened, err := NewConversations(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := reopened.Lookup(convA)
	if err != nil || !found {
		t.Fatalf("lookup after re-open: found %v, %v", found, err)
	}
	if got.Session != "s-one" || got.Tool != "web_fetch" || got.Source != first.Source || !got.Time.Equal(at) || !got.Earlier {
		t.Fatalf("record read back: %+v", got)
	}
	want := "this conversation read https://a.example/page at 10:42 UTC (web_fetch), in an earlier session, so what leaves the machine waits for you"
	if r := got.Reason(); r != want {
		t.Fatalf("reason %q, want %q", r, want)
	}
	if _, found, _ := reopened.Lookup(convB); found {
		t.Fatal("another conversation is tainted too")
	}

	if err := reopened.Clear(convA); err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.Lookup(convA); found || err != nil {
		t.Fatalf("lookup after clear: found %v, %v", found, err)
	}
	if err := c.Clear(convA); err != nil {
		t.Fatalf("clearing what is not there: %v", err)
	}
}

// Ids that are not the core's UUIDs never become paths; a record that
// cannot be read is an error (the caller fails closed), and a taint
// recorded over it replaces it.
func TestConversationsRefuseBadIdsAndBadRecords(t *testing.T) {
	dir := t.TempDir()
	c, err := NewConversations(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "../x", "0F8FAD5B-D9CB-469F-A165-70867728950E", convA + "/..", "telegram:42"} {
		if _, err := c.Record(id, "s", Taint{Source: "x", Time: time.Now()}); !errors.Is(err, ErrBadConversation) {
			t.Errorf("Record(%q): %v, want ErrBadConversation", id, err)
		}
		if _, _, err := c.Lookup(id); !errors.Is(err, ErrBadConversation) {
			t.Errorf("Lookup(%q): %v", id, err)
		}
		if err := c.Clear(id); !errors.Is(err, ErrBadConversation) {
			t.Errorf("Clear(%q): %v", id, err)
		}
	}
	for name, data := range map[string]string{
		"garbage":   "not json",
		"no source": `{"time":"2026-11-27T10:42:00Z","session":"s"}`,
		"too large": `{"source":"` + strings.Repeat("a", MaxRecord) + `","time":"2026-11-27T10:42:00Z"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, convB+".json"), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, found, err := c.Lookup(convB); err == nil || found {
			t.Errorf("%s: lookup found %v, err %v; want an error", name, found, err)
		}
	}
	if w, err := c.Record(convB, "s-new", Taint{Source: "https://b.example/", Time: time.Now()}); !w || err != nil {
		t.Fatalf("record over an unreadable one: %v, %v", w, err)
	}
	if got, found, err := c.Lookup(convB); !found || err != nil || got.Session != "s-new" {
		t.Fatalf("after the record: %+v %v %v", got, found, err)
	}
}

// OnTaint's function sees the first taint once, before Taint returns, and
// at once when set on a store tainted already.
func TestStoreOnTaint(t *testing.T) {
	s := New()
	var seen []Taint
	s.OnTaint(func(t Taint) { seen = append(seen, t) })
	if len(seen) != 0 {
		t.Fatalf("called on an untainted store: %v", seen)
	}
	s.Taint(Taint{Source: "first", Time: time.Now()})
	if len(seen) != 1 || seen[0].Source != "first" {
		t.Fatalf("after the first taint: %v", seen)
	}
	s.Taint(Taint{Source: "second", Time: time.Now()})
	if len(seen) != 1 {
		t.Fatalf("called again for a later taint: %v", seen)
	}
	var late []Taint
	s.OnTaint(func(t Taint) { late = append(late, t) })
	if len(late) != 1 || late[0].Source != "first" {
		t.Fatalf("set on a tainted store: %v", late)
	}
}

// The session's own reason is unchanged by the conversation's wording.
func TestReasonOfTheSessionsOwnTaint(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 42, 0, 0, time.UTC)
	r := Taint{Tool: "web_fetch", Source: "https://a.example/", Time: at}.Reason()
	if r != "this session read https://a.example/ at 10:42 UTC (web_fetch), so what leaves the machine waits for you" {
		t.Fatalf("reason %q", r)
	}
}
