package loginitem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// env gives the test its own XDG directories: user config in one temporary
// directory, system config in another. It returns the user autostart
// directory and the system one (neither created).
func env(t *testing.T) (user, system string) {
	t.Helper()
	cfg, sys := t.TempDir(), t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("XDG_CONFIG_DIRS", sys)
	return filepath.Join(cfg, "autostart"), filepath.Join(sys, "autostart")
}

func TestRoundTrip(t *testing.T) {
	user, _ := env(t)
	item := New(Options{Executable: "/opt/Carapace Apps/carapace-app", Home: "/home/ann/my carapace"})
	path := filepath.Join(user, fileName)
	for i, step := range []struct {
		set  *bool // SetEnabled(*set) first, unless nil
		want bool
	}{
		{nil, false},
		{ptr(true), true},
		{ptr(true), true}, // again: rewritten, still on
		{ptr(false), false},
		{ptr(false), false}, // again: nothing to remove
		{ptr(true), true},
	} {
		if step.set != nil {
			if err := item.SetEnabled(*step.set); err != nil {
				t.Fatalf("step %d: SetEnabled(%v): %v", i, *step.set, err)
			}
		}
		on, err := item.Enabled()
		if err != nil || on != step.want {
			t.Fatalf("step %d: Enabled() = %v, %v; want %v", i, on, err, step.want)
		}
		fi, err := os.Stat(path)
		if step.want != (err == nil) {
			t.Fatalf("step %d: the entry %s exists: %v; want %v", i, path, err == nil, step.want)
		}
		if step.want {
			if fi.Mode().Perm() != 0o644 {
				t.Errorf("step %d: mode %v; want 0644", i, fi.Mode().Perm())
			}
			argv, err := parseExec(entryValue(t, path, "Exec"))
			if want := []string{"/opt/Carapace Apps/carapace-app", "--home", "/home/ann/my carapace"}; err != nil || !slices.Equal(argv, want) {
				t.Errorf("step %d: Exec runs %q (%v); want %q", i, argv, err, want)
			}
		}
		if leftovers, _ := filepath.Glob(filepath.Join(user, ".*")); len(leftovers) > 0 {
			t.Errorf("step %d: temporary files left: %v", i, leftovers)
		}
	}
}

func TestEnabledReadsTheEntry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entry   string
		want    bool
		wantErr bool
	}{
		{name: "plain", entry: "[Desktop Entry]\nType=Application\nExec=carapace-app\n", want: true},
		{name: "hidden", entry: "[Desktop Entry]\nExec=carapace-app\nHidden=true\n"},
		{name: "hidden with spaces", entry: "# comment\n\n[Desktop Entry]\nExec=carapace-app\nHidden = true\n"},
		{name: "not hidden", entry: "[Desktop Entry]\nExec=carapace-app\nHidden=false\n", want: true},
		{name: "GNOME switch off", entry: "[Desktop Entry]\nExec=carapace-app\nX-GNOME-Autostart-enabled=false\n"},
		{name: "GNOME switch on", entry: "[Desktop Entry]\nExec=carapace-app\nX-GNOME-Autostart-enabled=true\n", want: true},
		{name: "Hidden in another group", entry: "[Desktop Entry]\nExec=carapace-app\n[Desktop Action x]\nHidden=true\n", want: true},
		{name: "not a desktop entry", entry: "Exec=carapace-app\n", wantErr: true},
		{name: "garbage in the group", entry: "[Desktop Entry]\nthis is not a key\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, _ := env(t)
			write(t, filepath.Join(user, fileName), tc.entry)
			on, err := New(Options{}).Enabled()
			if (err != nil) != tc.wantErr || on != tc.want {
				t.Fatalf("Enabled() = %v, %v; want %v (error: %v)", on, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), fileName) {
				t.Errorf("the error %q does not name the file", err)
			}
		})
	}
}

// TestSystemEntry: a system-wide entry counts until the user's hides it.
func TestSystemEntry(t *testing.T) {
	user, system := env(t)
	write(t, filepath.Join(system, fileName), "[Desktop Entry]\nType=Application\nExec=/usr/bin/carapace-app\n")
	item := New(Options{Executable: "/usr/bin/carapace-app"})
	if on, err := item.Enabled(); err != nil || !on {
		t.Fatalf("with a system-wide entry, Enabled() = %v, %v; want true", on, err)
	}
	if err := item.SetEnabled(false); err != nil {
		t.Fatal(err)
	}
	if on, err := item.Enabled(); err != nil || on {
		t.Fatalf("after SetEnabled(false), Enabled() = %v, %v; want false", on, err)
	}
	if got := entryValue(t, filepath.Join(user, fileName), "Hidden"); got != "true" {
		t.Errorf("the user's entry has Hidden=%q; want true", got)
	}
	if err := item.SetEnabled(true); err != nil {
		t.Fatal(err)
	}
	if on, err := item.Enabled(); err != nil || !on {
		t.Fatalf("after SetEnabled(true), Enabled() = %v, %v; want true", on, err)
	}
	// A hidden system-wide entry does not count, and off leaves nothing.
	write(t, filepath.Join(system, fileName), "[Desktop Entry]\nExec=/usr/bin/carapace-app\nHidden=true\n")
	if err := item.SetEnabled(false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(user, fileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("with the system entry hidden, SetEnabled(false) left a user entry: %v", err)
	}
}

// TestDirectories: ~/.config/autostart when XDG_CONFIG_HOME is unset or
// relative (invalid), the running program when no executable is given.
func TestDirectories(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, configHome := range []string{"", "relative/config"} {
		t.Run(fmt.Sprintf("XDG_CONFIG_HOME=%q", configHome), func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", configHome)
			t.Setenv("XDG_CONFIG_DIRS", t.TempDir())
			if err := New(Options{}).SetEnabled(true); err != nil {
				t.Fatal(err)
			}
			argv, err := parseExec(entryValue(t, filepath.Join(home, ".config", "autostart", fileName), "Exec"))
			if err != nil || !slices.Equal(argv, []string{self}) {
				t.Errorf("Exec runs %q (%v); want %q", argv, err, self)
			}
		})
	}
	t.Run("relative executable", func(t *testing.T) {
		env(t)
		if err := New(Options{Executable: "carapace-app"}).SetEnabled(true); err == nil || !strings.Contains(err.Error(), "not absolute") {
			t.Errorf("SetEnabled = %v; want an error about the relative path", err)
		}
	})
}

func TestExecLine(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string // "" checks the round trip only
	}{
		{[]string{"/usr/bin/carapace-app"}, `/usr/bin/carapace-app`},
		{[]string{"/opt/My Apps/carapace-app", "--home", "/home/u/my home"}, `"/opt/My Apps/carapace-app" --home "/home/u/my home"`},
		{[]string{"/a", "100%"}, `/a 100%%`},
		{[]string{"/a", ""}, `/a ""`},
		{[]string{"/a", `back\slash`}, `/a "back\\\\slash"`},
		{[]string{"/a", `say "hi"`}, `/a "say \\"hi\\""`},
		{[]string{"/a", "$HOME", "`id`", "~", "a|b", "a&b", "a;b", "*", "?", "#", "(x)", "<in", ">out", "it's"}, ""},
		{[]string{"/a", "tab\there", "new\nline", "cr\rhere"}, ""},
		{[]string{"/home/zoë/карапакс/app", "%u", "%%"}, ""},
	} {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			got, err := execLine(tc.argv)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("Exec=%s; want Exec=%s", got, tc.want)
			}
			if strings.ContainsAny(got, "\n\r\t") {
				t.Errorf("Exec=%q spans more than one line or holds a raw tab", got)
			}
			back, err := parseExec(got)
			if err != nil || !slices.Equal(back, tc.argv) {
				t.Errorf("Exec=%s runs %q (%v); want %q", got, back, err, tc.argv)
			}
		})
	}
	for _, bad := range [][]string{{"/a", "bell\a"}, {"/a", "del\x7f"}, {"/a", "\xff"}} {
		if got, err := execLine(bad); err == nil {
			t.Errorf("execLine(%q) = %q; want an error", bad, got)
		}
	}
}

// parseExec reads an Exec value as the Desktop Entry Specification (1.5)
// says a launcher does, independently of execLine: the string escapes
// first (\s \n \t \r \\), then the quoting rules (arguments split at
// spaces; reserved characters only inside double quotes, where \ escapes
// " ` $ \), then %% as a literal % (any other field code is refused here:
// the app's entry has none).
func parseExec(value string) ([]string, error) {
	var s strings.Builder
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c != '\\' {
			s.WriteByte(c)
			continue
		}
		if i++; i == len(value) {
			return nil, errors.New("a lone backslash at the end")
		}
		switch value[i] {
		case 's':
			s.WriteByte(' ')
		case 'n':
			s.WriteByte('\n')
		case 't':
			s.WriteByte('\t')
		case 'r':
			s.WriteByte('\r')
		case '\\':
			s.WriteByte('\\')
		default:
			return nil, fmt.Errorf("unknown string escape \\%c", value[i])
		}
	}
	line := s.String()
	var args []string
	var cur strings.Builder
	inArg, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\':
			if i++; i == len(line) || !strings.ContainsRune("\"`$\\", rune(line[i])) {
				return nil, fmt.Errorf("a backslash in quotes before %q", line[i:])
			}
			cur.WriteByte(line[i])
		case quoted && c == '"':
			quoted = false
		case quoted:
			cur.WriteByte(c)
		case c == '"':
			quoted, inArg = true, true
		case c == ' ':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		case strings.IndexByte(" \t\n\"'\\><~|&;$*?#()`", c) >= 0:
			return nil, fmt.Errorf("reserved character %q outside quotes", c)
		default:
			cur.WriteByte(c)
			inArg = true
		}
	}
	if quoted {
		return nil, errors.New("an unterminated quote")
	}
	if inArg {
		args = append(args, cur.String())
	}
	for i, a := range args {
		var out strings.Builder
		for j := 0; j < len(a); j++ {
			if a[j] != '%' {
				out.WriteByte(a[j])
				continue
			}
			if j++; j == len(a) || a[j] != '%' {
				return nil, fmt.Errorf("a field code in %q", a)
			}
			out.WriteByte('%')
		}
		args[i] = out.String()
	}
	return args, nil
}

// entryValue returns the value of key in the [Desktop Entry] group of the
// file at path, as written (string escapes kept).
func entryValue(t *testing.T, path, key string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	group := ""
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "[") {
			group = line
		} else if k, v, ok := strings.Cut(line, "="); ok && group == "[Desktop Entry]" && k == key {
			return v
		}
	}
	t.Fatalf("%s has no %s in [Desktop Entry]:\n%s", path, key, data)
	return ""
}

// write writes a file, creating its directory.
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
