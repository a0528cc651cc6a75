package cli

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// calendarPasswordKey is the credential the calendar plugin reads its
// CalDAV password from (plugins/calendar.CredentialKey; a test keeps them
// equal).
const calendarPasswordKey = "caldav_password"

// calendarFlags are setup's answers for the calendar step.
type calendarFlags struct {
	url, user, zone string
	passwordStdin   bool
}

// calendar sets up the calendar plugin (docs/CALENDAR.md): caldav_url,
// username and time_zone in [plugins.calendar.config], which turns it on,
// and the CalDAV password in the credential store, as carapace auth set
// --plugin calendar --key caldav_password stores it. At a terminal it asks
// when the calendar is not set up yet; Enter at the URL skips it.
func (s *setupRun) calendar() {
	const step = "calendar"
	f := s.f.calendar
	pc := s.cfg.Plugins["calendar"]
	configured, _ := pc.Config["caldav_url"].(string)
	store, err := s.a.credentials()
	if err != nil {
		s.report(stepFail, step, err.Error(), "")
		return
	}
	b, gerr := store.Get("calendar", calendarPasswordKey)
	stored := gerr == nil
	clear(b)
	if f.url == "" && f.user == "" && f.zone == "" && !f.passwordStdin {
		switch {
		case configured != "" && stored:
			s.report(stepOK, step, "CalDAV at "+configured+" (carapace doctor --online logs in)", "")
			return
		case s.ask == nil:
			s.report(stepSkip, step, "not set up (optional: docs/CALENDAR.md; carapace setup --calendar-url URL --calendar-user NAME --calendar-password-stdin)", "")
			return
		}
		fmt.Fprintln(s.out, "\nThe calendar plugin gives your agent your calendars and reminders over CalDAV")
		fmt.Fprintln(s.out, "(iCloud, Fastmail, Nextcloud, Radicale...: docs/CALENDAR.md says which URL and which password).")
		for {
			a, err := s.ask.line("CalDAV URL (Enter to skip): ")
			if err != nil {
				s.report(stepFail, step, err.Error(), "")
				return
			}
			if a == "" {
				s.report(stepSkip, step, "not set up (docs/CALENDAR.md)", "")
				return
			}
			if err := checkCalDAVURL(a); err != nil {
				fmt.Fprintln(s.out, err.Error())
				continue
			}
			f.url = a
			break
		}
		if f.user, err = s.ask.line("User name: "); err != nil {
			s.report(stepFail, step, err.Error(), "")
			return
		}
		for {
			a, err := s.ask.line("Time zone (IANA name, e.g. Europe/Paris; Enter for this machine's): ")
			if err != nil {
				s.report(stepFail, step, err.Error(), "")
				return
			}
			if err := checkZone(a); err != nil {
				fmt.Fprintln(s.out, err.Error())
				continue
			}
			f.zone = a
			break
		}
		f.passwordStdin = true // asked below, hidden
	}
	if f.url != "" {
		if err := checkCalDAVURL(f.url); err != nil {
			s.report(stepFail, step, "--calendar-url: "+err.Error(), "")
			return
		}
	}
	if err := checkZone(f.zone); err != nil {
		s.report(stepFail, step, "--calendar-zone: "+err.Error(), "")
		return
	}
	if f.url == "" && configured == "" {
		s.report(stepFail, step, "no CalDAV URL: the calendar needs one", "carapace setup --calendar-url URL (docs/CALENDAR.md)")
		return
	}
	if f.passwordStdin {
		pw, err := s.secret("CalDAV password")
		if err != nil {
			s.report(stepFail, step, err.Error(), "carapace auth set --plugin calendar --key "+calendarPasswordKey)
			return
		}
		defer clear(pw)
		if len(pw) == 0 {
			s.report(stepWarn, step, "no password stored: the plugin does not start without one", "carapace auth set --plugin calendar --key "+calendarPasswordKey)
		} else {
			if err := store.Set("calendar", calendarPasswordKey, pw); err != nil {
				s.report(stepFail, step, err.Error(), "")
				return
			}
			stored = true
			s.report(stepDone, step, fmt.Sprintf("CalDAV password stored (%d bytes)", len(pw)), "")
		}
	}
	for _, kv := range [][2]string{{"caldav_url", f.url}, {"username", f.user}, {"time_zone", f.zone}} {
		if kv[1] == "" {
			continue
		}
		if err := s.set(step, "plugins.calendar.config."+kv[0], kv[1]); err != nil {
			s.report(stepFail, step, err.Error(), "carapace config edit")
			return
		}
	}
	if !stored {
		s.report(stepWarn, step, "no CalDAV password stored: the plugin does not start without one", "carapace auth set --plugin calendar --key "+calendarPasswordKey)
		return
	}
	s.report(stepOK, step, "set up; carapace doctor --online logs in and lists your calendars once the core runs with it", "")
}

// checkCalDAVURL refuses what the calendar plugin would: a URL that is
// not https, except plain http to the loopback.
func checkCalDAVURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a URL: give the server's address, e.g. https://caldav.fastmail.com/dav/calendars/user/YOU@fastmail.com/", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
			return nil
		}
		return fmt.Errorf("%q: plain http only to this machine (127.0.0.1, localhost, [::1]); the password would cross the network in clear: use https", raw)
	}
	return fmt.Errorf("%q: the URL must start with https://", raw)
}

// checkZone checks an IANA zone name; "" is the machine's.
func checkZone(z string) error {
	if z == "" {
		return nil
	}
	if _, err := time.LoadLocation(z); err != nil || z == "Local" {
		return fmt.Errorf("%q is not an IANA time zone (e.g. Europe/Paris, America/New_York)", z)
	}
	return nil
}
