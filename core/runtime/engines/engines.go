// Package engines names the container engines config.toml chooses from
// ("docker", "podman", "apple") and builds them, for `carapace serve`
// (through cmd/carapace/wiring: the core itself is given its engines and
// links none), `carapace doctor` and `carapace setup`.
package engines

import (
	"fmt"
	"log/slog"

	"github.com/carapace-dev/carapace/applecontainer"
	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/core/runtime/docker"
)

// New returns a constructor of the engines by the names config.toml uses:
// "docker" and "podman" (core/runtime/docker) and "apple"
// (applecontainer). The engines it returns are unchecked.
func New(logger *slog.Logger) func(name string) (runtime.Engine, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return func(name string) (runtime.Engine, error) {
		log := logger.With("engine", name)
		switch name {
		case "docker", "podman":
			return docker.New(docker.Options{Bin: name, Logger: log}), nil
		case "apple":
			return applecontainer.New(applecontainer.Options{Logger: log}), nil
		}
		return nil, fmt.Errorf("no container engine %q (use docker, podman or apple)", name)
	}
}
