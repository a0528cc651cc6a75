// Package wiring is the composition: it chooses what the core is
// assembled from — the built-in plugins, the bundled out-of-process ones
// and the container engines. The core (core/...) knows none of them; it is
// given them, so that it builds without cgo and the sqlite_fts5 tag (the
// memory plugin's SQLite needs both) and so that tests can give it others.
// `carapace serve`, the in-process test harness (coretest) and the
// benchmarks (cmd/benchreport) all start the core through Options, and
// the command line (doctor, setup) is handed Engines by its main: it is a
// client of the core and links none of it.
//
// It is a library of the mains under cmd/, not part of one; nothing
// outside cmd/ links it but tests (internal/layers pins that).
package wiring

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/mattn/go-sqlite3" // the SQLite driver of the scheduler's database (core/tasks), linked here: the core's packages build without cgo

	"github.com/carapace-dev/carapace/applecontainer"
	"github.com/carapace-dev/carapace/core/home"
	"github.com/carapace-dev/carapace/core/loader"
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
	return server.Options{Home: h, Logger: logger, Version: version, Builtins: plugins.Builtins(), Bundled: Bundled(logger), NewEngine: Engines(logger)}
}

// bundledPins names the first-party out-of-process plugins this build
// ships, each with its handler's SHA-256, as "name=hex[,name=hex...]". The
// Makefile sets it when it links carapace (-X), after building the
// handlers into bin/plugins/<name>/: the pin lives in the core's own
// binary, not in a file beside the handler.
var bundledPins string

// Bundled returns the bundled plugins of this build: bin/plugins/<name>
// beside the carapace executable (in a macOS bundle, Contents/Resources/
// plugins/<name>), pinned to the hashes linked in at build time. A build
// without pins (go run, go test) has none.
func Bundled(logger *slog.Logger) []loader.Bundled {
	if bundledPins == "" {
		return nil
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		logger.Warn("cannot find the carapace executable: no bundled plugins", "err", err)
		return nil
	}
	dir := filepath.Join(filepath.Dir(exe), "plugins")
	if res := filepath.Join(filepath.Dir(exe), "..", "Resources", "plugins"); filepath.Base(filepath.Dir(exe)) == "MacOS" {
		dir = filepath.Clean(res)
	}
	var out []loader.Bundled
	for _, pin := range strings.Split(bundledPins, ",") {
		name, sum, ok := strings.Cut(pin, "=")
		if !ok || name == "" || len(sum) != 64 {
			logger.Error("a bundled plugin pin of this build is malformed; rebuild with make build", "pin", pin)
			continue
		}
		out = append(out, loader.Bundled{Name: name, Dir: filepath.Join(dir, name), SHA256: sum})
	}
	return out
}

// Engines returns a constructor of the container engines by the names
// config.toml uses: "docker" and "podman" (core/runtime/docker) and
// "apple" (applecontainer). This is the one place the engines are named;
// runtime.Candidates resolves "auto" to these names. The engines it
// returns are unchecked.
func Engines(logger *slog.Logger) func(name string) (runtime.Engine, error) {
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
