// Package systemd holds the systemd user unit that runs the Carapace core
// (`carapace serve`) in the background on Linux without the menu-bar app,
// and fills in its paths. `carapace service install` installs it.
package systemd

import (
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Unit is the unit's file name.
const Unit = "carapace.service"

// ServeUnit is the unit with the placeholders __CARAPACE__ (the carapace
// binary) and __HOME__ (Carapace's home).
//
//go:embed carapace.service
var ServeUnit []byte

// Render returns ServeUnit for the carapace binary at carapace and the
// Carapace home home, both absolute, so that both reach the process as
// they are. The home is an argument: quoted, with systemd's escapes (\, "),
// specifiers (%) and variables ($) escaped. The binary's path is the
// command, which systemd takes literally but for specifiers; a path systemd
// refuses to run (one with a quote or a backslash) is an error, as is a
// path with a control character or one that is not UTF-8, which systemd
// ignores a line for.
func Render(carapace, home string) ([]byte, error) {
	for _, p := range []struct{ what, path string }{{"the carapace binary", carapace}, {"the Carapace home", home}} {
		if !filepath.IsAbs(p.path) {
			return nil, fmt.Errorf("systemd unit: %s must be an absolute path, not %q", p.what, p.path)
		}
		if strings.ContainsFunc(p.path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, errors.New("systemd unit: " + p.what + " has a control character in its path")
		}
		if !utf8.ValidString(p.path) {
			return nil, fmt.Errorf("systemd unit: %s's path %q is not UTF-8, and systemd ignores such a line", p.what, p.path)
		}
	}
	if strings.ContainsAny(carapace, execRefused) {
		return nil, fmt.Errorf("systemd unit: systemd does not run an executable whose path has a quote or a backslash in it (%q): "+
			"put carapace where its path has none, e.g. ~/.local/bin/carapace, and run carapace service install from there", carapace)
	}
	r := strings.NewReplacer("__CARAPACE__", quoteExec(filepath.Clean(carapace)), "__HOME__", quoteArg(filepath.Clean(home)))
	return []byte(r.Replace(string(ServeUnit))), nil
}

// execRefused are the characters systemd refuses in the path of the
// command it runs ("Executable name contains special characters";
// systemd-analyze verify shows it).
const execRefused = `"'\`

// quoteExec is the path of the command in ExecStart: double-quoted, with
// % doubled (a specifier otherwise). systemd does not expand variables in
// the command, so $ stays as it is ($$ would be two dollars there).
func quoteExec(s string) string {
	return `"` + strings.ReplaceAll(s, "%", "%%") + `"`
}

// quoteArg is s as one ExecStart argument: double-quoted, with \ and "
// escaped (C-style), % doubled (a specifier otherwise) and $ doubled (a
// variable otherwise: systemd expands $NAME and ${NAME} in arguments, in
// quotes too, and $$ is a literal $).
func quoteArg(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%", "$", "$$").Replace(s)
	return `"` + s + `"`
}
