package mail

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	acct := func(mod map[string]any) map[string]any {
		a := map[string]any{"name": "work", "imap": "imap.example.com:993", "smtp": "smtp.example.com:465", "username": "me@example.com", "from": "Me <me@example.com>"}
		for k, v := range mod {
			if v == nil {
				delete(a, k)
			} else {
				a[k] = v
			}
		}
		return a
	}
	cfg := func(a map[string]any, extra map[string]any) map[string]any {
		c := map[string]any{"accounts": []any{a}}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	cases := []struct {
		name    string
		cfg     map[string]any
		wantErr string // "" for valid
	}{
		{"minimal", cfg(acct(nil), nil), ""},
		{"empty", map[string]any{}, ""},
		{"starttls", cfg(acct(map[string]any{"imap": "imap.example.com:143", "imap_security": "starttls", "smtp_security": "starttls"}), nil), ""},
		{"plain on the loopback", cfg(acct(map[string]any{"imap": "127.0.0.1:1143", "imap_security": "plain", "smtp": "[::1]:1025", "smtp_security": "plain"}), nil), ""},
		{"plain on localhost", cfg(acct(map[string]any{"smtp": "localhost:25", "smtp_security": "plain"}), nil), ""},
		{"plain off the loopback", cfg(acct(map[string]any{"imap_security": "plain"}), nil), "only to a loopback address"},
		{"plain to a LAN address", cfg(acct(map[string]any{"smtp": "192.168.1.2:25", "smtp_security": "plain"}), nil), "only to a loopback address"},
		{"bad security", cfg(acct(map[string]any{"imap_security": "ssl"}), nil), `want "tls", "starttls" or "plain"`},
		{"no port", cfg(acct(map[string]any{"imap": "imap.example.com"}), nil), "host:port"},
		{"a URL", cfg(acct(map[string]any{"imap": "imaps://imap.example.com:993"}), nil), "host:port"},
		{"missing from", cfg(acct(map[string]any{"from": nil}), nil), "missing from"},
		{"bad from", cfg(acct(map[string]any{"from": "not an address"}), nil), "from:"},
		{"CRLF in the username", cfg(acct(map[string]any{"username": "me\r\nx"}), nil), "line break"},
		{"bad name", cfg(acct(map[string]any{"name": "Work Mail"}), nil), "name:"},
		{"unknown key", cfg(acct(map[string]any{"password": "x"}), nil), `unknown setting "password"`},
		{"twice the same name", map[string]any{"accounts": []any{acct(nil), acct(nil)}}, "used twice"},
		{"group of an unknown account", cfg(acct(nil), map[string]any{"groups": map[string]any{"main": map[string]any{"accounts": []any{"home"}}}}), `no account is named "home"`},
		{"group with all", cfg(acct(nil), map[string]any{"groups": map[string]any{"main": map[string]any{"accounts": []any{"*"}, "daily_send_cap": json.Number("5")}}}), ""},
		{"cap too high", cfg(acct(nil), map[string]any{"groups": map[string]any{"main": map[string]any{"daily_send_cap": json.Number("5000")}}}), "daily_send_cap"},
		{"bad group name", cfg(acct(nil), map[string]any{"groups": map[string]any{"a b": map[string]any{}}}), "not a group name"},
		{"allow-list", cfg(acct(nil), map[string]any{"recipient_allowlist": []any{"a@example.org", "@example.net"}}), ""},
		{"bad allow-list entry", cfg(acct(nil), map[string]any{"recipient_allowlist": []any{"example.net"}}), "neither an address nor @domain"},
		{"inbound", cfg(acct(map[string]any{"inbound_group": "main", "inbound_senders": []any{"Boss <boss@example.com>"}}), nil), ""},
		{"smtp username", cfg(acct(map[string]any{"smtp_username": "me@icloud.com"}), nil), ""},
		{"bad inbound sender", cfg(acct(map[string]any{"inbound_senders": []any{"boss"}}), nil), "inbound_senders"},
		{"unknown top-level key", map[string]any{"account": []any{}}, `unknown setting "account"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one with %q", err, tc.wantErr)
			}
		})
	}
}

func TestConfigAccessAndAllowList(t *testing.T) {
	c, err := parseConfig(map[string]any{
		"accounts": []any{
			map[string]any{"name": "work", "imap": "i.example.com:993", "smtp": "s.example.com:465", "username": "u", "from": "u@example.com"},
			map[string]any{"name": "home", "imap": "i.example.com:993", "smtp": "s.example.com:465", "username": "v", "from": "v@example.com"},
		},
		"groups":              map[string]any{"main": map[string]any{"accounts": []any{"*"}}, "work": map[string]any{"accounts": []any{"work"}, "daily_send_cap": json.Number("0")}},
		"recipient_allowlist": []any{"Alice@Example.org", "@example.net"},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := func(g string) string {
		var out []string
		for _, a := range c.accountsFor(g) {
			out = append(out, a.Name)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ group, want string }{{"main", "work,home"}, {"work", "work"}, {"kids", ""}} {
		if got := names(tc.group); got != tc.want {
			t.Errorf("accounts of %s: %q, want %q", tc.group, got, tc.want)
		}
	}
	for _, tc := range []struct {
		group string
		want  int
	}{{"main", DefaultDailySendCap}, {"work", 0}, {"kids", 0}} {
		if got := c.capFor(tc.group); got != tc.want {
			t.Errorf("cap of %s: %d, want %d", tc.group, got, tc.want)
		}
	}
	for _, tc := range []struct {
		addr string
		ok   bool
	}{{"alice@example.org", true}, {"ALICE@EXAMPLE.ORG", true}, {"bob@example.org", false}, {"x@example.net", true}, {"x@sub.example.net", false}, {"x@example.net.evil.com", false}} {
		if got := c.allowed(tc.addr); got != tc.ok {
			t.Errorf("allowed(%s) = %v, want %v", tc.addr, got, tc.ok)
		}
	}
}
