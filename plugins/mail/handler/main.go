// Command handler is the mail plugin's executable: the core starts it,
// confined, with its socket, egress point and data folder, and it serves
// the mail tools and the inbox watch (package mail) until the core stops
// it. Build it with CGO_ENABLED=1 (it keeps its state in SQLite).
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/mail"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// IMAP and SMTP through the plugin's egress point in the core, its
	// only way to the network: it reaches the servers its accounts name.
	h := mail.New(mail.Options{Dial: plugin.Dial, DataDir: os.Getenv("CARAPACE_PLUGIN_DATA"), Logger: log})
	if err := plugin.Serve(h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
