package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// The unit as written for an ordinary user, byte for byte (go test
// -update rewrites testdata/).
func TestRenderGolden(t *testing.T) {
	out, err := Render("/home/ann/bin/carapace", "/home/ann/.carapace")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "carapace.service.golden"), out)
}

// The paths reach the process as they are: an argument has systemd's
// specifiers (%), variables ($), escapes (\\) and quotes escaped; the
// executable's path is taken literally by systemd except for specifiers,
// and a path systemd refuses to run is refused here, saying what to do.
func TestRenderEscapes(t *testing.T) {
	tests := []struct {
		name, carapace, home string
		want                 string // the ExecStart line
		err                  string // or the error
	}{
		{name: "plain", carapace: "/usr/bin/carapace", home: "/home/ann/.carapace",
			want: `ExecStart="/usr/bin/carapace" --home "/home/ann/.carapace" serve`},
		{name: "a variable in the home", carapace: "/usr/bin/carapace", home: "/home/a$HOME/${USER}/$$",
			want: `ExecStart="/usr/bin/carapace" --home "/home/a$$HOME/$${USER}/$$$$" serve`},
		{name: "specifiers, quotes, escapes in the home", carapace: "/usr/bin/carapace", home: `/home/a "b" 'c'/100%h/d\e;f`,
			want: `ExecStart="/usr/bin/carapace" --home "/home/a \"b\" 'c'/100%%h/d\\e;f" serve`},
		{name: "a variable in the binary's path is literal", carapace: "/opt/$HOME x/100%/carapace", home: "/h",
			want: `ExecStart="/opt/$HOME x/100%%/carapace" --home "/h" serve`},
		{name: "a double quote in the binary's path", carapace: `/home/a "b"/carapace`, home: "/h", err: "systemd does not run"},
		{name: "a single quote in the binary's path", carapace: `/home/a'b/carapace`, home: "/h", err: "systemd does not run"},
		{name: "a backslash in the binary's path", carapace: `/home/a\b/carapace`, home: "/h", err: "systemd does not run"},
		{name: "a relative binary", carapace: "carapace", home: "/h", err: "absolute path"},
		{name: "a relative home", carapace: "/bin/carapace", home: "rel/home", err: "absolute path"},
		{name: "a newline", carapace: "/bin/car\napace", home: "/h", err: "control character"},
		{name: "a control character in the home", carapace: "/bin/carapace", home: "/h\x01", err: "control character"},
		{name: "not UTF-8", carapace: "/bin/carapace", home: "/h\xff", err: "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Render(tt.carapace, tt.home)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Render(%q, %q) = %v, want an error saying %q\n%s", tt.carapace, tt.home, err, tt.err, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "\n"+tt.want+"\n") {
				t.Errorf("ExecStart not escaped, want %s:\n%s", tt.want, out)
			}
		})
	}
}

// The unit for paths that need every escape, byte for byte.
func TestRenderGoldenSpecial(t *testing.T) {
	out, err := Render("/opt/$HOME x/100%/carapace", `/home/a "b"/$HOME/%h/c\d`)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "carapace.service.special.golden"), out)
}

// TestUnitVerifies has systemd itself check the rendered unit
// (systemd-analyze verify --user), with broken copies as the positive
// controls: the same check must refuse them. The binary lives under a
// path with a variable, a specifier and a space in it, which systemd must
// find as it is (verify checks that the executable exists).
func TestUnitVerifies(t *testing.T) {
	analyze := testutil.Require(t, "systemd-analyze", "systemd itself checks the unit (Debian: apt-get install systemd)")
	trueBin := testutil.Require(t, "true", "the unit's binary stands in for carapace")
	dir := t.TempDir()
	binDir := filepath.Join(dir, "a $HOME b%h;c")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "carapace")
	if err := os.Symlink(trueBin, bin); err != nil {
		t.Fatal(err)
	}
	out, err := Render(bin, filepath.Join(dir, `home "q" 'q' \ $HOME ${X} %h`))
	if err != nil {
		t.Fatal(err)
	}
	verify := func(unit []byte) ([]byte, error) {
		path := filepath.Join(dir, Unit)
		if err := os.WriteFile(path, unit, 0o644); err != nil {
			t.Fatal(err)
		}
		run := t.TempDir()
		if err := os.Chmod(run, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(analyze, "verify", "--user", path)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+run)
		return cmd.CombinedOutput()
	}
	if msg, err := verify(out); err != nil {
		t.Fatalf("systemd-analyze refuses the unit: %v\n%s\n%s", err, msg, out)
	}
	for _, c := range []struct{ name, from, to, says string }{
		{"a binary that does not exist", quotedExec(bin), `"/nonexistent/carapace"`, "/nonexistent/carapace"},
		// $ escaped in the executable's path: systemd would look for a
		// binary named with "$$".
		{"the binary's $ escaped", "$HOME b", "$$HOME b", "$$HOME"},
	} {
		broken := strings.Replace(string(out), c.from, c.to, 1)
		if broken == string(out) {
			t.Fatalf("%s: %q is not in the unit:\n%s", c.name, c.from, out)
		}
		if msg, err := verify([]byte(broken)); err == nil || !strings.Contains(string(msg), c.says) {
			t.Errorf("systemd-analyze accepts %s (the check proves nothing): %v\n%s", c.name, err, msg)
		}
	}
}

// quotedExec is bin as the unit's ExecStart quotes it.
func quotedExec(bin string) string {
	return `"` + strings.ReplaceAll(bin, "%", "%%") + `"`
}
