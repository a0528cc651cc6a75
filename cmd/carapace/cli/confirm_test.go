package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/control"
	"github.com/carapace-dev/carapace/internal/testutil/approvaltest"
)

// TestApproveShowsWhatRuns: carapace confirm approve approves only what it
// printed in full — never a sanitised copy — and with --raw it prints the
// arguments as they run, whole.
func TestApproveShowsWhatRuns(t *testing.T) {
	approvaltest.Check(t, approvaltest.Surface{
		Name: "cli approve",
		Render: func(c control.Confirmation) (string, bool) {
			var b strings.Builder
			describeDecision(&b, c, "Approving")
			return b.String(), c.Exact()
		},
		Quote: func(s string) string {
			b, _ := json.Marshal(s) // the arguments print as JSON, then printable
			return printable(string(b))
		},
		Raw: true,
	})
}
