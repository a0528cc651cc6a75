// Package wiring chooses what the core is assembled from: the built-in
// plugins and the container engines. The core (core/...) knows neither; it
// is given them, so that it builds without cgo and the sqlite_fts5 tag
// (the memory plugin's SQLite needs both) and so that tests can give it
// others. `carapace serve`, the in-process test harness and the benchmarks
// all start the core through Options.
package wiring

import (
	"fmt"
	"log/slog"

	"github.com/carapace-dev/carapace/applecontainer"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/runtime/docker"
	"github.com/carapace-dev/carapace/core/server"
	"github.com/carapace-dev/carapace/plugins"
)

// Options are the server options of a real core: the built-in plugins and
// the container engines, with the rest left to the caller.
func Options(h home.Dir, logger *slog.Logger, version string) server.Options {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return server.Options{Home: h, Logger: logger, Version: version, Builtins: plugins.Builtins(), NewEngine: Engines(logger)}
}

// Engines returns the container engines by the names config.toml uses:
// "docker" and "podman" (core/runtime/docker) and "apple"
// (applecontainer).
func Engines(logger *slog.Logger) func(name string) (runtime.Engine, error) {
	return func(name string) (runtime.Engine, error) {
		log := logger.With("engine", name)
		switch name {
		case "docker", "podman":
			return docker.New(docker.Options{Bin: name, Logger: log}), nil
		case "apple":
			return applecontainer.New(applecontainer.Options{Logger: log}), nil
		}
		return nil, fmt.Errorf("no container engine %q", name)
	}
}
