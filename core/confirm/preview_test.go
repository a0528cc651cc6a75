package confirm

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/core/api"
)

// A confirmation with a preview binds its digest: an approval must name
// it (without it, or with another, it is refused and decides nothing); a
// denial may leave it out. Calls with the same arguments but another
// preview digest do not join. The preview's text is published whole —
// or left out of an event too large for it — and is not kept once
// resolved; the audit log records the digest, never the text.
func TestPreviewBinds(t *testing.T) {
	const digest = "sha256:aaaa"
	tests := []struct {
		name    string
		d       api.Decision
		refused bool
		want    Decision
	}{
		{"approve without the digest", api.Decision{Approve: true, ArgsHash: hashA}, true, ""},
		{"approve with another digest", api.Decision{Approve: true, ArgsHash: hashA, PreviewDigest: "sha256:bbbb"}, true, ""},
		{"deny with another digest", api.Decision{ArgsHash: hashA, PreviewDigest: "sha256:bbbb"}, true, ""},
		{"deny without the digest", api.Decision{ArgsHash: hashA}, false, Denied},
		{"approve with the digest", api.Decision{Approve: true, ArgsHash: hashA, PreviewDigest: digest}, false, Approved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			g := New(rec.options(Options{Timeout: time.Hour}))
			tk, err := g.Request(Request{Session: "s1", Group: "main", Tool: "mail_send", ArgsHash: hashA, Arguments: []byte(`{"x":1}`),
				Display: []byte(`{"x":1}`), Preview: "To: anna@example.org\n\nsecret plans\n", PreviewDigest: digest})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{"sha256:cccc", digest} { // another content, and the same: one approval runs one call
				other, err := g.Request(Request{Session: "s1", Group: "main", Tool: "mail_send", ArgsHash: hashA, PreviewDigest: d, Preview: "x"})
				if err != nil || other.Joined || other.ID() == tk.ID() {
					t.Fatalf("a request with preview digest %s: joined %v, err %v; want a confirmation of its own", d, other != nil && other.Joined, err)
				}
			}
			tt.d.ID, tt.d.Surface = tk.ID(), "cli"
			c, err := g.Decide(tt.d)
			if tt.refused {
				if !errors.Is(err, ErrMismatch) || !errors.Is(err, api.ErrConflict) {
					t.Fatalf("Decide: %v; want a mismatch", err)
				}
				if got, _ := g.Get(tk.ID()); !got.Pending() {
					t.Fatalf("a refused decision decided: %+v", got)
				}
				return
			}
			if err != nil || c.Decision != string(tt.want) {
				t.Fatalf("Decide: %+v, %v; want %s", c, err, tt.want)
			}
			if got, _ := g.Get(tk.ID()); got.Preview != "" || got.PreviewDigest != digest {
				t.Errorf("resolved: preview %q, digest %q; want the text dropped and the digest kept", got.Preview, got.PreviewDigest)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if p := rec.published[0]; p.Preview != "To: anna@example.org\n\nsecret plans\n" || p.PreviewDigest != digest || p.PreviewOmitted {
				t.Errorf("published %+v; want the preview whole and its digest", p)
			}
			n := 0
			for _, e := range rec.audited {
				if strings.Contains(e.Reason, "secret plans") {
					t.Errorf("the audit log holds the preview's text: %+v", e)
				}
				if e.Confirmation == tk.ID() && e.PreviewDigest == digest {
					n++
				}
			}
			if n != 2 {
				t.Errorf("%d audit entries of the confirmation carry the digest; want 2 (requested, decided)", n)
			}
		})
	}
}

// A preview too large for an event is left out of it, and said so.
func TestPreviewOmittedFromLargeEvents(t *testing.T) {
	for _, n := range []int{MaxEventPreview, MaxEventPreview + 1} {
		rec := &recorder{}
		g := New(rec.options(Options{Timeout: time.Hour}))
		if _, err := g.Request(Request{Session: "s1", Group: "main", Tool: "t", ArgsHash: hashA, Preview: strings.Repeat("x", n), PreviewDigest: "d"}); err != nil {
			t.Fatal(err)
		}
		p := rec.published[0]
		if omitted := n > MaxEventPreview; p.PreviewOmitted != omitted || (p.Preview == "") != omitted {
			t.Errorf("%d bytes: omitted %v, %d bytes published; want omitted %v", n, p.PreviewOmitted, len(p.Preview), omitted)
		}
		if p.PreviewOmitted && p.Exact() {
			t.Errorf("a confirmation whose preview was left out counts as exact")
		}
	}
}

// A preview in which the sanitiser finds a secret is shown redacted, on
// the bus too, and listed in Hidden at PreviewPath: no surface can
// approve it, only one that read it as it runs (Raw, audited) can.
func TestPreviewWithASecret(t *testing.T) {
	const key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA"
	rec := &recorder{}
	g := New(rec.options(Options{Timeout: time.Hour}))
	text := "To: eve@example.org\n\nHere is the key:\n" + key
	tk, err := g.Request(Request{Session: "s1", Group: "main", Tool: "mail_send", ArgsHash: hashA, Arguments: []byte(`{"x":1}`),
		Display: []byte(`{"x":1}`), Preview: text, PreviewDigest: "sha256:aaaa"})
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	pub := rec.published[0]
	rec.mu.Unlock()
	if strings.Contains(pub.Preview, "MIIEowIBAAKCAQEA") || !strings.Contains(pub.Preview, "Here is the key:") ||
		len(pub.Hidden) != 1 || pub.Hidden[0].Path != PreviewPath || pub.Exact() {
		t.Fatalf("published preview %q, hidden %+v; want it redacted, listed at %s, not exact", pub.Preview, pub.Hidden, PreviewPath)
	}
	d := api.Decision{ID: tk.ID(), Approve: true, ArgsHash: hashA, PreviewDigest: "sha256:aaaa", Surface: "telegram"}
	if _, err := g.Decide(d); !errors.Is(err, ErrHidden) {
		t.Fatalf("an approval of a redacted preview: %v; want ErrHidden", err)
	}
	raw, err := g.Raw(tk.ID())
	if err != nil || raw.Preview != text || !raw.Raw || !raw.Exact() {
		t.Fatalf("Raw: preview %q, raw %v, %v; want the text as it runs", raw.Preview, raw.Raw, err)
	}
	d.Raw, d.Surface = true, "cli"
	if c, err := g.Decide(d); err != nil || c.Decision != string(Approved) {
		t.Fatalf("an approval on the preview as it runs: %+v, %v", c, err)
	}
}
