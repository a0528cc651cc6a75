package main

import (
	"os"
	"testing"

	"github.com/carapace-dev/carapace/internal/plist"
)

// TestInfoPlist checks the bundle's Info.plist (make app-bundle copies it
// into Carapace.app): the icon it names is the iconset drawn here, and
// the keys the menu-bar app depends on are set — LSUIElement (no Dock
// icon), the bundle identifier (without one notifications crash the
// process), the executable make builds, macOS 13 (SMAppService).
func TestInfoPlist(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../Info.plist")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plist.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"CFBundleIconFile":             "Carapace", // Carapace.icns, from Carapace.iconset
		"CFBundleIdentifier":           "dev.carapace.app",
		"CFBundleExecutable":           "carapace-app",
		"CFBundleName":                 "Carapace",
		"CFBundlePackageType":          "APPL",
		"LSUIElement":                  true,
		"LSMinimumSystemVersion":       "13.0",
		"NSUserNotificationAlertStyle": "alert",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s = %v, want %v", k, p[k], v)
		}
	}
	// make app-bundle replaces these; they must exist to be replaced.
	for _, k := range []string{"CFBundleShortVersionString", "CFBundleVersion", "CarapaceVersion"} {
		if _, ok := p[k].(string); !ok {
			t.Errorf("%s is missing", k)
		}
	}
	found := false
	for _, im := range Images() {
		found = found || im.Path == "Carapace.iconset/icon_512x512@2x.png"
	}
	if !found {
		t.Error("the iconset has no 1024-pixel image")
	}
}
