// Command handler is the calendar plugin's executable: the core starts it,
// confined, with its socket and egress point, and it serves the calendar
// and reminder tools (package calendar) until the core stops it.
package main

import (
	"fmt"
	"log/slog"
	"os"

	// The zone database inside the binary: the confined handler may not
	// read /usr/share/zoneinfo, and the user's zone and every event's
	// TZID are read with it.
	_ "time/tzdata"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/calendar"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The CalDAV server through the plugin's egress point in the core, its
	// only way to the network: the host of caldav_url and nothing else.
	h := calendar.New(calendar.Options{HTTP: plugin.HTTPClient(), EventKit: eventKit, Logger: log})
	if err := plugin.Serve(h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
