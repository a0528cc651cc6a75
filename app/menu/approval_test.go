package menu

import (
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/api"
	"github.com/carapace-dev/carapace/core/confirm/approvaltest"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// The menu offers Approve only where its submenu shows every argument that
// runs (issue 22): for random arguments, the text of the submenu — its
// wrapped lines joined again — holds every leaf whenever Approve is
// enabled; a confirmation with hidden values offers Deny only.
func TestApprovalProperty(t *testing.T) {
	approvaltest.Check(t, approvaltest.Surface{Name: "menu", Render: renderMenu, Quote: Quote, Key: PathKey})
}

// renderMenu is the menu as approvaltest sees it: the confirmation's
// submenu as text, one item a line with wrapped lines joined again, and
// whether its Approve is enabled.
func renderMenu(c api.Confirmation) (string, bool) {
	s := State{}.Apply(api.WatchEvent{Type: api.WatchSnapshot, Status: &api.Status{}, Confirmations: []api.Confirmation{c}})
	sub, ok := Render(s, c.CreatedAt).Find("confirm/" + c.ID)
	if !ok {
		return "(no submenu for the confirmation)", false
	}
	var b strings.Builder
	approve := false
	for _, it := range sub.Children {
		switch {
		case it.Separator:
			continue
		case strings.HasPrefix(it.Title, cont): // a wrapped line goes on
			b.WriteString(strings.TrimPrefix(it.Title, cont))
			continue
		case it.ID == sub.ID+"/approve":
			approve = it.Enabled
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(it.Title)
	}
	return b.String(), approve
}

// The property's renderer is faithful: a confirmation's wrapped argument
// lines join into the leaf as Leaf.String writes it.
func TestRenderMenuJoinsWrappedLines(t *testing.T) {
	long := strings.Repeat("all work and no play ", 20)
	c := approvaltest.Confirmation([]byte(`{"prompt":"` + long + `"}`))
	text, approve := renderMenu(c)
	if !approve || !strings.Contains(text, "\nprompt = "+Quote(long)+"\n") {
		t.Fatalf("approve %v, text:\n%s", approve, text)
	}
}

// The menu shows a preview whole above the arguments and offers Approve;
// past MaxPreviewLines, or left out of the event, it offers Deny only and
// says where to read the whole.
func TestMenuPreview(t *testing.T) {
	tests := []struct {
		name    string
		preview string
		omitted bool
		approve bool
		want    string
	}{
		{"short", "To: anna@example.org\n\nTomorrow at 12?\n", false, true, "What it will do (whole):\nTo: anna@example.org\n\nTomorrow at 12?\nArguments:"},
		{"at the limit", strings.Repeat("line\n", MaxPreviewLines), false, true, "line\nArguments:"},
		{"past the limit", strings.Repeat("line\n", MaxPreviewLines+1), false, false, "… 1 more lines not shown: read it whole with carapace confirm show 01234567"},
		{"left out", "", true, false, "(not loaded yet: see carapace confirm show 01234567)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := approvaltest.Confirmation([]byte(`{"draft_id":"d-1"}`))
			c.Preview, c.PreviewOmitted, c.PreviewDigest = tt.preview, tt.omitted, "sha256:1"
			text, approve := renderMenu(c)
			if approve != tt.approve || !strings.Contains(text, tt.want) {
				t.Errorf("approve %v; want %v and %q in:\n%s", approve, tt.approve, tt.want, textutil.Clip(text, 2000))
			}
		})
	}
}
