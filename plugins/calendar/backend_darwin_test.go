//go:build darwin && cgo

package calendar

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestEventKitOnThisMac runs the EventKit backend against this Mac's own
// event store: what the macOS workflow exercises on its runner, where
// nobody has granted Carapace calendar access. The store opens and says
// its access state in words; without access every read fails with
// ErrNoAccess naming where to allow it (never a crash, never an empty
// answer that looks like "no events"); with access (a developer's Mac that
// allowed it) the calendars and a day of events are read.
func TestEventKitOnThisMac(t *testing.T) {
	b, err := NewEventKitStore(Config{Backend: "eventkit"})
	if err != nil {
		t.Fatal(err)
	}
	k, ok := b.(*EventKit)
	if !ok {
		t.Fatalf("NewEventKitStore returned a %T", b)
	}
	ctx := context.Background()
	for _, reminders := range []bool{false, true} {
		granted, state := k.store.Access(reminders)
		t.Logf("EventKit access, reminders %v: granted %v (%s)", reminders, granted, state)
		if state == "" || strings.HasPrefix(state, "authorization status") {
			t.Errorf("an access state EventKit's backend does not know: %q", state)
		}
		var err error
		if reminders {
			_, err = b.ListReminders(ctx, "", false)
		} else {
			_, err = b.ListEvents(ctx, "", time.Now(), time.Now().Add(24*time.Hour))
		}
		switch {
		case !granted && (!errors.Is(err, ErrNoAccess) || !strings.Contains(err.Error(), "Privacy & Security")):
			t.Errorf("without access, reminders %v: %v; want ErrNoAccess naming where to allow it", reminders, err)
		case granted && err != nil:
			t.Errorf("with access, reminders %v: %v", reminders, err)
		}
	}
}
