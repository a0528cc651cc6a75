// Package plugins lists the built-in plugins: compiled into the core, run in
// process behind the same Handler interface as external plugins.
package plugins

import (
	"io/fs"
	"log/slog"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/echo"
	"github.com/carapace-dev/carapace/plugins/memory"
)

// Builtin is a plugin compiled into the core.
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

// Builtins returns the built-in plugins.
func Builtins() []Builtin {
	return []Builtin{
		{Name: echo.Name, Manifest: echo.Manifest(), Skills: echo.Skills(), New: func(Env) plugin.Handler { return &echo.Handler{} }},
		{Name: memory.Name, Manifest: memory.Manifest(), Skills: memory.Skills(), New: func(e Env) plugin.Handler { return memory.New(e.DataDir, e.Logger) }},
	}
}
