package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/app"
	"github.com/carapace-dev/carapace/app/calaccess"
	"github.com/carapace-dev/carapace/app/menu"
	"github.com/carapace-dev/carapace/internal/appstate"
)

// fakeCalendar is macOS's calendar access: Request grants what the user
// "answers" and counts the requests.
type fakeCalendar struct {
	mu       sync.Mutex
	st       calaccess.Status
	answer   calaccess.Status // what Request leaves
	requests int
}

func (f *fakeCalendar) Status() (calaccess.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st, nil
}

func (f *fakeCalendar) Request(context.Context) (calaccess.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	f.st = f.answer
	return f.st, nil
}

func (f *fakeCalendar) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// The app asks for calendar access only when the menu item is clicked,
// shows the access macOS then reports, and writes it in its report for
// carapace doctor; without calendar access to ask for there is neither an
// item nor a report of it.
func TestCalendarAccessFromTheMenu(t *testing.T) {
	h, _ := fakeCore(t, nil)
	cal := &fakeCalendar{st: calaccess.Status{Events: calaccess.NotDetermined, Reminders: calaccess.NotDetermined},
		answer: calaccess.Status{Events: calaccess.Full, Reminders: calaccess.Full}}
	a := startApp(t, h, func(o *app.Options) { o.CalendarAccess = cal })
	tr := a.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
	it, ok := tr.Find("calendar-access")
	if !ok || it.Title != "Allow calendar and reminders access…" || cal.count() != 0 {
		t.Fatalf("before the click: %+v (found %v), %d requests", it, ok, cal.count())
	}
	st, err := appstate.Read(h)
	if err != nil || st.Calendar == nil || st.Calendar.Granted || st.Calendar.Events != calaccess.NotDetermined {
		t.Fatalf("the report before: %+v, %v", st.Calendar, err)
	}
	a.tray.click(t, tr, "calendar-access")
	a.tray.waitFor(t, "access allowed", func(tr menu.Tree) bool {
		it, ok := tr.Find("calendar-access")
		return ok && it.Checked && it.Title == "Calendar and reminders access allowed"
	})
	if cal.count() != 1 {
		t.Fatalf("%d requests for one click", cal.count())
	}
	deadline := time.Now().Add(waitTimeout)
	for st, _ = appstate.Read(h); st.Calendar == nil || !st.Calendar.Granted; st, _ = appstate.Read(h) {
		if time.Now().After(deadline) {
			t.Fatalf("the report never showed the access: %+v", st.Calendar)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.stop()
	a.wait(t)

	// No calendar access to ask for (Linux): no item, no report of it.
	b := startApp(t, h, nil)
	tr = b.tray.waitFor(t, "the core running", titled("status", "Carapace: running"))
	if _, ok := tr.Find("calendar-access"); ok {
		t.Fatal("a calendar item without calendar access to ask for")
	}
	if st, err := appstate.Read(h); err != nil || st.Calendar != nil {
		t.Fatalf("the report without calendar access: %+v, %v", st.Calendar, err)
	}
}
