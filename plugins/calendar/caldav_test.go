package calendar

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil/caldavserver"
)

// Events: created, listed in the user's zone, updated, deleted, against a
// real Radicale.
func TestEventLifecycle(t *testing.T) {
	e := newEnv(t)
	created := e.call(t, "calendar_create", map[string]any{
		"title": "Dentist", "start": "2026-10-27T14:30", "duration": "45m", "location": "Rue de Rivoli", "notes": "bring the card",
	})["event"].(map[string]any)
	if created["start"] != "2026-10-27T14:30:00+01:00" || created["end"] != "2026-10-27T15:15:00+01:00" {
		t.Fatalf("created %v: want 14:30-15:15 +01:00", created)
	}
	id := created["id"].(string)

	allDay := e.call(t, "calendar_create", map[string]any{"title": "Holiday", "start": "2026-10-28", "end": "2026-10-29"})["event"].(map[string]any)
	if allDay["all_day"] != true || allDay["start_date"] != "2026-10-28" || allDay["end_date"] != "2026-10-29" {
		t.Fatalf("all-day %v: want 2026-10-28 to 2026-10-29 (inclusive)", allDay)
	}

	list := events(t, e.call(t, "calendar_list", map[string]any{"from": "2026-10-26", "to": "2026-11-01"}))
	if len(list) != 2 || list[0]["id"] != id || list[0]["title"] != "Dentist" || list[0]["location"] != "Rue de Rivoli" || list[1]["title"] != "Holiday" || list[1]["start_date"] != "2026-10-28" {
		t.Fatalf("list %v: want the dentist then the holiday", list)
	}
	// Outside the range: nothing (positive control above).
	if l := events(t, e.call(t, "calendar_list", map[string]any{"from": "2026-10-30", "to": "2026-11-01"})); len(l) != 0 {
		t.Fatalf("list of another week: %v", l)
	}

	upd := e.call(t, "calendar_update", map[string]any{"id": id, "version": list[0]["version"], "title": "Dentist (Dr. Roux)", "start": "2026-10-27T16:00"})["event"].(map[string]any)
	if upd["title"] != "Dentist (Dr. Roux)" || upd["start"] != "2026-10-27T16:00:00+01:00" || upd["end"] != "2026-10-27T16:45:00+01:00" || upd["location"] != "Rue de Rivoli" {
		t.Fatalf("updated %v: want the new title, 16:00-16:45 (length kept), location kept", upd)
	}
	if upd["version"] == list[0]["version"] {
		t.Fatalf("version unchanged after an update: %v", upd["version"])
	}

	e.call(t, "calendar_delete", map[string]any{"id": id})
	list = events(t, e.call(t, "calendar_list", map[string]any{"from": "2026-10-26", "to": "2026-11-01"}))
	if len(list) != 1 || list[0]["title"] != "Holiday" {
		t.Fatalf("after delete: %v, want the holiday only", list)
	}
	if _, err := e.try("calendar_delete", map[string]any{"id": id}); toolCode(err) != "NOT_FOUND" {
		t.Fatalf("deleting again: %v, want NOT_FOUND", err)
	}
}

// Reminders: a due one is stored with an alarm at its due time; listed,
// completed, then listed only with include_completed.
func TestReminderLifecycle(t *testing.T) {
	e := newEnv(t)
	r := e.call(t, "reminder_create", map[string]any{"title": "Call the plumber", "due": "2026-10-27T10:00", "priority": "high", "notes": "leak under the sink"})["reminder"].(map[string]any)
	if r["due"] != "2026-10-27T10:00:00+01:00" || r["priority"] != "high" || r["completed"] != false {
		t.Fatalf("created %v", r)
	}
	e.call(t, "reminder_create", map[string]any{"title": "Buy bread"})
	id := r["id"].(string)

	// The alarm, as the server stores it: at 09:00 UTC, the due time.
	p, _, _, err := e.backend.parseID(t.Context(), id, "VTODO")
	if err != nil {
		t.Fatal(err)
	}
	code, body, _ := e.raw(t, http.MethodGet, strings.TrimSuffix(e.srv.URL, "/")+p, "", nil)
	if code != http.StatusOK || !strings.Contains(body, "BEGIN:VALARM") || !strings.Contains(body, "TRIGGER;VALUE=DATE-TIME:20261027T090000Z") || !strings.Contains(body, "ACTION:DISPLAY") {
		t.Fatalf("GET %s: HTTP %d, want a VALARM at 20261027T090000Z:\n%s", p, code, body)
	}
	// Without a due time, no alarm.
	rs := e.call(t, "reminder_list", map[string]any{})["reminders"].([]any)
	if len(rs) != 2 || rs[0].(map[string]any)["title"] != "Call the plumber" || rs[1].(map[string]any)["title"] != "Buy bread" {
		t.Fatalf("list %v: want the plumber (due) then bread", rs)
	}
	bp, _, _, _ := e.backend.parseID(t.Context(), rs[1].(map[string]any)["id"].(string), "VTODO")
	if _, body, _ := e.raw(t, http.MethodGet, strings.TrimSuffix(e.srv.URL, "/")+bp, "", nil); strings.Contains(body, "VALARM") {
		t.Fatalf("a reminder without due has an alarm:\n%s", body)
	}

	done := e.call(t, "reminder_complete", map[string]any{"id": id})["reminder"].(map[string]any)
	if done["completed"] != true || done["completed_at"] == nil {
		t.Fatalf("completed %v", done)
	}
	rs = e.call(t, "reminder_list", map[string]any{})["reminders"].([]any)
	if len(rs) != 1 || rs[0].(map[string]any)["title"] != "Buy bread" {
		t.Fatalf("open reminders %v: want bread only", rs)
	}
	rs = e.call(t, "reminder_list", map[string]any{"include_completed": true})["reminders"].([]any)
	if len(rs) != 2 {
		t.Fatalf("all reminders %v: want both", rs)
	}
}

// A weekly event with an EXDATE and a moved occurrence, over a range in
// which daylight saving time ends (Europe/Paris, 2026-10-25): the plugin's
// expansion is python dateutil's, which the test runs on the same file, and
// the meeting stays at 09:00 local on both sides of the change.
func TestRecurringAcrossDST(t *testing.T) {
	py := caldavserver.RequireDateutil(t)
	e := newEnv(t)
	for _, f := range []string{"weekly.ics", "newyork.ics"} {
		if code, body, _ := e.raw(t, http.MethodPut, e.work+f, readFile(t, filepath.Join("testdata", f)), map[string]string{"Content-Type": "text/calendar"}); code != http.StatusCreated {
			t.Fatalf("PUT %s: HTTP %d: %s", f, code, body)
		}
	}
	ranges := []struct{ file, from, to string }{
		// Europe/Paris, weekly, COUNT=12, an EXDATE, a moved occurrence;
		// daylight saving time ends on 2026-10-25.
		{"weekly.ics", "2026-10-12T00:00:00Z", "2026-11-09T00:00:00Z"}, // across the change, the EXDATE and the move
		{"weekly.ics", "2026-09-01T00:00:00Z", "2026-12-31T00:00:00Z"}, // the whole series
		{"weekly.ics", "2026-10-26T08:15:00Z", "2026-10-26T08:20:00Z"}, // inside one occurrence
		{"weekly.ics", "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z"}, // the moved-away day: empty
		// America/New_York, daily until a UTC instant, two EXDATEs in one
		// property, a moved occurrence on the day it starts on
		// 2027-03-14.
		{"newyork.ics", "2027-03-12T00:00:00Z", "2027-03-17T00:00:00Z"},
		{"newyork.ics", "2027-03-01T00:00:00Z", "2027-03-31T00:00:00Z"},
	}
	for _, r := range ranges {
		ics := filepath.Join("testdata", r.file)
		t.Run(r.file+"_"+r.from+"_"+r.to, func(t *testing.T) {
			out, err := exec.Command(py, filepath.Join("testdata", "expand.py"), ics, r.from, r.to).Output()
			if err != nil {
				t.Fatalf("dateutil: %v", err)
			}
			var want [][3]string
			if err := json.Unmarshal(out, &want); err != nil {
				t.Fatalf("dateutil's answer %s: %v", out, err)
			}
			var got [][3]string
			for _, ev := range events(t, e.call(t, "calendar_list", map[string]any{"from": r.from, "to": r.to})) {
				if (r.file == "weekly.ics") != strings.HasPrefix(ev["title"].(string), "Standup") {
					continue // the other file's
				}
				s, _ := time.Parse(time.RFC3339, ev["start"].(string))
				en, _ := time.Parse(time.RFC3339, ev["end"].(string))
				got = append(got, [3]string{s.UTC().Format(time.RFC3339), en.UTC().Format(time.RFC3339), ev["title"].(string)})
			}
			sort.Slice(got, func(i, j int) bool { return got[i][0] < got[j][0] })
			if len(want) == 0 && len(got) == 0 {
				return
			}
			if g, w := mustJSON(got), mustJSON(want); g != w {
				t.Fatalf("plugin:   %s\ndateutil: %s", g, w)
			}
		})
	}
	// And in the user's words: 09:00 on both sides of the change.
	evs := events(t, e.call(t, "calendar_list", map[string]any{"from": "2026-10-12", "to": "2026-11-08"}))
	var starts []string
	for _, ev := range evs {
		starts = append(starts, ev["start"].(string))
		if ev["recurring"] != true {
			t.Errorf("%v is not marked recurring", ev)
		}
	}
	want := []string{"2026-10-12T09:00:00+02:00", "2026-10-26T09:00:00+01:00", "2026-11-03T14:00:00+01:00"}
	if strings.Join(starts, " ") != strings.Join(want, " ") {
		t.Fatalf("starts %v, want %v", starts, want)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// An update that lost the race is refused with CONFLICT, and what the
// other writer wrote is still there; the same update with the current
// version (the positive control) goes through.
func TestStaleUpdateConflicts(t *testing.T) {
	e := newEnv(t)
	ev := e.call(t, "calendar_create", map[string]any{"title": "Review", "start": "2026-10-27T10:00", "duration": "1h"})["event"].(map[string]any)
	id, v1 := ev["id"].(string), ev["version"].(string)
	if v1 == "" {
		t.Fatal("no version after create")
	}
	// Someone else renames it (another device): the version changes.
	other := e.call(t, "calendar_update", map[string]any{"id": id, "notes": "agenda from Bob"})["event"].(map[string]any)
	v2 := other["version"].(string)
	if v2 == v1 {
		t.Fatal("the version did not change")
	}

	cases := []struct {
		name string
		do   func() error
	}{
		{"update with the stale version", func() error {
			_, err := e.try("calendar_update", map[string]any{"id": id, "version": v1, "title": "Review (moved)", "notes": ""})
			return err
		}},
		{"delete with the stale version", func() error {
			_, err := e.try("calendar_delete", map[string]any{"id": id, "version": v1})
			return err
		}},
		{"a PUT that lost the race between read and write", func() error {
			o, err := e.backend.get(t.Context(), mustPath(t, e, id), uidOf(t, e, id), "VEVENT")
			if err != nil {
				return err
			}
			master(o.cal, "VEVENT").Props.SetText("SUMMARY", "lost")
			_, err = e.backend.put(t.Context(), mustPath(t, e, id), o.cal, v1)
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			if toolCode(err) != "CONFLICT" && !isConflict(err) {
				t.Fatalf("got %v, want CONFLICT", err)
			}
			l := events(t, e.call(t, "calendar_list", map[string]any{"from": "2026-10-27", "to": "2026-10-27"}))
			if len(l) != 1 || l[0]["title"] != "Review" || l[0]["notes"] != "agenda from Bob" || l[0]["version"] != v2 {
				t.Fatalf("after the refused change: %v; want the other writer's version intact", l)
			}
		})
	}
	// The positive control: the current version goes through.
	upd := e.call(t, "calendar_update", map[string]any{"id": id, "version": v2, "title": "Review (moved)"})["event"].(map[string]any)
	if upd["title"] != "Review (moved)" || upd["notes"] != "agenda from Bob" {
		t.Fatalf("update with the current version: %v", upd)
	}
}

func isConflict(err error) bool {
	return err != nil && strings.Contains(err.Error(), ErrConflict.Error())
}

func mustPath(t *testing.T, e *env, id string) string {
	p, _, _, err := e.backend.parseID(t.Context(), id, "VEVENT")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func uidOf(t *testing.T, e *env, id string) string {
	_, u, _, err := e.backend.parseID(t.Context(), id, "VEVENT")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// An event with attendees is not changed behind their back: without
// notify_attendees the update is refused, with it (a high-risk call, by
// the manifest) it goes through.
func TestAttendeesNeedNotify(t *testing.T) {
	e := newEnv(t)
	ev := e.call(t, "calendar_create", map[string]any{"title": "Lunch", "start": "2026-10-27T12:00", "duration": "1h", "attendees": []any{"bob@example.com"}})["event"].(map[string]any)
	if a, _ := ev["attendees"].([]any); len(a) != 1 || a[0] != "bob@example.com" {
		t.Fatalf("attendees %v", ev["attendees"])
	}
	id := ev["id"].(string)
	if _, err := e.try("calendar_update", map[string]any{"id": id, "title": "Lunch (13:00)"}); toolCode(err) != "HAS_ATTENDEES" {
		t.Fatalf("update without notify_attendees: %v, want HAS_ATTENDEES", err)
	}
	upd := e.call(t, "calendar_update", map[string]any{"id": id, "title": "Lunch (13:00)", "notify_attendees": true})["event"].(map[string]any)
	if upd["title"] != "Lunch (13:00)" {
		t.Fatalf("update with notify_attendees: %v", upd)
	}
}

// Ids are checked: garbage, and a path outside the account's collections,
// are refused before anything is sent.
func TestBadIDs(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"not-base64!", makeID("/alice/work/../../etc/passwd", "x"), makeID("/bob/work/x.ics", "x"), makeID("/alice/work/", "x"), makeID("/alice/work/a.ics", "")} {
		if _, err := e.try("calendar_delete", map[string]any{"id": id}); toolCode(err) != "BAD_ID" {
			t.Errorf("id %q: %v, want BAD_ID", id, err)
		}
	}
	// Positive control: a real id's shape passes the check (and the
	// object is not there).
	if _, err := e.try("calendar_delete", map[string]any{"id": makeID("/alice/work/nothing.ics", "x")}); toolCode(err) != "NOT_FOUND" {
		t.Errorf("an id in alice's calendar: %v, want NOT_FOUND", err)
	}
}

// Verify (doctor --online) logs in and lists the calendars; a wrong
// password is reported as such.
func TestVerify(t *testing.T) {
	srv := caldavserver.Start(t, alice)
	srv.MkCalendar(t, alice, "work", "VEVENT")
	for _, c := range []struct {
		password string
		ok       bool
		says     string
	}{
		{alice.Password, true, "work (VEVENT)"},
		{"wrong", false, "refused the username and password"},
	} {
		h := New(Options{})
		if err := h.Init(t.Context(), map[string]any{"caldav_url": srv.URL, "username": "alice", "time_zone": "Europe/Paris"}, creds{caldavserverPassword: c.password}); err != nil {
			t.Fatal(err)
		}
		res, err := h.Verify(t.Context())
		if err != nil || res.OK != c.ok || !strings.Contains(res.Message, c.says) {
			t.Fatalf("password %q: %+v, %v; want ok %v saying %q", c.password, res, err, c.ok, c.says)
		}
		if wantFix := !c.ok; wantFix != strings.Contains(res.Fix, "carapace auth set --plugin calendar --key caldav_password") {
			t.Fatalf("password %q: fix %q", c.password, res.Fix)
		}
		if strings.Contains(res.Message, c.password) {
			t.Fatalf("the password is in the message: %q", res.Message)
		}
	}
}
