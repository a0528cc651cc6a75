package calendar

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A calendar-query answer with one object that cannot be read and one
// whose rule yields too many instances (anyone can send an invitation)
// still lists the good one: the bad are skipped and counted, not allowed
// to hide the calendar. The server is a stand-in that answers as a CalDAV
// server does (the real Radicale refuses such objects on PUT).
func TestQueryToleratesBadObjects(t *testing.T) {
	good := "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nBEGIN:VEVENT\r\nUID:good\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20261027T090000Z\r\nDTEND:20261027T100000Z\r\nSUMMARY:Good\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	broken := "BEGIN:VCALENDAR\r\nthis is not iCalendar\r\n"
	flood := "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//t//EN\r\nBEGIN:VEVENT\r\nUID:flood\r\nDTSTAMP:20260101T000000Z\r\nDTSTART:20261027T000000Z\r\nRRULE:FREQ=SECONDLY\r\nSUMMARY:Flood\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
	item := func(href, data string) string {
		return fmt.Sprintf(`<D:response><D:href>%s</D:href><D:propstat><D:prop><D:getetag>"e-%d"</D:getetag><C:calendar-data>%s</C:calendar-data></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>`, href, len(href), strings.NewReplacer("&", "&amp;", "<", "&lt;").Replace(data))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "PROPFIND":
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusMultiStatus)
			fmt.Fprint(w, `<?xml version="1.0"?><D:multistatus xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><D:response><D:href>/cal/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/><C:calendar/></D:resourcetype><D:displayname>Cal</D:displayname></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>`)
		case "REPORT":
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusMultiStatus)
			fmt.Fprint(w, `<?xml version="1.0"?><D:multistatus xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">`+
				item("/cal/broken.ics", broken)+item("/cal/a-good.ics", good)+item("/cal/flood1.ics", flood)+`</D:multistatus>`)
		default:
			http.Error(w, "no", http.StatusMethodNotAllowed)
		}
	}))
	defer srv.Close()
	b, err := NewCalDAV(CalDAVOptions{URL: srv.URL + "/cal/", Username: "u", Password: "p", Location: paris(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	evs, err := b.ListEvents(ctx, "", time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Title != "Good" || evs[0].Version != "e-15" {
		t.Fatalf("events %+v, want the good one only", evs)
	}
	if n := b.skipped.Load(); n != 2 {
		t.Fatalf("skipped %d objects, want 2 (the broken one and the flood)", n)
	}
}
