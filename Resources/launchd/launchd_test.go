package launchd

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/internal/plist"
	"github.com/carapace-dev/carapace/internal/testutil"
)

func TestRender(t *testing.T) {
	t.Parallel()
	out, err := Render("/Users/a & b/bin/carapace", "/Users/a & b")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("__")) {
		t.Errorf("a placeholder is left:\n%s", out)
	}
	p := decode(t, out)
	checks := map[string]any{
		"Label":             Label,
		"ProgramArguments":  []any{"/Users/a & b/bin/carapace", "serve"},
		"RunAtLoad":         true,
		"KeepAlive":         map[string]any{"SuccessfulExit": false},
		"StandardErrorPath": "/Users/a & b/Library/Logs/Carapace/serve.log",
		"StandardOutPath":   "/Users/a & b/Library/Logs/Carapace/serve.log",
	}
	for k, want := range checks {
		if got := p[k]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	env, _ := p["EnvironmentVariables"].(map[string]any)
	if path, _ := env["PATH"].(string); !slices.Contains(strings.Split(path, ":"), "/opt/homebrew/bin") {
		t.Errorf("PATH %q lacks Homebrew's bin, where container engines live", path)
	}
}

// Whatever a path holds, the plist gives it back as it is: launchd
// expands nothing (no variables, no ~, no %), so the only escaping is
// XML's, and a path XML cannot carry is refused.
func TestRenderLiteral(t *testing.T) {
	t.Parallel()
	for _, home := range []string{
		"/Users/ann",
		"/Users/a $HOME ${HOME} $$ %h %% ~ x",
		`/Users/a "b" 'c' \d`,
		"/Users/a & b &amp; &#x41; <c> ]]> <!-- d --> <![CDATA[e]]>",
		"/Users/änne/日本",
	} {
		bin := home + "/Applications/Carapace.app/Contents/MacOS/carapace"
		out, err := Render(bin, home)
		if err != nil {
			t.Fatalf("Render(%q): %v", home, err)
		}
		p := decode(t, out)
		if args, _ := p["ProgramArguments"].([]any); len(args) != 2 || args[0] != bin || args[1] != "serve" {
			t.Errorf("ProgramArguments = %q, want [%q serve]", p["ProgramArguments"], bin)
		}
		for _, k := range []string{"StandardOutPath", "StandardErrorPath"} {
			if want := home + "/Library/Logs/Carapace/serve.log"; p[k] != want {
				t.Errorf("%s = %q, want %q", k, p[k], want)
			}
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{
		{"carapace", "/Users/a"},
		{"/usr/local/bin/carapace", "~"},
		{"/usr/local/bin/carapace", "/Users/a\nb"},
		{"", "/Users/a"},
		// XML 1.0 has no way to carry these: the plist would not parse.
		{"/usr/local/bin/carapace", "/Users/a\x01b"},
		{"/usr/local/bin/car\x1bapace", "/Users/a"},
		{"/usr/local/bin/carapace", "/Users/a\tb"},
		{"/usr/local/bin/carapace", "/Users/a\ufffeb"},
		{"/usr/local/bin/carapace", "/Users/a\xffb"}, // not UTF-8
	} {
		if _, err := Render(c[0], c[1]); err == nil {
			t.Errorf("Render(%q, %q) succeeded", c[0], c[1])
		}
	}
}

// decode decodes a plist or fails the test.
func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	p, err := plist.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The LaunchAgent as written for a user whose paths need escaping, byte
// for byte (go test -update rewrites testdata/).
func TestRenderGolden(t *testing.T) {
	out, err := Render("/Users/a & b/Applications/Carapace.app/Contents/MacOS/carapace", "/Users/a & b")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "dev.carapace.serve.plist"), out)
}
