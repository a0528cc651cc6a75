package pluginpolicy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/confine"
	"github.com/carapace-dev/carapace/core/egress"
)

func TestImpose(t *testing.T) {
	pol := Policy{
		Plugin: "mail", Exec: "/p/mail/handler",
		Read:  []Path{{Path: "/p/mail"}, {Path: "/notes"}},
		Write: []Path{{Path: "/h/data/mail"}},
		Hosts: []Host{{Name: "imap.example.com", Port: 993}, {Name: "127.0.0.1", Port: 8080}},
	}
	linux := confine.Support{OS: "linux", Landlock: 7, Seccomp: true}
	noLandlock := confine.Support{OS: "linux", Seccomp: true}
	allow := []egress.Host{{Name: "imap.example.com", Port: 993}, {Name: "127.0.0.1", Port: 8080}}
	unconfined := pol
	unconfined.Unconfined = true
	for _, tc := range []struct {
		name     string
		pol      Policy
		sup      confine.Support
		confined bool
		err      string
	}{
		{"confined", pol, linux, true, ""},
		{"the user accepted running it unconfined", unconfined, linux, false, ""},
		{"unconfined needs no support", unconfined, noLandlock, false, ""},
		{"no support and no consent: refused", pol, noLandlock, false, "[plugins.mail] unconfined = true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recorded int
			cp, eo, err := tc.pol.Impose(tc.sup, egress.Options{Plugin: "forged", Public: true, Allow: []egress.Host{{Name: "evil.example", Port: 1}},
				Record: func(egress.Record) { recorded++ }})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, confine.ErrUnsupported) {
					t.Fatalf("err %v, want one naming %q and wrapping ErrUnsupported", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.confined {
				want := &confine.Policy{Plugin: "mail", Exec: "/p/mail/handler", Read: []string{"/p/mail", "/notes"}, Write: []string{"/h/data/mail"}}
				if !reflect.DeepEqual(cp, want) {
					t.Errorf("confine policy %+v, want %+v", cp, want)
				}
			} else if cp != nil {
				t.Errorf("unconfined, yet a confine policy: %+v", cp)
			}
			// The egress point is the policy's whatever the caller passed:
			// its own name, its declared hosts only, not public.
			if eo.Plugin != "mail" || eo.Public || !reflect.DeepEqual(eo.Allow, allow) {
				t.Errorf("egress %+v", eo)
			}
			eo.Record(egress.Record{})
			if recorded != 1 {
				t.Errorf("the caller's Record was not kept")
			}
		})
	}
}
