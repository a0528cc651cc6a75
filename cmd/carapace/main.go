// Command carapace runs the Carapace core (carapace serve) and manages a
// running one; the commands live in package cli.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/carapace-dev/carapace/cmd/carapace/cli"
	"github.com/carapace-dev/carapace/cmd/wiring"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/server"
)

// version is set at build time: -ldflags "-X main.version=1.2.3".
var version = "dev"

func main() {
	root := cli.New(cli.Config{
		Version: version,
		Serve: func(ctx context.Context, home home.Dir, logger *slog.Logger) error {
			return server.Run(ctx, wiring.Options(home, logger, version))
		},
		NewEngine: wiring.Engines(nil),
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
	})
	os.Exit(cli.Execute(context.Background(), root))
}
