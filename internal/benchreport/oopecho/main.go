// Command oopecho is the built-in echo plugin's handler run out of process,
// for the benchmarks that compare an out-of-process call with an
// in-process one: every tool named <prefix>_echo is served as echo.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/echo"
)

type handler struct{ echo.Handler }

func (h *handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	if strings.HasSuffix(req.Tool, "_echo") {
		r := *req
		r.Tool = "echo"
		return h.Handler.Invoke(ctx, &r)
	}
	return nil, plugin.NewToolError("Unknown tool: "+req.Tool, false)
}

func main() {
	if err := plugin.Serve(&handler{}); err != nil {
		fmt.Fprintln(os.Stderr, "oopecho:", err)
		os.Exit(1)
	}
}
