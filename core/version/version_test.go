package version

import "testing"

func TestSemver(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0.3.1", "0.3.1"},
		{"v1.2.0", "1.2.0"},
		{"0.2.0-dev+abc", "0.2.0"},
		{"dev", Base},
		{"d9df215", Base},
		{"", Base},
	} {
		if got := Semver(tc.in); got != tc.want {
			t.Errorf("Semver(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
