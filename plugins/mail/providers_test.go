package mail

import "testing"

func TestProviderFor(t *testing.T) {
	for _, tc := range []struct {
		address, want string
		saveSent      bool
	}{
		{"me@fastmail.com", "fastmail", true},
		{" Me@iCloud.com ", "icloud", true},
		{"me@gmail.com", "gmail", false},
		{"me@example.org", "", false},
		{"no-at-sign", "", false},
		{"me@gmail.com.evil.example", "", false},
	} {
		p, ok := ProviderFor(tc.address)
		if ok != (tc.want != "") || p.Name != tc.want || (ok && p.SaveSent != tc.saveSent) {
			t.Errorf("ProviderFor(%q) = %+v, %v; want %q", tc.address, p, ok, tc.want)
		}
	}
	for hp, want := range map[string]Security{"imap.example.org:993": SecurityTLS, "smtp.example.org:465": SecurityTLS,
		"imap.example.org:143": SecurityStartTLS, "smtp.example.org:587": SecurityStartTLS} {
		if got := SecurityFor(hp); got != want {
			t.Errorf("SecurityFor(%s) = %s, want %s", hp, got, want)
		}
	}
}
