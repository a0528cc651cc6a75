// Command flaky is the loader's test handler for crashes and hangs
// (revive_test.go). It records each start in its data folder's "starts"
// file; marker files in that folder make every start die: "die-in-init"
// during Init, "die-after-init" right after it. Its tools: echo answers
// with its pid, crash exits, hang never replies (it ignores the cancel),
// slow replies once its call is cancelled (a late reply). hang leaves a
// "hanging" file in the data folder first.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/carapace-dev/carapace/core/plugin"
)

type handler struct{ data string }

func main() {
	data := os.Getenv("CARAPACE_PLUGIN_DATA")
	if f, err := os.OpenFile(filepath.Join(data, "starts"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
		fmt.Fprintln(f, os.Getpid())
		f.Close()
	}
	if err := plugin.Serve(&handler{data: data}); err != nil {
		fmt.Fprintln(os.Stderr, "flaky:", err)
		os.Exit(1)
	}
}

func (h *handler) marked(name string) bool {
	_, err := os.Stat(filepath.Join(h.data, name))
	return err == nil
}

func (h *handler) Init(context.Context, map[string]any, plugin.Services) error {
	if h.marked("die-in-init") {
		os.Exit(3)
	}
	if h.marked("die-after-init") {
		go func() {
			time.Sleep(20 * time.Millisecond) // after the Init reply has gone
			os.Exit(4)
		}()
	}
	return nil
}

func (h *handler) Shutdown(context.Context) error { return nil }

func (h *handler) Invoke(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	switch req.Tool {
	case "flaky_echo":
		return map[string]any{"pid": os.Getpid()}, nil
	case "flaky_crash":
		os.Exit(3)
	case "flaky_hang":
		_ = os.WriteFile(filepath.Join(h.data, "hanging"), nil, 0o600) // the test knows the call is here
		select {}
	case "flaky_slow":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, errors.New("no such tool")
}
