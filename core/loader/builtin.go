// Package loader owns the plugins' lifecycle in the core: which plugins
// exist, how each is started, initialised, supervised, restarted and
// stopped, the core services it may call, and the events it is given.
package loader

import (
	"io/fs"
	"log/slog"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Builtin is a plugin compiled into the core, run in process behind the
// same Handler interface as an external plugin. The list of them is
// chosen by the program that assembles the core (cmd/carapace/wiring), so
// that the core itself builds without any plugin's dependencies.
type Builtin struct {
	Name     string
	Manifest []byte
	Skills   fs.FS
	New      func(Env) plugin.Handler
}

// Env is what the core gives a built-in plugin when it creates it: what an
// external plugin learns from its environment and its stderr.
type Env struct {
	// DataDir is the plugin's own folder, $CARAPACE_HOME/data/<plugin>,
	// created 0700 before New is called.
	DataDir string
	// Logger logs as the plugin (the core adds the plugin's name).
	Logger *slog.Logger
}
