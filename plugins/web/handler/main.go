// Command handler is the web plugin's executable: the core starts it,
// confined, with its socket and egress point, and it serves web_fetch and
// web_search (package web) until the core stops it.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/web"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The web through the plugin's egress point in the core, its only way
	// to the network: any public address, and the special ones the user
	// allowed (allow_addresses, searxng_url).
	h := web.New(web.Options{Dial: plugin.Dial, Logger: log})
	if err := plugin.Serve(h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
