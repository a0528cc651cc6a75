package web

import "testing"

func TestHostAddr(t *testing.T) {
	cases := []struct {
		host    string
		want    string // "" : not an address
		numeric bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"2130706433", "127.0.0.1", true},
		{"0x7f000001", "127.0.0.1", true},
		{"0x7f.1", "127.0.0.1", true},
		{"0177.0.0.1", "127.0.0.1", true},
		{"0177.1", "127.0.0.1", true},
		{"127.1", "127.0.0.1", true},
		{"127.0.1", "127.0.0.1", true},
		{"127.0.0.1.", "127.0.0.1", true},
		{"0", "0.0.0.0", true},
		{"0x0", "0.0.0.0", true},
		{"169.254.43518", "169.254.169.254", true},
		{"2852039166", "169.254.169.254", true},
		{"0xA9.0xFE.0xA9.0xFE", "169.254.169.254", true},
		{"10.1", "10.0.0.1", true},
		{"::1", "::1", true},
		{"::ffff:127.0.0.1", "127.0.0.1", true},
		{"::ffff:7f00:1", "127.0.0.1", true},
		{"93.184.216.34", "93.184.216.34", true},
		{"example.com", "", false},
		{"1.example.com", "", false},
		{"example.123", "", true}, // a numeric last label that is no address
		{"1.2.3.4.5", "", true},
		{"256.1.1.1", "", true},
		{"1.2.3.256", "", true},
		{"0x1g", "", true},
		{"4294967296", "", true},
		{"fe80::1%eth0", "", true},
	}
	for _, tc := range cases {
		a, ok, numeric := hostAddr(tc.host)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tc.want || numeric != tc.numeric {
			t.Errorf("hostAddr(%q) = %q numeric %v, want %q numeric %v", tc.host, got, numeric, tc.want, tc.numeric)
		}
	}
}
