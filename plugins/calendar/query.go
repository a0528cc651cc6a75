package calendar

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/emersion/go-ical"
)

// maxReport bounds a calendar-query's answer.
const maxReport = 64 << 20

// queried is one calendar object of a calendar-query's answer.
type queried struct {
	path string
	etag string
	cal  *ical.Calendar
}

// query runs a CALDAV:calendar-query REPORT on the collection at p for
// comp (VEVENT in [from, to) when from is set; every VTODO otherwise) and
// decodes each object apart: one that cannot be read (anyone can send an
// invitation) is counted in skipped, not allowed to hide the others.
func (c *CalDAV) query(ctx context.Context, p, comp string, from, to time.Time) (objs []queried, skipped int, err error) {
	var tr string
	if !from.IsZero() {
		tr = fmt.Sprintf(`<C:time-range start="%s" end="%s"/>`, from.UTC().Format("20060102T150405Z"), to.UTC().Format("20060102T150405Z"))
	}
	body := `<?xml version="1.0" encoding="utf-8"?>
<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
  <D:prop><D:getetag/><C:calendar-data/></D:prop>
  <C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="` + comp + `">` + tr + `</C:comp-filter></C:comp-filter></C:filter>
</C:calendar-query>`
	req, err := http.NewRequestWithContext(ctx, "REPORT", c.urlOf(p), strings.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Depth", "1")
	req.Header.Set("Content-Type", "application/xml; charset=utf-8")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("REPORT %s: %w", p, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, 0, ErrAuth
	case resp.StatusCode != http.StatusMultiStatus:
		return nil, 0, fmt.Errorf("REPORT %s: HTTP %d", p, resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReport+1))
	if err != nil {
		return nil, 0, fmt.Errorf("REPORT %s: %w", p, err)
	}
	if len(raw) > maxReport {
		return nil, 0, fmt.Errorf("REPORT %s: the answer is larger than %d MiB: ask for a shorter range", p, maxReport>>20)
	}
	var ms multistatus
	if err := xml.Unmarshal(raw, &ms); err != nil {
		return nil, 0, fmt.Errorf("REPORT %s: %w", p, err)
	}
	for _, r := range ms.Responses {
		var data, etag string
		ok := false
		for _, ps := range r.Propstats {
			if !strings.Contains(ps.Status, " 200") {
				continue
			}
			if ps.Prop.Data != "" {
				data, ok = ps.Prop.Data, true
			}
			if ps.Prop.ETag != "" {
				etag = ps.Prop.ETag
			}
		}
		if !ok {
			continue // the collection itself, or an object without data
		}
		href, err := url.PathUnescape(hrefPath(r.Href))
		if err != nil {
			skipped++
			continue
		}
		cal, err := ical.NewDecoder(bytes.NewReader([]byte(data))).Decode()
		if err != nil {
			skipped++
			continue
		}
		objs = append(objs, queried{path: href, etag: normETag(etag), cal: cal})
	}
	return objs, skipped, nil
}

// hrefPath is an href's path: servers may answer with whole URLs.
func hrefPath(h string) string {
	h = strings.TrimSpace(h)
	if u, err := url.Parse(h); err == nil && u.Scheme != "" {
		return u.EscapedPath()
	}
	return h
}

type multistatus struct {
	Responses []struct {
		Href      string `xml:"DAV: href"`
		Propstats []struct {
			Status string `xml:"DAV: status"`
			Prop   struct {
				ETag string `xml:"DAV: getetag"`
				Data string `xml:"urn:ietf:params:xml:ns:caldav calendar-data"`
			} `xml:"DAV: prop"`
		} `xml:"DAV: propstat"`
	} `xml:"DAV: response"`
}
