// Command oopecho is the built-in echo plugin's handler run out of process,
// for the benchmarks that compare an out-of-process call with an
// in-process one: every tool named <prefix>_echo is served as echo.
//
// With -floor ENDPOINT it is instead a bare zmq4 ROUTER that sends every
// message back: the cross-process transport floor of the benchmarks.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/go-zeromq/zmq4"

	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/plugins/echo"
)

// handler serves every tool named <prefix>_echo as the echo tool.
type handler struct{ echo.Handler }

var _ plugin.Handler = (*handler)(nil)

// Invoke answers a <prefix>_echo call as echo, and refuses any other tool.
func (h *handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	if strings.HasSuffix(req.Tool, "_echo") {
		r := *req
		r.Tool = "echo"
		return h.Handler.Invoke(ctx, &r)
	}
	return nil, plugin.NewToolError("Unknown tool: "+req.Tool, false)
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-floor" {
		floor(os.Args[2])
		return
	}
	if err := plugin.Serve(&handler{}); err != nil {
		fmt.Fprintln(os.Stderr, "oopecho:", err)
		os.Exit(1)
	}
}

// floor echoes every message on a ROUTER at endpoint until killed.
func floor(endpoint string) {
	r := zmq4.NewRouter(context.Background())
	if err := r.Listen(endpoint); err != nil {
		fmt.Fprintln(os.Stderr, "oopecho:", err)
		os.Exit(1)
	}
	for {
		m, err := r.Recv()
		if err != nil {
			os.Exit(1)
		}
		if err := r.Send(m); err != nil {
			os.Exit(1)
		}
	}
}
