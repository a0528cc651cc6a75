package calendar

import (
	"os"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/internal/plist"
)

// TestInfoPlistUsageDescriptions: the app bundle's Info.plist says why it
// asks for the calendars and reminders — without these keys macOS denies
// EventKit access silently, without asking the user (the FullAccess keys
// from macOS 14, the others before).
func TestInfoPlistUsageDescriptions(t *testing.T) {
	data, err := os.ReadFile("../../Info.plist")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plist.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"NSCalendarsFullAccessUsageDescription", "NSCalendarsUsageDescription", "NSRemindersFullAccessUsageDescription", "NSRemindersUsageDescription"} {
		if s, _ := p[k].(string); !strings.Contains(s, "Carapace") {
			t.Errorf("%s = %v: want a sentence naming Carapace", k, p[k])
		}
	}
	if p["CFBundleIdentifier"] != "dev.carapace.app" { // control: the file was decoded
		t.Errorf("CFBundleIdentifier = %v", p["CFBundleIdentifier"])
	}
}
