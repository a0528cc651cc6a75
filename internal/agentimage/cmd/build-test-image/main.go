// Command build-test-image builds Carapace's offline agent test image
// (Resources/agent/test) with Docker or Podman, without a registry:
//
//	go run ./internal/agentimage/cmd/build-test-image [-engine docker] [-tag carapace-agent-test:dev]
//	    [-ipc bin/linux-<arch>/ipc] [-busybox /bin/busybox] [-version dev]
//
// Run it from the repository's root after `make build`, which puts the
// static linux ipc binaries in bin/linux-amd64 and bin/linux-arm64.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/carapace-dev/carapace/internal/agentimage"
)

func main() {
	var o agentimage.Options
	flag.StringVar(&o.Engine, "engine", "docker", "the engine's CLI: docker or podman")
	flag.StringVar(&o.Tag, "tag", agentimage.TestTag, "the image's tag")
	flag.StringVar(&o.IPC, "ipc", "", "the static linux ipc binary (default bin/linux-<engine arch>/ipc)")
	flag.StringVar(&o.Busybox, "busybox", agentimage.DefaultBusybox, "a static busybox (apt-get install busybox-static)")
	flag.StringVar(&o.Version, "version", "dev", "the Carapace version to label the image with")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "build-test-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o agentimage.Options) error {
	arch, err := agentimage.EngineArch(ctx, o.Engine)
	if err != nil {
		return err
	}
	if o.IPC == "" {
		o.IPC = filepath.Join("bin", "linux-"+arch, "ipc")
	}
	start := time.Now()
	if err := agentimage.BuildTest(ctx, o); err != nil {
		return err
	}
	fmt.Printf("built %s (%s, linux/%s) in %.2fs\n", o.Tag, filepath.Base(o.Engine), arch, time.Since(start).Seconds())
	return nil
}
