// Package plugins lists the built-in plugins: compiled into the core, run in
// process behind the same Handler interface as external plugins. The
// program that assembles the core (cmd/wiring) passes the list on.
package plugins

import (
	"github.com/carapace-dev/carapace/core/loader"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/echo"
	"github.com/carapace-dev/carapace/plugins/memory"
)

// Builtins returns the built-in plugins.
func Builtins() []loader.Builtin {
	return []loader.Builtin{
		{Name: echo.Name, Manifest: echo.Manifest(), Skills: echo.Skills(), New: func(loader.Env) plugin.Handler { return &echo.Handler{} }},
		{Name: memory.Name, Manifest: memory.Manifest(), Skills: memory.Skills(), New: func(e loader.Env) plugin.Handler { return memory.New(e.DataDir, e.Logger) }},
	}
}
