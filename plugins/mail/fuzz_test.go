package mail

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/carapace-dev/carapace/core/plugin"
)

// FuzzParse: any bytes a server sends are read without a panic into text
// without control characters; a draft that passes the checks renders to
// a mail that reads back the same and carries no header line break.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.eml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("From: Me <me@example.com>\r\nTo: a@example.org\r\nDate: Sat, 28 Feb 2026 10:00:00 +0000\r\nMessage-ID: <d@example.com>\r\nSubject: =?utf-8?q?a=0D=0Ab?=\r\n\r\nbody\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p := parseMessage(raw)
		for _, r := range p.Text + strings.Join(headerAddresses(&p.Header, "From"), "") + subjectOf(&p.Header) {
			if unicode.IsControl(r) && r != '\n' && r != '\t' {
				t.Fatalf("control character %U in what is shown", r)
			}
		}
		m, err := parseDraft(raw, DefaultMaxBody)
		if err != nil {
			if _, ok := plugin.AsToolError(err); !ok {
				t.Fatalf("a refused draft without a tool error: %v", err)
			}
			return
		}
		out := m.render(true)
		head, _, _ := bytes.Cut(out, []byte("\r\n\r\n"))
		for _, line := range bytes.Split(head, []byte("\r\n")) {
			if bytes.ContainsAny(line, "\r\n\x00") {
				t.Fatalf("a header line with a break: %q", line)
			}
		}
		back, err := parseDraft(out, DefaultMaxBody)
		if err != nil {
			t.Fatalf("the rendered draft does not read back: %v\n%s", err, out)
		}
		if back.Body != m.Body || back.Subject != m.Subject || len(back.recipients()) != len(m.recipients()) {
			t.Fatalf("round trip differs: %+v vs %+v", back, m)
		}
	})
}
