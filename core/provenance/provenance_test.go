package provenance

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"https://Example.COM/a/B?x=1#frag", "https://example.com/a/B?x=1", true},
		{"HTTPS://example.com:443", "https://example.com/", true},
		{"http://example.com:80/p", "http://example.com/p", true},
		{"http://example.com:8080/p", "http://example.com:8080/p", true},
		{"https://example.com:80/p", "https://example.com:80/p", true},
		{"https://[2001:DB8::1]:443/x", "https://[2001:db8::1]/x", true},
		{"https://example.com/?", "https://example.com/?", true},
		{"  https://example.com/a  ", "https://example.com/a", true},
		{"ftp://example.com/", "", false},
		{"javascript:alert(1)", "", false},
		{"https:///nohost", "", false},
		{"/relative", "", false},
		{"https://example.com/" + strings.Repeat("a", MaxURLLen), "", false},
	}
	for _, tt := range tests {
		got, ok := Normalize(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Normalize(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestExtract(t *testing.T) {
	text := "Read https://Example.com/a. Then [docs](https://go.dev/doc/(x)) and (see https://b.org/p?q=1), " +
		"<https://c.net/x> \"https://d.io/y\" https://example.com/a again; ftp://no.pe and http://e.com:80#top!"
	want := []string{"https://example.com/a", "https://go.dev/doc/(x)", "https://b.org/p?q=1", "https://c.net/x", "https://d.io/y", "http://e.com/"}
	if got := Extract(text); !slices.Equal(got, want) {
		t.Errorf("Extract =\n %q\nwant\n %q", got, want)
	}
	if got := Extract("nothing here, not even www.example.com"); got != nil {
		t.Errorf("Extract found %q", got)
	}
}

// TestGivenExact: a given URL matches itself under every spelling of
// scheme, host, default port and fragment; a longer path, another query or
// a prefix of it does not (the control is the first row).
func TestGivenExact(t *testing.T) {
	s := New()
	s.Give("look at https://Example.com/report?id=7 please")
	tests := []struct {
		url  string
		want bool
	}{
		{"https://example.com/report?id=7", true},
		{"HTTPS://EXAMPLE.COM:443/report?id=7#top", true},
		{"https://example.com/report?id=7&k=SECRET", false},
		{"https://example.com/report", false},
		{"https://example.com/report?id=7/more", false},
		{"https://example.com/Report?id=7", false},
		{"http://example.com/report?id=7", false},
		{"not a url", false},
	}
	for _, tt := range tests {
		if got := s.Given(tt.url); got != tt.want {
			t.Errorf("Given(%q) = %v, want %v", tt.url, got, tt.want)
		}
	}
}

func TestGiveValue(t *testing.T) {
	s := New()
	s.GiveValue(map[string]any{"results": []any{map[string]any{"url": "https://a.example/1", "snippet": "see https://b.example/2."}},
		"https://key.example/": 1, "n": 3})
	for _, u := range []string{"https://a.example/1", "https://b.example/2", "https://key.example/"} {
		if !s.Given(u) {
			t.Errorf("%s not given", u)
		}
	}
	if s.Given("https://c.example/") {
		t.Error("a URL in no result is given")
	}
}

// TestBounds: past MaxURLs nothing more is kept and what was not kept is
// not given (fail closed); what was kept before still is.
func TestBounds(t *testing.T) {
	s := New()
	var b strings.Builder
	for i := range MaxURLs + 10 {
		fmt.Fprintf(&b, "https://h.example/%d ", i)
	}
	if dropped := s.Give(b.String()); dropped != 10 {
		t.Errorf("dropped %d, want 10", dropped)
	}
	if !s.Given("https://h.example/0") || !s.Given(fmt.Sprintf("https://h.example/%d", MaxURLs-1)) {
		t.Error("a URL kept within the bound is not given")
	}
	if s.Given(fmt.Sprintf("https://h.example/%d", MaxURLs)) {
		t.Error("a URL past the bound is given")
	}
	n, _, dropped := s.Len()
	if n != MaxURLs || dropped != 10 {
		t.Errorf("Len = %d, dropped %d", n, dropped)
	}

	// Bytes: long URLs fill MaxBytes before MaxURLs.
	s = New()
	long := strings.Repeat("x", 8000)
	var urls []string
	for i := range MaxBytes/8000 + 5 {
		urls = append(urls, fmt.Sprintf("https://h.example/%d/%s", i, long))
	}
	s.Give(strings.Join(urls, " "))
	if _, bytes, dropped := s.Len(); bytes > MaxBytes || dropped == 0 || !s.Given(urls[0]) || s.Given(urls[len(urls)-1]) {
		t.Errorf("bytes %d (max %d), dropped %d", bytes, MaxBytes, dropped)
	}
}

func TestTaint(t *testing.T) {
	s := New()
	if _, ok := s.Tainted(); ok {
		t.Fatal("a new store is tainted")
	}
	at := time.Date(2026, 11, 27, 10, 42, 0, 0, time.UTC)
	if !s.Taint(Taint{Tool: "web_fetch", Source: "https://a.example/", Time: at}) {
		t.Error("first taint not reported first")
	}
	if s.Taint(Taint{Tool: "web_search", Source: "q", Time: at.Add(time.Hour)}) {
		t.Error("second taint reported first")
	}
	tt, ok := s.Tainted()
	if !ok || tt.Tool != "web_fetch" {
		t.Errorf("Tainted = %+v, %v", tt, ok)
	}
	if r := tt.Reason(); !strings.Contains(r, "this session read https://a.example/ at 10:42 UTC (web_fetch)") {
		t.Errorf("Reason = %q", r)
	}
}
