package tray

import "testing"

// dbusmenu reads an underscore as the access-key marker: a literal one
// must be doubled, or snake_case tool names lose theirs.
func TestLabel(t *testing.T) {
	for in, want := range map[string]string{"echo_confirm · main": "echo__confirm · main", "Quit Carapace": "Quit Carapace", "__": "____"} {
		if got := label(in); got != want {
			t.Errorf("label(%q) = %q, want %q", in, got, want)
		}
	}
}
