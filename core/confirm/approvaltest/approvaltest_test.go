package approvaltest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

// jsonQuote writes a string as JSON does, as the surfaces below show it.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestCheck runs the property on surfaces made to keep it and to break
// it: the harness must pass the one and catch each of the others.
func TestCheck(t *testing.T) {
	honest := func(c api.Confirmation) (string, bool) {
		return strings.Join(c.Why, "\n") + "\n" + textutil.Printable(c.Preview) + "\n" + string(c.Arguments), c.Exact()
	}
	tests := []struct {
		name   string
		render Render
		raw    bool
		fail   string // a failure that must be reported; "" for none
	}{
		{name: "honest", render: honest, raw: true},
		{name: "approves a sanitised display", fail: "offers Approve", render: func(c api.Confirmation) (string, bool) {
			return string(c.Arguments), !c.ArgumentsOmitted
		}},
		{name: "cuts long text but approves", fail: "lacks", render: func(c api.Confirmation) (string, bool) {
			s := string(c.Arguments)
			if len(s) > 300 {
				s = s[:300]
			}
			return s, c.Exact()
		}},
		{name: "approves omitted arguments", fail: "lacks", render: func(c api.Confirmation) (string, bool) {
			return string(c.Arguments), len(c.Hidden) == 0
		}},
		{name: "hides why it asks", fail: "does not show the reason", render: func(c api.Confirmation) (string, bool) {
			return string(c.Arguments), c.Exact()
		}},
		{name: "cuts a reason", fail: "does not show the reason", render: func(c api.Confirmation) (string, bool) {
			var b strings.Builder
			for _, w := range c.Why {
				b.WriteString(w[:min(len(w), 100)] + "\n")
			}
			return b.String() + string(c.Arguments), c.Exact()
		}},
		{name: "hides the preview", fail: "lacks lines of a short preview", render: func(c api.Confirmation) (string, bool) {
			return strings.Join(c.Why, "\n") + "\n" + string(c.Arguments), c.Exact()
		}},
		{name: "cuts a long preview but approves", fail: "offers Approve on a long preview", render: func(c api.Confirmation) (string, bool) {
			p := c.Preview[:min(len(c.Preview), 2000)]
			return strings.Join(c.Why, "\n") + "\n" + textutil.Printable(p) + "\n" + string(c.Arguments), c.Exact()
		}},
		{name: "shows the preview's control characters", fail: "control or bidi characters", render: func(c api.Confirmation) (string, bool) {
			return strings.Join(c.Why, "\n") + "\n" + c.Preview + "\n" + textutil.Printable(c.Preview) + "\n" + string(c.Arguments), c.Exact()
		}},
		{name: "approves an omitted preview", fail: "preview was left out", render: func(c api.Confirmation) (string, bool) {
			return strings.Join(c.Why, "\n") + "\n" + textutil.Printable(c.Preview) + "\n" + string(c.Arguments), !c.ArgumentsOmitted && len(c.Hidden) == 0
		}},
		{name: "never approves", fail: "not approvable", render: func(c api.Confirmation) (string, bool) {
			return string(c.Arguments), false
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			Check(rec, Surface{Name: tt.name, Render: tt.render, Quote: jsonQuote, Raw: tt.raw, Cases: 300})
			all := strings.Join(rec.errs, "\n")
			switch {
			case tt.fail == "" && len(rec.errs) > 0:
				t.Errorf("a surface that keeps the rule failed:\n%s", all)
			case tt.fail != "" && !strings.Contains(all, tt.fail):
				t.Errorf("a surface that breaks the rule was not caught (want %q), got:\n%s", tt.fail, all)
			}
		})
	}
}
