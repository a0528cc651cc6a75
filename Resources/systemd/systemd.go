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
)

// Unit is the unit's file name.
const Unit = "carapace.service"

// ServeUnit is the unit with the placeholders __CARAPACE__ (the carapace
// binary) and __HOME__ (Carapace's home).
//
//go:embed carapace.service
var ServeUnit []byte

// Render returns ServeUnit for the carapace binary at carapace and the
// Carapace home home, both absolute. Each is quoted for ExecStart, with
// systemd's specifiers (%) and escapes (\, ") escaped.
func Render(carapace, home string) ([]byte, error) {
	for _, p := range []struct{ what, path string }{{"the carapace binary", carapace}, {"the Carapace home", home}} {
		if !filepath.IsAbs(p.path) {
			return nil, fmt.Errorf("systemd unit: %s must be an absolute path, not %q", p.what, p.path)
		}
		if strings.ContainsFunc(p.path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, errors.New("systemd unit: " + p.what + " has a control character in its path")
		}
	}
	r := strings.NewReplacer("__CARAPACE__", quote(filepath.Clean(carapace)), "__HOME__", quote(filepath.Clean(home)))
	return []byte(r.Replace(string(ServeUnit))), nil
}

// quote is s as one ExecStart argument: double-quoted, with \ and "
// escaped (C-style) and % doubled (a specifier otherwise).
func quote(s string) string {
	s = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%").Replace(s)
	return `"` + s + `"`
}
