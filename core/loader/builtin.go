// Package loader owns the plugins' lifecycle in the core: how each plugin
// the inventory finds (core/plugindir: which plugins exist, and the state
// of their folders) is started, initialised, supervised, restarted and
// stopped, the core services it may call, and the events it is given.
package loader

import (
	"io/fs"
	"log/slog"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/plugindir"
)

// Builtin is a plugin compiled into the core, run in process behind the
// same Handler interface as an external plugin. The list of them is
// chosen by the program that assembles the core (cmd/wiring), so
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

// Bundled is a first-party plugin shipped with the build that runs out of
// process (it faces the network, or holds a credential the core should not
// hold in its own memory): a plugin folder — manifest.json, skills/, a
// handler executable — beside the carapace binary, and the handler's
// SHA-256, fixed when the core was built. It is loaded only when
// config.toml has a [plugins.NAME] section; no install step. A user plugin
// of the same name replaces it. The inventory of plugins (core/plugindir)
// owns the type.
type Bundled = plugindir.Bundled
