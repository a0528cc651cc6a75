package caldavserver

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMkCalendar: a user creates a calendar in their own collection and
// can read it back; the wrong password is refused the same request, which
// the right one (the positive control) was allowed.
func TestMkCalendar(t *testing.T) {
	alice := User{Name: "alice", Password: "correct horse"}
	srv := Start(t, alice)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("URL = %q, want the loopback", srv.URL)
	}

	cases := []struct {
		name string
		user User
		cal  string
		want int
	}{
		{"owner creates", alice, "work", http.StatusCreated},
		{"wrong password", User{Name: "alice", Password: "wrong"}, "other", http.StatusUnauthorized},
		{"unknown user", User{Name: "mallory", Password: "correct horse"}, "other", http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, err := srv.TryMkCalendar(c.user, c.cal, "VEVENT")
			if err != nil {
				t.Fatal(err)
			}
			if code != c.want {
				t.Fatalf("MKCALENDAR as %s: HTTP %d, want %d", c.user.Name, code, c.want)
			}
		})
	}

	// The calendar the owner made is there, as a calendar; the refused
	// ones are not.
	for cal, want := range map[string]int{"work": http.StatusMultiStatus, "other": http.StatusNotFound} {
		req, err := http.NewRequest("PROPFIND", srv.UserURL("alice")+cal+"/", strings.NewReader(`<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/></D:prop></D:propfind>`))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(alice.Name, alice.Password)
		req.Header.Set("Depth", "0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Fatalf("PROPFIND %s: HTTP %d, want %d: %s", cal, resp.StatusCode, want, b)
		}
		if want == http.StatusMultiStatus && !strings.Contains(string(b), "calendar") {
			t.Fatalf("PROPFIND %s: not a calendar: %s", cal, b)
		}
	}
}
