// Package plugins lists the built-in plugins: compiled into the core, run in
// process behind the same Handler interface as external plugins.
package plugins

import (
	"io/fs"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/echo"
)

// Builtin is a plugin compiled into the core.
type Builtin struct {
	Name     string
	Manifest []byte
	Skills   fs.FS
	New      func() plugin.Handler
}

// Builtins returns the built-in plugins.
func Builtins() []Builtin {
	return []Builtin{
		{Name: echo.Name, Manifest: echo.Manifest(), Skills: echo.Skills(), New: func() plugin.Handler { return &echo.Handler{} }},
	}
}
