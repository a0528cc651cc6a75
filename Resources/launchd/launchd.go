// Package launchd holds the LaunchAgent that runs the Carapace core
// (`carapace serve`) in the background on a Mac without the menu-bar
// app, and fills in its paths. docs/APP.md says how to install it.
package launchd

import (
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Label is the LaunchAgent's label, and its file is Label + ".plist".
const Label = "dev.carapace.serve"

// ServePlist is the LaunchAgent with the placeholders __CARAPACE__ (the
// carapace binary) and __HOME__ (the user's home directory).
//
//go:embed dev.carapace.serve.plist
var ServePlist []byte

// Render returns ServePlist for the carapace binary at carapace and the
// home directory home, both absolute (launchd expands neither ~ nor
// variables). The paths are XML-escaped.
func Render(carapace, home string) ([]byte, error) {
	for _, p := range []struct{ what, path string }{{"the carapace binary", carapace}, {"the home directory", home}} {
		if !filepath.IsAbs(p.path) {
			return nil, fmt.Errorf("LaunchAgent: %s must be an absolute path, not %q", p.what, p.path)
		}
		if strings.ContainsAny(p.path, "\x00\n\r") {
			return nil, errors.New("LaunchAgent: " + p.what + " has a control character in its path")
		}
	}
	r := strings.NewReplacer("__CARAPACE__", escape(filepath.Clean(carapace)), "__HOME__", escape(filepath.Clean(home)))
	return []byte(r.Replace(string(ServePlist))), nil
}

// escape escapes s for XML character data.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
