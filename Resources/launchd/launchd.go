// Package launchd holds the LaunchAgent that runs the Carapace core
// (`carapace serve`) in the background on a Mac without the menu-bar
// app, and fills in its paths. docs/APP.md says how to install it.
package launchd

import (
	_ "embed"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
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
// variables nor anything else: a path reaches the process as it is). The
// paths are XML-escaped; a path with a character XML cannot carry (a
// control character, U+FFFE, U+FFFF) or that is not UTF-8 is an error.
func Render(carapace, home string) ([]byte, error) {
	for _, p := range []struct{ what, path string }{{"the carapace binary", carapace}, {"the home directory", home}} {
		if !filepath.IsAbs(p.path) {
			return nil, fmt.Errorf("LaunchAgent: %s must be an absolute path, not %q", p.what, p.path)
		}
		if !utf8.ValidString(p.path) {
			return nil, fmt.Errorf("LaunchAgent: %s's path %q is not UTF-8, which a plist cannot hold", p.what, p.path)
		}
		if strings.ContainsFunc(p.path, notXMLChar) {
			return nil, fmt.Errorf("LaunchAgent: %s has a control character in its path %q, which a plist cannot hold", p.what, p.path)
		}
	}
	r := strings.NewReplacer("__CARAPACE__", escape(filepath.Clean(carapace)), "__HOME__", escape(filepath.Clean(home)))
	return []byte(r.Replace(string(ServePlist))), nil
}

// notXMLChar reports whether r cannot appear in a path in the plist: XML
// 1.0's Char production without the tab and line ends, which a path has
// no business holding either.
func notXMLChar(r rune) bool {
	return r < 0x20 || r == 0x7f || r >= 0xd800 && r <= 0xdfff || r == 0xfffe || r == 0xffff
}

// escape escapes s for XML character data.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
