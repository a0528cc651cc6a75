// Command build-image builds Carapace's agent images with Docker or
// Podman: the offline test image (Resources/agent/test, no registry
// needed) or, with -agent, the real agent image (Resources/agent, which
// needs a registry and npm):
//
//	go run ./cmd/build-image [-agent] [-engine docker] [-tag TAG]
//	    [-ipc bin/linux-<arch>/ipc] [-relay bin/linux-<arch>/ipc-relay]
//	    [-busybox /bin/busybox] [-version dev]
//
// Run it from the repository's root after `make build`, which puts the
// static linux ipc and ipc-relay binaries in bin/linux-amd64 and
// bin/linux-arm64.
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

	"github.com/carapace-dev/carapace/core/agentimage"
	"github.com/carapace-dev/carapace/core/agentimage/agentimagetest"
	"github.com/carapace-dev/carapace/core/runtime"
)

func main() {
	var o agentimage.Options
	agent := flag.Bool("agent", false, "build the real agent image (Claude Code; needs a registry and npm) instead of the test image")
	flag.StringVar(&o.Engine, "engine", "docker", "the engine's CLI: docker or podman")
	flag.StringVar(&o.Tag, "tag", "", "the image's tag (default "+agentimagetest.TestTag+", or carapace-agent:VERSION with -agent)")
	flag.StringVar(&o.IPC, "ipc", "", "the static linux ipc binary (default bin/linux-<engine arch>/ipc)")
	flag.StringVar(&o.Relay, "relay", "", "the static linux ipc-relay binary, the model API relay (default ipc-relay beside -ipc)")
	flag.StringVar(&o.Busybox, "busybox", agentimagetest.DefaultBusybox, "a static busybox, for the test image (apt-get install busybox-static)")
	flag.StringVar(&o.Version, "version", "dev", "the Carapace version to label the image with")
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, *agent); err != nil {
		fmt.Fprintln(os.Stderr, "build-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o agentimage.Options, agent bool) error {
	arch, err := agentimage.EngineArch(ctx, o.Engine)
	if err != nil {
		return err
	}
	if o.IPC == "" {
		o.IPC = filepath.Join("bin", "linux-"+arch, "ipc")
	}
	start := time.Now()
	build := agentimagetest.BuildTest
	if agent {
		o.Progress = os.Stdout
		build = agentimage.BuildAgent
		if o.Tag == "" {
			o.Tag = runtime.Image(o.Version)
		}
	} else if o.Tag == "" {
		o.Tag = agentimagetest.TestTag
	}
	if err := build(ctx, o); err != nil {
		return err
	}
	fmt.Printf("built %s (%s, linux/%s) in %.2fs\n", o.Tag, filepath.Base(o.Engine), arch, time.Since(start).Seconds())
	return nil
}
