package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confirm/approvaltest"
)

// TestApproveShowsWhatRuns: carapace confirm approve approves only what it
// printed in full — never a sanitised copy — and with --raw it prints the
// arguments as they run, whole.
func TestApproveShowsWhatRuns(t *testing.T) {
	approvaltest.Check(t, approvaltest.Surface{
		Name: "cli approve",
		Render: func(c api.Confirmation) (string, bool) {
			var b strings.Builder
			describeDecision(&b, c, "Approving")
			return b.String(), c.Exact() && !c.PreviewOmitted
		},
		Quote: func(s string) string {
			b, _ := json.Marshal(s) // the arguments print as JSON, then printable
			return printable(string(b))
		},
		Raw: true,
	})
}

// TestPendingLine: the watch line points to approve only when it shows
// every argument as it runs.
func TestPendingLine(t *testing.T) {
	base := api.Confirmation{ID: "abcdef0123456789abcdef0123456789", Tool: "send", Group: "main", Session: "s1"}
	with := func(f func(*api.Confirmation)) api.Confirmation { c := base; f(&c); return c }
	tests := []struct {
		name string
		c    api.Confirmation
		want string
	}{
		{"short and whole", with(func(c *api.Confirmation) { c.Arguments = json.RawMessage(`{"to":"a"}`) }), `{"to":"a"} — carapace confirm approve abcdef01`},
		{"cut", with(func(c *api.Confirmation) {
			c.Arguments = json.RawMessage(`{"to":"` + strings.Repeat("a", 100) + `"}`)
		}), "… — carapace confirm show abcdef01"},
		{"hidden", with(func(c *api.Confirmation) {
			c.Arguments, c.Hidden = json.RawMessage(`{"p":"[REDACTED]"}`), []api.Hidden{{Path: "p", Kind: "bearer", Chars: 3}}
		}), `(1 hidden) {"p":"[REDACTED]"} — carapace confirm show --raw abcdef01`},
		{"omitted", with(func(c *api.Confirmation) { c.ArgumentsOmitted = true }), "(large) — carapace confirm show abcdef01"},
		{"preview", with(func(c *api.Confirmation) {
			c.Arguments, c.Preview, c.PreviewDigest = json.RawMessage(`{"id":"d1"}`), "To: a@example.org\n\nhi\n", "sha256:1"
		}), `(with a preview: read it first) {"id":"d1"} — carapace confirm show abcdef01`},
		{"why", with(func(c *api.Confirmation) {
			c.Arguments, c.Why = json.RawMessage(`{"url":"https://a.example/?d=x"}`), []string{"the URL in \"url\" was not given", "this session read https://b.example/ at 10:42 UTC"}
		}), `(why: the URL in "url" was not given; this session read https://b.example/ at 10:42 UTC) {"url":"https://a.example/?d=x"} — carapace confirm approve abcdef01`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pendingLine(tt.c); !strings.HasSuffix(got, tt.want) {
				t.Errorf("pendingLine = %q, want it to end %q", got, tt.want)
			}
		})
	}
}

// TestListAndShowSayWhy: confirm list counts the reasons the core asks
// for, confirm show prints each whole; a confirmation without any says
// nothing of it (control).
func TestListAndShowSayWhy(t *testing.T) {
	long := "this session read https://news.example.org/" + strings.Repeat("p", 150) + " at 10:42 UTC (web_fetch)"
	c := api.Confirmation{ID: "abcdef0123456789abcdef0123456789", Tool: "web_fetch", Group: "main", Session: "s1",
		Arguments: json.RawMessage(`{"url":"https://a.example/"}`), Why: []string{`the URL in "url" was not given`, long}}
	plain := c
	plain.Why = nil
	for _, tt := range []struct {
		c    api.Confirmation
		want bool
	}{{c, true}, {plain, false}} {
		var list, show strings.Builder
		if err := printConfirmations(&list, []api.Confirmation{tt.c}); err != nil {
			t.Fatal(err)
		}
		writeConfirmation(&show, tt.c)
		if got := strings.Contains(list.String(), "(why: 2 reasons, see confirm show)"); got != tt.want {
			t.Errorf("list says why: %v, want %v\n%s", got, tt.want, list.String())
		}
		got := strings.Contains(show.String(), "  why:      "+long+"\n") && strings.Contains(show.String(), `why:      the URL in "url" was not given`)
		if got != tt.want || !tt.want && strings.Contains(show.String(), "why:") {
			t.Errorf("show says why: %v, want %v\n%s", got, tt.want, show.String())
		}
	}
}
