package confine

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := Policy{Plugin: "web", Exec: "/p/web/handler", Read: []string{"/p/web"}, Write: []string{"/d/web"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid policy: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"no executable", func(p *Policy) { p.Exec = "" }, "no executable"},
		{"relative executable", func(p *Policy) { p.Exec = "handler" }, "not an absolute path"},
		{"relative read tree", func(p *Policy) { p.Read = []string{"web"} }, "not an absolute path"},
		{"relative write tree", func(p *Policy) { p.Write = []string{"./d"} }, "not an absolute path"},
		{"unclean tree", func(p *Policy) { p.Read = []string{"/p/web/../other"} }, "not clean"},
		{"trailing slash", func(p *Policy) { p.Write = []string{"/d/web/"} }, "not clean"},
		{"control character", func(p *Policy) { p.Read = []string{"/p/a\nb"} }, "control character"},
		{"root read tree", func(p *Policy) { p.Read = []string{"/"} }, "whole file system"},
		{"root write tree", func(p *Policy) { p.Write = []string{"/"} }, "whole file system"},
		{"control character in the name", func(p *Policy) { p.Plugin = "a\nb" }, "control character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			p.Read, p.Write = slices.Clone(ok.Read), slices.Clone(ok.Write)
			tc.edit(&p)
			err := p.Validate()
			if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want ErrPolicy with %q", err, tc.want)
			}
		})
	}
}

func TestDecodePolicy(t *testing.T) {
	want := Policy{Plugin: "web", Exec: "/p/web/handler", Read: []string{"/p/web"}, Write: []string{"/d/web"}}
	enc, err := encodePolicy(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodePolicy(enc)
	if err != nil || got.Plugin != want.Plugin || got.Exec != want.Exec || !slices.Equal(got.Read, want.Read) || !slices.Equal(got.Write, want.Write) {
		t.Fatalf("round trip of %s = %+v, %v", enc, got, err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"unknown field", `{"plugin":"web","exec":"/h","net":true}`, `unknown field "net"`},
		{"relative path", `{"plugin":"web","exec":"/h","read":["p/web"]}`, "not an absolute path"},
		{"relative executable", `{"plugin":"web","exec":"h"}`, "not an absolute path"},
		{"data after the policy", `{"plugin":"web","exec":"/h"} {}`, "data after"},
		{"not an object", `["/h"]`, "decode"},
		{"empty", ``, "decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodePolicy(tc.in)
			if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decodePolicy(%s) = %v, want ErrPolicy with %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestWithoutOurs(t *testing.T) {
	got := withoutOurs([]string{"A=1", envPolicy + "={}", "B=2", envSelf + "=1", envPolicy + "X=keep"})
	if want := []string{"A=1", "B=2", envPolicy + "X=keep"}; !slices.Equal(got, want) {
		t.Errorf("withoutOurs = %q, want %q", got, want)
	}
}

func TestSupport(t *testing.T) {
	for _, tc := range []struct {
		s       Support
		missing string // "" = can enforce
		str     string
	}{
		{Support{OS: "linux", Landlock: 0, Seccomp: true}, "this kernel has no Landlock: needs Linux ≥ 5.13 with landlock in the lsm= list", "no landlock, seccomp (no sockets)"},
		{Support{OS: "linux", Landlock: 7, Seccomp: false}, "no seccomp filters", "landlock ABI 7 (files, TCP ports, signals and abstract sockets scoped), no seccomp"},
		{Support{OS: "linux", Landlock: 7, Seccomp: true}, "", "landlock ABI 7 (files, TCP ports, signals and abstract sockets scoped), seccomp (no sockets)"},
		{Support{OS: "linux", Landlock: 3, Seccomp: true}, "", "landlock ABI 3 (files, signals by seccomp instead), seccomp (no sockets)"},
		{Support{OS: "linux", Landlock: 10, Seccomp: true}, "", "landlock ABI 10 (files, TCP ports, UDP ports, pathname Unix sockets, signals and abstract sockets scoped), seccomp (no sockets)"},
		{Support{OS: "darwin", Seatbelt: false}, "sandbox-exec is missing", "no seatbelt (/usr/bin/sandbox-exec is missing)"},
		{Support{OS: "darwin", Seatbelt: true}, "", "seatbelt (sandbox-exec)"},
		{Support{OS: "windows"}, "no confinement for plugins on windows", "no confinement on windows"},
	} {
		t.Run(tc.str, func(t *testing.T) {
			err := tc.s.Missing()
			switch {
			case tc.missing == "" && err != nil:
				t.Errorf("Missing = %v, want nil", err)
			case tc.missing != "" && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.missing)):
				t.Errorf("Missing = %v, want ErrUnsupported naming %q", err, tc.missing)
			}
			if got := tc.s.String(); got != tc.str {
				t.Errorf("String = %q, want %q", got, tc.str)
			}
		})
	}
}

func TestRules(t *testing.T) {
	p := Policy{Plugin: "web", Exec: "/opt/web/handler", Read: []string{"/p/web", "/gone"}, Write: []string{"/d/web", "/p/web"}}
	present := func(path string) bool { return path != "/gone" && path != "/lib32" }
	got := p.rules("linux", present)
	byPath := map[string]Rule{}
	for _, r := range got {
		if _, dup := byPath[r.Path]; dup {
			t.Errorf("%s listed twice", r.Path)
		}
		byPath[r.Path] = r
	}
	for path, want := range map[string]Access{
		"/d/web": AccessAll, "/p/web": AccessAll, // a write grant wins over a read one
		"/opt/web/handler": AccessReadExec, "/usr": AccessReadExec, "/etc/ssl": AccessRead,
		"/dev/null": AccessReadWrite, "/dev/urandom": AccessRead, "/proc/self": AccessRead,
	} {
		if r, ok := byPath[path]; !ok || r.Access != want || r.Why == "" {
			t.Errorf("rule for %s = %+v, want access %s with a reason", path, r, want)
		}
	}
	for _, path := range []string{"/gone", "/lib32", "/", "/etc", "/home", "/root", "/tmp", "/proc", "/run", "/var", "/sys", "/etc/shadow"} {
		if _, ok := byPath[path]; ok {
			t.Errorf("%s is in the policy", path)
		}
	}
	// The handler inside a read tree needs no rule of its own.
	p.Exec = "/p/web/handler"
	for _, r := range p.rules("linux", present) {
		if r.Path == p.Exec {
			t.Errorf("the handler inside its read tree has a rule of its own: %+v", r)
		}
	}
}
