// Package echo is the built-in echo plugin: a low-risk echo tool and a
// high-risk echo_confirm tool, so that demos and tests can exercise the
// whole pipeline, the confirmation path included, without any credential.
package echo

import (
	"context"
	"embed"
	"io/fs"
	"strings"

	"github.com/carapace-dev/carapace/core/plugin"
)

// Name is the plugin's name.
const Name = "echo"

//go:embed manifest.json
var manifest []byte

//go:embed skills
var skills embed.FS

// Manifest returns the plugin's manifest.json.
func Manifest() []byte { return manifest }

// Skills returns the plugin's skills directory.
func Skills() fs.FS {
	sub, _ := fs.Sub(skills, "skills")
	return sub
}

// Handler implements the echo tools.
type Handler struct{}

var _ plugin.Handler = (*Handler)(nil)

// Init implements plugin.Handler.
func (*Handler) Init(context.Context, map[string]any, plugin.Services) error { return nil }

// Shutdown implements plugin.Handler.
func (*Handler) Shutdown(context.Context) error { return nil }

// Invoke implements plugin.Handler.
func (*Handler) Invoke(_ context.Context, req *plugin.Request) (map[string]any, error) {
	msg, _ := req.Arguments["message"].(string)
	switch req.Tool {
	case "echo":
		if up, _ := req.Arguments["uppercase"].(bool); up {
			msg = strings.ToUpper(msg)
		}
		return map[string]any{"message": msg}, nil
	case "echo_confirm":
		return map[string]any{"message": msg, "confirmed": true}, nil
	}
	return nil, plugin.NewToolError("echo does not provide "+req.Tool, false)
}
