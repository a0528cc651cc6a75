// Command handler is the Telegram plugin's executable: the core starts it
// with its socket, token and data folder in the environment, and it serves
// the telegram plugin (package telegram) until the core stops it. Build it
// with CGO_ENABLED=1 (it keeps its state in SQLite).
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/telegram"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The Bot API through the plugin's egress point in the core, its only
	// way to the network (it reaches the one host its api_url names).
	h := telegram.New(telegram.Options{DataDir: os.Getenv("CARAPACE_PLUGIN_DATA"), Logger: log, Transport: plugin.HTTPClient().Transport})
	if err := plugin.Serve(h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
