//go:build linux

package loginitem

// Linux: the XDG Autostart Specification. The app starts at login when
// $XDG_CONFIG_HOME/autostart/carapace.desktop (default
// ~/.config/autostart) is a desktop entry that is not hidden. A user's
// entry overrides a system-wide one of the same name in
// $XDG_CONFIG_DIRS/autostart (default /etc/xdg/autostart), which is
// disabled by a user entry with Hidden=true.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/carapace-dev/carapace/internal/atomicfile"
)

// fileName is the autostart entry's name, the app's desktop-file id.
const fileName = "carapace.desktop"

// autostart is the Item of an XDG desktop.
type autostart struct {
	opts Options
}

var _ Item = (*autostart)(nil)

// New returns the app's XDG autostart entry. The directories are read
// from the environment (XDG_CONFIG_HOME, XDG_CONFIG_DIRS, HOME) at each
// call.
func New(opts Options) Item {
	return &autostart{opts: opts}
}

// Enabled implements Item: the user's entry decides when there is one,
// else a system-wide one; an entry counts unless Hidden=true or
// X-GNOME-Autostart-enabled=false.
func (a *autostart) Enabled() (bool, error) {
	userDir, err := userAutostartDir()
	if err != nil {
		return false, err
	}
	for _, dir := range append([]string{userDir}, systemAutostartDirs()...) {
		path := filepath.Join(dir, fileName)
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("loginitem: read the autostart entry %s: %w", path, err)
		}
		on, err := entryEnabled(data)
		if err != nil {
			return false, fmt.Errorf("loginitem: %s: %w (delete it, or switch Start at login off and on to rewrite it)", path, err)
		}
		return on, nil
	}
	return false, nil
}

// SetEnabled implements Item. On, it writes the user's entry (replacing
// any, atomically, mode 0644); off, it removes it, and writes one with
// Hidden=true instead when a system-wide entry would still start the app.
func (a *autostart) SetEnabled(on bool) error {
	dir, err := userAutostartDir()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, fileName)
	if !on {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("loginitem: remove the autostart entry %s: %w", path, err)
		}
		if enabled, err := a.Enabled(); err != nil || !enabled {
			return nil // no entry left that a desktop would start
		}
		// A system-wide entry still starts the app: the specification's
		// way to switch it off is a user entry that hides it.
		return writeAtomic(path, []byte("[Desktop Entry]\nType=Application\nName=Carapace\nHidden=true\n"))
	}

	exe := a.opts.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("loginitem: the app's own path, for the autostart entry: %w (pass Options.Executable)", err)
		}
	}
	if !filepath.IsAbs(exe) {
		return fmt.Errorf("loginitem: the app's path %q is not absolute: the desktop would not find it at login", exe)
	}
	argv := []string{exe}
	if a.opts.Home != "" {
		argv = append(argv, "--home", a.opts.Home)
	}
	execValue, err := execLine(argv)
	if err != nil {
		return err
	}
	entry := "[Desktop Entry]\n" +
		"Type=Application\n" +
		"Version=1.5\n" +
		"Name=Carapace\n" +
		"Comment=The Carapace menu-bar app: your agent's status and approvals\n" +
		"Exec=" + execValue + "\n" +
		"Terminal=false\n" +
		"X-GNOME-Autostart-enabled=true\n"
	return writeAtomic(path, []byte(entry))
}

// userAutostartDir is $XDG_CONFIG_HOME/autostart, or ~/.config/autostart
// (a relative XDG_CONFIG_HOME is invalid and ignored, as the Base
// Directory Specification says).
func userAutostartDir() (string, error) {
	if dir := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "autostart"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		return "", fmt.Errorf("loginitem: no home directory for ~/.config/autostart (set HOME or XDG_CONFIG_HOME): %v", err)
	}
	return filepath.Join(home, ".config", "autostart"), nil
}

// systemAutostartDirs are the autostart directories of $XDG_CONFIG_DIRS
// (default /etc/xdg), most important first.
func systemAutostartDirs() []string {
	dirs := os.Getenv("XDG_CONFIG_DIRS")
	if dirs == "" {
		dirs = "/etc/xdg"
	}
	var out []string
	for _, d := range filepath.SplitList(dirs) {
		if filepath.IsAbs(d) {
			out = append(out, filepath.Join(d, "autostart"))
		}
	}
	return out
}

// entryEnabled reads a desktop entry's [Desktop Entry] group and reports
// whether it starts its program: not Hidden=true, not
// X-GNOME-Autostart-enabled=false.
func entryEnabled(data []byte) (bool, error) {
	group, found := "", false
	on := true
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			group = line[1 : len(line)-1]
			found = found || group == "Desktop Entry"
		case group == "Desktop Entry":
			key, value, ok := strings.Cut(line, "=")
			if !ok {
				return false, fmt.Errorf("line %q is not key=value", line)
			}
			switch strings.TrimSpace(key) {
			case "Hidden":
				on = on && strings.TrimSpace(value) != "true"
			case "X-GNOME-Autostart-enabled":
				on = on && strings.TrimSpace(value) != "false"
			}
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	if !found {
		return false, errors.New("it is not a desktop entry (no [Desktop Entry] group)")
	}
	return on, nil
}

// execReserved are the characters that make the Desktop Entry
// Specification's Exec key quote an argument.
const execReserved = " \t\n\"'\\><~|&;$*?#()`"

// execLine writes argv as the value of an Exec key: each argument quoted
// when it holds a reserved character (inside quotes, `"`, "`", "$" and
// "\" take a backslash), "%" doubled (it starts a field code), and the
// whole then escaped as a string value ("\" doubled; newline, tab and
// carriage return as \n, \t, \r). Other control characters and invalid
// UTF-8 cannot be written and are an error.
func execLine(argv []string) (string, error) {
	var b strings.Builder
	for i, arg := range argv {
		if !utf8.ValidString(arg) {
			return "", fmt.Errorf("loginitem: the argument %q is not UTF-8: it cannot be written in an autostart entry", arg)
		}
		for _, r := range arg {
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
				return "", fmt.Errorf("loginitem: the argument %q holds a control character: it cannot be written in an autostart entry", arg)
			}
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		arg = strings.ReplaceAll(arg, "%", "%%")
		if arg != "" && !strings.ContainsAny(arg, execReserved) {
			b.WriteString(arg)
			continue
		}
		b.WriteByte('"')
		for _, r := range arg {
			if strings.ContainsRune("\"`$\\", r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
		b.WriteByte('"')
	}
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(b.String()), nil
}

// writeAtomic writes data to path (mode 0644) in its directory, created
// 0700 if missing: a reader sees the old entry or the new one, never half
// of one.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("loginitem: create the autostart directory %s: %w", dir, err)
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("loginitem: write the autostart entry %s: %w", path, err)
	}
	return nil
}
