package calendar

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-ical"
	"github.com/emersion/go-webdav"
	"github.com/emersion/go-webdav/caldav"
	"github.com/google/uuid"
)

// CalDAVOptions configure a CalDAV backend.
type CalDAVOptions struct {
	// URL is the server's address: its root, the account's principal or
	// its calendar home (https://; http:// only on the loopback).
	URL                string
	Username, Password string
	// Location is the user's zone: floating times are read in it.
	Location *time.Location
	// DefaultCalendar and RemindersList name the collections used when a
	// call names none (display name or last path segment); empty: the
	// first that holds events, or to-dos.
	DefaultCalendar, RemindersList string
	// HTTP carries the requests (through the core's egress point in the
	// handler); nil: http.DefaultClient.
	HTTP *http.Client
	// Now is the clock (DTSTAMP, COMPLETED); nil: time.Now.
	Now func() time.Time
}

// CalDAV is the Backend of a CalDAV server (RFC 4791).
type CalDAV struct {
	opts   CalDAVOptions
	base   *url.URL
	http   webdav.HTTPClient
	client *caldav.Client

	// skipped counts the objects the server gave that could not be read
	// (or expanded), for tests and logs.
	skipped atomic.Int64

	mu   sync.Mutex
	home string            // the calendar home's path, once found
	cals []caldav.Calendar // the collections, once listed
}

// maxObject bounds a calendar object read with GET.
const maxObject = 4 << 20

// NewCalDAV checks the options and returns the backend; it connects at
// the first call.
func NewCalDAV(o CalDAVOptions) (*CalDAV, error) {
	u, err := CheckURL(o.URL)
	if err != nil {
		return nil, err
	}
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	hc := o.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	// The client never follows a redirect by itself to another host with
	// the password: the egress point would refuse an undeclared host
	// anyway, and a same-host redirect is followed by net/http.
	c := webdav.HTTPClientWithBasicAuth(hc, o.Username, o.Password)
	cl, err := caldav.NewClient(c, u.String())
	if err != nil {
		return nil, fmt.Errorf("caldav client: %w", err)
	}
	return &CalDAV{opts: o, base: u, http: c, client: cl}, nil
}

// CheckURL parses a CalDAV server's URL: https, or plain http to the
// loopback only (a password in clear text over a network is refused).
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("caldav_url %q is not a URL: give the server's address, e.g. https://caldav.fastmail.com/", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("caldav_url must not carry a user, a query or a fragment: set username in the config and the password with carapace auth set --plugin calendar --key caldav_password")
	}
	switch u.Scheme {
	case "https":
	case "http":
		h := u.Hostname()
		if h != "localhost" && h != "127.0.0.1" && h != "::1" {
			return nil, fmt.Errorf("caldav_url %q is plain http to another machine: the password would cross the network in clear; use https (plain http is allowed to the loopback only)", raw)
		}
	default:
		return nil, fmt.Errorf("caldav_url %q: only https (or http to the loopback) is supported", raw)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

// Calendars implements Backend.
func (c *CalDAV) Calendars(ctx context.Context) ([]CalendarInfo, error) {
	cals, err := c.calendars(ctx, true)
	if err != nil {
		return nil, err
	}
	out := make([]CalendarInfo, 0, len(cals))
	for _, k := range cals {
		out = append(out, CalendarInfo{Name: calName(k), Components: k.SupportedComponentSet})
	}
	return out, nil
}

// calendars lists the collections, once (again when refresh).
func (c *CalDAV) calendars(ctx context.Context, refresh bool) ([]caldav.Calendar, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cals != nil && !refresh {
		return c.cals, nil
	}
	if c.home == "" {
		if err := c.checkAuth(ctx); err != nil {
			return nil, err
		}
		home := c.base.Path
		if p, err := c.client.FindCurrentUserPrincipal(ctx); err == nil && p != "" {
			if h, err := c.client.FindCalendarHomeSet(ctx, p); err == nil && h != "" {
				home = h
			}
		}
		c.home = home
	}
	cals, err := c.client.FindCalendars(ctx, c.home)
	if err != nil {
		return nil, fmt.Errorf("list the calendars of %s: %w", c.home, err)
	}
	// caldav_url may be a calendar itself: then it is the one.
	if len(cals) == 0 {
		if one, err := c.client.FindCalendars(ctx, path.Dir(strings.TrimSuffix(c.home, "/"))+"/"); err == nil {
			for _, k := range one {
				if strings.TrimSuffix(k.Path, "/") == strings.TrimSuffix(c.home, "/") {
					cals = append(cals, k)
				}
			}
		}
	}
	sort.SliceStable(cals, func(i, j int) bool { return cals[i].Path < cals[j].Path })
	c.cals = cals
	return cals, nil
}

// ErrAuth: the server refused the username and password.
var ErrAuth = errors.New("the CalDAV server refused the username and password")

// checkAuth asks the server about caldav_url once, so that a refused
// password is told apart from other failures.
func (c *CalDAV) checkAuth(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "PROPFIND", c.base.String(), strings.NewReader(`<?xml version="1.0" encoding="utf-8"?><propfind xmlns="DAV:"><prop><resourcetype/></prop></propfind>`))
	if err != nil {
		return err
	}
	req.Header.Set("Depth", "0")
	req.Header.Set("Content-Type", "application/xml; charset=utf-8")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("reach the CalDAV server: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return ErrAuth
	case resp.StatusCode == http.StatusMultiStatus, resp.StatusCode/100 == 2:
		return nil
	default:
		return fmt.Errorf("the CalDAV server answered HTTP %d to PROPFIND %s", resp.StatusCode, c.base.Path)
	}
}

func calName(k caldav.Calendar) string {
	if k.Name != "" {
		return k.Name
	}
	return path.Base(strings.TrimSuffix(k.Path, "/"))
}

func supports(k caldav.Calendar, comp string) bool {
	if len(k.SupportedComponentSet) == 0 {
		return true // not said: anything
	}
	for _, s := range k.SupportedComponentSet {
		if strings.EqualFold(s, comp) {
			return true
		}
	}
	return false
}

// find returns the collections for comp named name ("" for every one),
// or def's, or the first, when one is wanted.
func (c *CalDAV) find(ctx context.Context, name, def, comp string, one bool) ([]caldav.Calendar, error) {
	if name == "" && one {
		name = def
	}
	for attempt := 0; attempt < 2; attempt++ {
		cals, err := c.calendars(ctx, attempt > 0)
		if err != nil {
			return nil, err
		}
		var out []caldav.Calendar
		for _, k := range cals {
			if !supports(k, comp) {
				continue
			}
			if name == "" || strings.EqualFold(calName(k), name) || strings.EqualFold(path.Base(strings.TrimSuffix(k.Path, "/")), name) {
				out = append(out, k)
			}
		}
		if len(out) > 0 {
			if one {
				out = out[:1]
			}
			return out, nil
		}
		if name == "" && attempt > 0 {
			return nil, fmt.Errorf("%w: the account has no collection for %s", ErrNoCalendar, comp)
		}
	}
	var names []string
	cals, _ := c.calendars(ctx, false)
	for _, k := range cals {
		if supports(k, comp) {
			names = append(names, fmt.Sprintf("%q", calName(k)))
		}
	}
	return nil, fmt.Errorf("%w: %q (there are: %s)", ErrNoCalendar, name, strings.Join(names, ", "))
}

// ListEvents implements Backend.
func (c *CalDAV) ListEvents(ctx context.Context, calendar string, from, to time.Time) ([]Event, error) {
	cals, err := c.find(ctx, calendar, "", ical.CompEvent, false)
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, k := range cals {
		objs, skipped, err := c.query(ctx, k.Path, ical.CompEvent, from, to)
		if err != nil {
			return nil, fmt.Errorf("query calendar %s: %w", calName(k), err)
		}
		c.skipped.Add(int64(skipped))
		for _, o := range objs {
			uid := objectUID(o.cal, ical.CompEvent)
			occ, err := expand(o.cal, c.opts.Location, from, to)
			if err != nil {
				// One broken object (anyone may send an invitation) does
				// not hide the others.
				c.skipped.Add(1)
				continue
			}
			for _, x := range occ {
				out = append(out, c.event(x, makeID(o.path, uid), o.etag, calName(k)))
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return eventStart(out[i], c.opts.Location).Before(eventStart(out[j], c.opts.Location))
	})
	return out, nil
}

func eventStart(e Event, loc *time.Location) time.Time {
	if e.AllDay {
		return e.StartDate.In(loc)
	}
	return e.Start
}

func (c *CalDAV) event(x occurrence, id, etag, cal string) Event {
	p := x.comp.Props
	e := Event{
		ID: id, Version: etag, Calendar: cal,
		Title: text(p, ical.PropSummary), Location: text(p, ical.PropLocation), Notes: text(p, ical.PropDescription),
		AllDay: x.allDay, Recurring: x.recurring, Status: strings.ToUpper(text(p, ical.PropStatus)),
	}
	if x.allDay {
		e.StartDate, e.EndDate = DateOf(x.start), DateOf(x.end)
	} else {
		e.Start, e.End = x.start, x.end
	}
	for _, a := range p.Values(ical.PropAttendee) {
		e.Attendees = append(e.Attendees, mailto(a))
	}
	if o := p.Get(ical.PropOrganizer); o != nil {
		e.Organizer = mailto(*o)
	}
	return e
}

// mailto is an ATTENDEE or ORGANIZER as one line: "Name <address>".
func mailto(p ical.Prop) string {
	addr := p.Value
	if len(addr) > 7 && strings.EqualFold(addr[:7], "mailto:") {
		addr = addr[7:]
	}
	if cn := p.Params.Get(ical.ParamCommonName); cn != "" {
		return cn + " <" + addr + ">"
	}
	return addr
}

func text(p ical.Props, name string) string {
	v, err := p.Text(name)
	if err != nil {
		return ""
	}
	return v
}

func objectUID(cal *ical.Calendar, comp string) string {
	for _, k := range cal.Children {
		if k.Name == comp {
			return text(k.Props, ical.PropUID)
		}
	}
	return ""
}

// An id is the object's path and its UID, base64url: opaque to the
// agent, stable while the object lives, and checked against both when
// used. Prefixes tell events (e) and reminders (r) apart.
func makeID(p, uid string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(p + "\n" + uid))
}

// parseID reads an id back and checks that its path is a calendar
// object's inside one of the account's collections.
func (c *CalDAV) parseID(ctx context.Context, id, comp string) (objPath, uid string, cal caldav.Calendar, err error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(id))
	if err != nil {
		return "", "", cal, ErrBadID
	}
	objPath, uid, ok := strings.Cut(string(b), "\n")
	if !ok || uid == "" || !strings.HasPrefix(objPath, "/") || strings.Contains(objPath, "/../") || strings.HasSuffix(objPath, "/") {
		return "", "", cal, ErrBadID
	}
	if path.Clean(objPath) != objPath {
		return "", "", cal, ErrBadID
	}
	cals, err := c.calendars(ctx, false)
	if err != nil {
		return "", "", cal, err
	}
	dir := path.Dir(objPath) + "/"
	for _, k := range cals {
		if strings.TrimSuffix(k.Path, "/")+"/" == dir && supports(k, comp) {
			return objPath, uid, k, nil
		}
	}
	return "", "", cal, ErrBadID
}

// object is a calendar object read with GET, with its ETag.
type object struct {
	cal  *ical.Calendar
	etag string
}

func (c *CalDAV) urlOf(p string) string {
	return c.base.ResolveReference(&url.URL{Path: p}).String()
}

// get reads the object at p and checks that it still holds uid.
func (c *CalDAV) get(ctx context.Context, p, uid, comp string) (*object, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.urlOf(p), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", ical.MIMEType)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", p, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, ErrNotFound
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, ErrAuth
	case resp.StatusCode/100 != 2:
		return nil, fmt.Errorf("GET %s: HTTP %d", p, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); !strings.EqualFold(mt, ical.MIMEType) {
		return nil, fmt.Errorf("GET %s: not a calendar object (%s)", p, mt)
	}
	cal, err := ical.NewDecoder(io.LimitReader(resp.Body, maxObject)).Decode()
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", p, err)
	}
	if objectUID(cal, comp) != uid {
		return nil, ErrNotFound // the path now holds something else
	}
	return &object{cal: cal, etag: normETag(resp.Header.Get("ETag"))}, nil
}

// put writes cal to p: only if p holds etag (If-Match), or only if p is
// free (etag ""; If-None-Match: *). A lost race is ErrConflict. It returns
// the new ETag ("" if the server gives none).
func (c *CalDAV) put(ctx context.Context, p string, cal *ical.Calendar, etag string) (string, error) {
	var buf bytes.Buffer
	if err := ical.NewEncoder(&buf).Encode(cal); err != nil {
		return "", fmt.Errorf("encode %s: %w", p, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.urlOf(p), bytes.NewReader(buf.Bytes()))
	if err != nil {
		return "", err
	}
	req.ContentLength = int64(buf.Len())
	req.Header.Set("Content-Type", ical.MIMEType+"; charset=utf-8")
	if etag == "" {
		req.Header.Set("If-None-Match", "*")
	} else {
		req.Header.Set("If-Match", quoteETag(etag))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("PUT %s: %w", p, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed:
		return "", ErrConflict
	case resp.StatusCode == http.StatusUnauthorized:
		return "", ErrAuth
	case resp.StatusCode/100 != 2:
		return "", fmt.Errorf("PUT %s: HTTP %d: %s", p, resp.StatusCode, oneLine(string(body)))
	}
	return normETag(resp.Header.Get("ETag")), nil
}

// normETag is an ETag without its quotes (and weak mark): the form the
// PROPFIND and REPORT answers give, and the version the agent sees.
func normETag(s string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(s), "W/"), `"`)
}

// quoteETag is an ETag as If-Match wants it.
func quoteETag(s string) string { return `"` + s + `"` }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// etagOf asks for the ETag of p when a PUT's answer did not carry it.
func (c *CalDAV) etagOf(ctx context.Context, p, uid, comp, etag string) string {
	if etag != "" {
		return etag
	}
	if o, err := c.get(ctx, p, uid, comp); err == nil {
		return o.etag
	}
	return ""
}

// newCalendar is a VCALENDAR holding comp.
func newCalendar(comp *ical.Component) *ical.Calendar {
	cal := ical.NewCalendar()
	cal.Props.SetText(ical.PropProductID, "-//Carapace//calendar plugin//EN")
	cal.Props.SetText(ical.PropVersion, "2.0")
	cal.Children = append(cal.Children, comp)
	return cal
}

func setTime(p ical.Props, name string, t time.Time) {
	prop := ical.NewProp(name)
	prop.SetDateTime(t.UTC())
	p.Set(prop)
}

func setDate(p ical.Props, name string, d Date) {
	prop := ical.NewProp(name)
	prop.SetDate(d.In(time.UTC))
	p.Set(prop)
}

func setText(p ical.Props, name, v string) {
	if v == "" {
		p.Del(name)
		return
	}
	p.SetText(name, v)
}

func setAttendees(p ical.Props, attendees []string, organizer string) {
	p.Del(ical.PropAttendee)
	for _, a := range attendees {
		prop := ical.NewProp(ical.PropAttendee)
		prop.Value = "mailto:" + a
		prop.Params.Set(ical.ParamRole, "REQ-PARTICIPANT")
		prop.Params.Set(ical.ParamParticipationStatus, "NEEDS-ACTION")
		prop.Params.Set(ical.ParamRSVP, "TRUE")
		p.Add(prop)
	}
	if len(attendees) > 0 && organizer != "" && p.Get(ical.PropOrganizer) == nil {
		prop := ical.NewProp(ical.PropOrganizer)
		prop.Value = "mailto:" + organizer
		p.Set(prop)
	}
}

// CreateEvent implements Backend.
func (c *CalDAV) CreateEvent(ctx context.Context, calendar string, ev NewEvent) (Event, error) {
	cals, err := c.find(ctx, calendar, c.opts.DefaultCalendar, ical.CompEvent, true)
	if err != nil {
		return Event{}, err
	}
	k := cals[0]
	uid := uuid.NewString()
	comp := ical.NewComponent(ical.CompEvent)
	now := c.opts.Now()
	comp.Props.SetText(ical.PropUID, uid)
	setTime(comp.Props, ical.PropDateTimeStamp, now)
	setTime(comp.Props, ical.PropCreated, now)
	setText(comp.Props, ical.PropSummary, ev.Title)
	setText(comp.Props, ical.PropLocation, ev.Location)
	setText(comp.Props, ical.PropDescription, ev.Notes)
	if ev.AllDay {
		setDate(comp.Props, ical.PropDateTimeStart, ev.StartDate)
		setDate(comp.Props, ical.PropDateTimeEnd, ev.EndDate)
	} else {
		setTime(comp.Props, ical.PropDateTimeStart, ev.Start)
		setTime(comp.Props, ical.PropDateTimeEnd, ev.End)
	}
	setAttendees(comp.Props, ev.Attendees, ev.Organizer)
	p := strings.TrimSuffix(k.Path, "/") + "/" + uid + ".ics"
	etag, err := c.put(ctx, p, newCalendar(comp), "")
	if err != nil {
		return Event{}, err
	}
	o, err := single(comp, c.opts.Location)
	if err != nil {
		return Event{}, err
	}
	return c.event(o, makeID(p, uid), c.etagOf(ctx, p, uid, ical.CompEvent, etag), calName(k)), nil
}

// master is the object's VEVENT (or VTODO) without a RECURRENCE-ID.
func master(cal *ical.Calendar, comp string) *ical.Component {
	for _, k := range cal.Children {
		if k.Name == comp && k.Props.Get(ical.PropRecurrenceID) == nil {
			return k
		}
	}
	return nil
}

// UpdateEvent implements Backend.
func (c *CalDAV) UpdateEvent(ctx context.Context, id string, ch EventChange) (Event, error) {
	p, uid, k, err := c.parseID(ctx, id, ical.CompEvent)
	if err != nil {
		return Event{}, err
	}
	o, err := c.get(ctx, p, uid, ical.CompEvent)
	if err != nil {
		return Event{}, err
	}
	if ch.Version != "" && normETag(ch.Version) != o.etag {
		return Event{}, ErrConflict
	}
	m := master(o.cal, ical.CompEvent)
	if m == nil {
		return Event{}, ErrNotFound
	}
	if len(m.Props.Values(ical.PropAttendee)) > 0 && !ch.NotifyAttendees {
		return Event{}, ErrHasAttendees
	}
	first, err := single(m, c.opts.Location)
	if err != nil {
		return Event{}, fmt.Errorf("read the event: %w", err)
	}
	if ch.Title != nil {
		setText(m.Props, ical.PropSummary, *ch.Title)
	}
	if ch.Location != nil {
		setText(m.Props, ical.PropLocation, *ch.Location)
	}
	if ch.Notes != nil {
		setText(m.Props, ical.PropDescription, *ch.Notes)
	}
	if ch.Attendees != nil {
		setAttendees(m.Props, *ch.Attendees, c.opts.Username)
	}
	if err := retime(m, first, ch, c.opts.Location); err != nil {
		return Event{}, err
	}
	now := c.opts.Now()
	setTime(m.Props, ical.PropDateTimeStamp, now)
	setTime(m.Props, ical.PropLastModified, now)
	seq := 0
	if s := m.Props.Get(ical.PropSequence); s != nil {
		seq, _ = s.Int()
	}
	seqProp := ical.NewProp(ical.PropSequence)
	seqProp.Value = fmt.Sprint(seq + 1)
	m.Props.Set(seqProp)
	for _, x := range o.cal.Children { // DTSTAMP is required: old objects may lack it
		if (x.Name == ical.CompEvent) && x.Props.Get(ical.PropDateTimeStamp) == nil {
			setTime(x.Props, ical.PropDateTimeStamp, now)
		}
	}
	etag, err := c.put(ctx, p, o.cal, o.etag)
	if err != nil {
		return Event{}, err
	}
	after, err := single(m, c.opts.Location)
	if err != nil {
		return Event{}, err
	}
	after.recurring = m.Props.Get(ical.PropRecurrenceRule) != nil
	return c.event(after, id, c.etagOf(ctx, p, uid, ical.CompEvent, etag), calName(k)), nil
}

// retime applies a change of start or end. A new start alone keeps the
// length; a timed start keeps the zone the event was written in (its
// TZID), so that a recurring event stays at the same local time.
func retime(m *ical.Component, first occurrence, ch EventChange, loc *time.Location) error {
	switch {
	case ch.StartDate != nil || ch.EndDate != nil:
		sd, ed := DateOf(first.start), DateOf(first.end)
		if !first.allDay {
			sd, ed = DateOf(first.start.In(loc)), DateOf(first.start.In(loc)).AddDays(1)
		}
		days := int(ed.In(time.UTC).Sub(sd.In(time.UTC)).Hours() / 24)
		if ch.StartDate != nil {
			sd = *ch.StartDate
			ed = sd.AddDays(max(days, 1))
		}
		if ch.EndDate != nil {
			ed = *ch.EndDate
		}
		if !sd.In(time.UTC).Before(ed.In(time.UTC)) {
			return fmt.Errorf("%w: the end is not after the start", errBadTimes)
		}
		m.Props.Del(ical.PropDuration)
		setDate(m.Props, ical.PropDateTimeStart, sd)
		setDate(m.Props, ical.PropDateTimeEnd, ed)
	case ch.Start != nil || ch.End != nil:
		start, end := first.start, first.end
		if first.allDay {
			start, end = DateOf(first.start).In(loc).Add(9*time.Hour), DateOf(first.start).In(loc).Add(10*time.Hour)
		}
		if ch.Start != nil {
			end = ch.Start.Add(end.Sub(start))
			start = *ch.Start
		}
		if ch.End != nil {
			end = *ch.End
		}
		if end.Before(start) {
			return fmt.Errorf("%w: the end is before the start", errBadTimes)
		}
		zoneOf := loc
		if tz := m.Props.Get(ical.PropDateTimeStart); tz != nil && !first.allDay {
			if l := zone(tz.Params.Get(ical.PropTimezoneID)); l != nil {
				zoneOf = l
			} else if strings.HasSuffix(tz.Value, "Z") {
				zoneOf = time.UTC
			}
		}
		m.Props.Del(ical.PropDuration)
		for name, t := range map[string]time.Time{ical.PropDateTimeStart: start, ical.PropDateTimeEnd: end} {
			prop := ical.NewProp(name)
			if zoneOf == time.UTC || zoneOf.String() == "Local" {
				prop.SetDateTime(t.UTC())
			} else {
				prop.SetDateTime(t.In(zoneOf))
			}
			m.Props.Set(prop)
		}
	}
	return nil
}

var errBadTimes = errors.New("bad times")

// DeleteEvent implements Backend.
func (c *CalDAV) DeleteEvent(ctx context.Context, id, version string) error {
	p, uid, _, err := c.parseID(ctx, id, ical.CompEvent)
	if err != nil {
		return err
	}
	o, err := c.get(ctx, p, uid, ical.CompEvent)
	if err != nil {
		return err
	}
	if version != "" && normETag(version) != o.etag {
		return ErrConflict
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.urlOf(p), nil)
	if err != nil {
		return err
	}
	if o.etag != "" {
		req.Header.Set("If-Match", quoteETag(o.etag))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("DELETE %s: %w", p, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed:
		return ErrConflict
	case resp.StatusCode == http.StatusNotFound:
		return ErrNotFound
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("DELETE %s: HTTP %d", p, resp.StatusCode)
	}
	return nil
}

// Priorities: iCalendar's 1-9 (1 highest) as three words.
func priorityWord(p ical.Props) string {
	v := p.Get(ical.PropPriority)
	if v == nil {
		return ""
	}
	n, err := v.Int()
	switch {
	case err != nil || n == 0:
		return ""
	case n <= 4:
		return "high"
	case n == 5:
		return "medium"
	default:
		return "low"
	}
}

func priorityNumber(w string) string {
	switch w {
	case "high":
		return "1"
	case "medium":
		return "5"
	case "low":
		return "9"
	}
	return ""
}

func (c *CalDAV) reminder(comp *ical.Component, id, etag, list string) Reminder {
	p := comp.Props
	r := Reminder{ID: id, Version: etag, List: list, Title: text(p, ical.PropSummary), Notes: text(p, ical.PropDescription), Priority: priorityWord(p)}
	if d := p.Get(ical.PropDue); d != nil {
		if t, allDay, err := dateTime(d, c.opts.Location); err == nil {
			if allDay {
				dd := DateOf(t)
				r.DueDate = &dd
			} else {
				r.Due = t
			}
		}
	}
	r.Completed = strings.EqualFold(text(p, ical.PropStatus), "COMPLETED") || p.Get(ical.PropCompleted) != nil
	if d := p.Get(ical.PropCompleted); d != nil {
		if t, _, err := dateTime(d, c.opts.Location); err == nil {
			r.CompletedAt = t
		}
	}
	return r
}

// ListReminders implements Backend.
func (c *CalDAV) ListReminders(ctx context.Context, list string, includeCompleted bool) ([]Reminder, error) {
	cals, err := c.find(ctx, list, c.opts.RemindersList, ical.CompToDo, true)
	if err != nil {
		return nil, err
	}
	k := cals[0]
	objs, skipped, err := c.query(ctx, k.Path, ical.CompToDo, time.Time{}, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("query list %s: %w", calName(k), err)
	}
	c.skipped.Add(int64(skipped))
	var out []Reminder
	for _, o := range objs {
		m := master(o.cal, ical.CompToDo)
		if m == nil {
			continue
		}
		r := c.reminder(m, makeID(o.path, text(m.Props, ical.PropUID)), o.etag, calName(k))
		if r.Completed && !includeCompleted {
			continue
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return dueKey(out[i], c.opts.Location).Before(dueKey(out[j], c.opts.Location)) })
	return out, nil
}

// dueKey orders reminders by due time, those without one last.
func dueKey(r Reminder, loc *time.Location) time.Time {
	switch {
	case !r.Due.IsZero():
		return r.Due
	case r.DueDate != nil:
		return r.DueDate.In(loc)
	}
	return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
}

// CreateReminder implements Backend.
func (c *CalDAV) CreateReminder(ctx context.Context, list string, r NewReminder) (Reminder, error) {
	cals, err := c.find(ctx, list, c.opts.RemindersList, ical.CompToDo, true)
	if err != nil {
		return Reminder{}, err
	}
	k := cals[0]
	uid := uuid.NewString()
	comp := ical.NewComponent(ical.CompToDo)
	now := c.opts.Now()
	comp.Props.SetText(ical.PropUID, uid)
	setTime(comp.Props, ical.PropDateTimeStamp, now)
	setTime(comp.Props, ical.PropCreated, now)
	setText(comp.Props, ical.PropSummary, r.Title)
	setText(comp.Props, ical.PropDescription, r.Notes)
	comp.Props.SetText(ical.PropStatus, "NEEDS-ACTION")
	if n := priorityNumber(r.Priority); n != "" {
		prop := ical.NewProp(ical.PropPriority)
		prop.Value = n
		comp.Props.Set(prop)
	}
	// A due reminder notifies: an alarm at the due time (a date-only due:
	// 09:00 that day, in the user's zone).
	var alarmAt time.Time
	switch {
	case !r.Due.IsZero():
		setTime(comp.Props, ical.PropDue, r.Due)
		alarmAt = r.Due
	case r.DueDate != nil:
		setDate(comp.Props, ical.PropDue, *r.DueDate)
		alarmAt = r.DueDate.In(c.opts.Location).Add(9 * time.Hour)
	}
	if !alarmAt.IsZero() {
		alarm := ical.NewComponent(ical.CompAlarm)
		alarm.Props.SetText(ical.PropAction, "DISPLAY")
		alarm.Props.SetText(ical.PropDescription, firstNonEmpty(r.Title, "Reminder"))
		trig := ical.NewProp(ical.PropTrigger)
		trig.SetDateTime(alarmAt.UTC())
		alarm.Props.Set(trig)
		comp.Children = append(comp.Children, alarm)
	}
	p := strings.TrimSuffix(k.Path, "/") + "/" + uid + ".ics"
	etag, err := c.put(ctx, p, newCalendar(comp), "")
	if err != nil {
		return Reminder{}, err
	}
	return c.reminder(comp, makeID(p, uid), c.etagOf(ctx, p, uid, ical.CompToDo, etag), calName(k)), nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// CompleteReminder implements Backend.
func (c *CalDAV) CompleteReminder(ctx context.Context, id string) (Reminder, error) {
	p, uid, k, err := c.parseID(ctx, id, ical.CompToDo)
	if err != nil {
		return Reminder{}, err
	}
	o, err := c.get(ctx, p, uid, ical.CompToDo)
	if err != nil {
		return Reminder{}, err
	}
	m := master(o.cal, ical.CompToDo)
	if m == nil {
		return Reminder{}, ErrNotFound
	}
	now := c.opts.Now()
	m.Props.SetText(ical.PropStatus, "COMPLETED")
	setTime(m.Props, ical.PropCompleted, now)
	pc := ical.NewProp(ical.PropPercentComplete)
	pc.Value = "100"
	m.Props.Set(pc)
	setTime(m.Props, ical.PropDateTimeStamp, now)
	setTime(m.Props, ical.PropLastModified, now)
	etag, err := c.put(ctx, p, o.cal, o.etag)
	if err != nil {
		return Reminder{}, err
	}
	return c.reminder(m, id, c.etagOf(ctx, p, uid, ical.CompToDo, etag), calName(k)), nil
}
