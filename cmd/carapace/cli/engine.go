package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/applecontainer"
	"github.com/carapace-dev/carapace/core/runtime"
)

// engineCheckTimeout bounds one engine's check (Apple container's takes
// two CLI calls).
const engineCheckTimeout = 20 * time.Second

// readyEngine is the engine runtime.engine resolves to, checked.
type readyEngine struct {
	name string // "docker", "podman", "apple"
	info runtime.Info
}

// bin is the engine's CLI, for the image commands.
func (e readyEngine) bin() string {
	if e.info.Bin != "" {
		return e.info.Bin
	}
	if e.name == "apple" {
		return "container"
	}
	return e.name
}

// findEngine resolves setting (config.toml's runtime.engine) as the core
// does (runtime.Candidates) and checks each candidate in turn. With none
// ready, the error says why for each, and fix is the command that fixes
// the first.
func (a *app) findEngine(ctx context.Context, setting string) (e readyEngine, fix string, err error) {
	newEngine := a.cfg.NewEngine
	if newEngine == nil {
		newEngine = noEngines
	}
	var errs []error
	for _, name := range runtime.Candidates(setting) {
		eng, err := newEngine(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, engineCheckTimeout)
		info, err := eng.Check(cctx)
		cancel()
		if err == nil {
			return readyEngine{name: name, info: info}, "", nil
		}
		if fix == "" {
			fix = engineFix(name, err)
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return readyEngine{}, "carapace config set runtime.engine auto", errors.New(`runtime.engine is "none": agents would run without isolation (plugin development only)`)
	}
	return readyEngine{}, fix, errors.Join(errs...)
}

// noEngines stands for Config.NewEngine in a build given no engines.
func noEngines(name string) (runtime.Engine, error) {
	return nil, fmt.Errorf("this carapace was built without container engines, %s among them (cli.Config.NewEngine is nil): build it with make build", name)
}

// backticked finds the commands an error quotes in backticks.
var backticked = regexp.MustCompile("`([^`]+)`")

// engineFix is the command that fixes an engine's check error err.
func engineFix(name string, err error) string {
	msg := err.Error()
	if name == "apple" {
		var cmds []string
		for _, m := range backticked.FindAllStringSubmatch(msg, -1) {
			cmds = append(cmds, m[1])
		}
		if strings.Contains(msg, "not installed") || strings.Contains(msg, "older than") || strings.Contains(msg, "too old") {
			return "install Apple container " + applecontainer.MinVersion + " or later from " + applecontainer.ReleasesURL + ", then container system start"
		}
		if len(cmds) > 0 {
			return strings.Join(cmds, " && ")
		}
		return "container system start"
	}
	switch {
	case strings.Contains(msg, "too old"):
		return "upgrade " + name + ": https://docs.docker.com/engine/install/"
	case strings.Contains(msg, "not installed"):
		if goruntime.GOOS == "darwin" {
			return "install Apple container (" + applecontainer.ReleasesURL + ") or Docker Desktop"
		}
		if name == "podman" {
			return "sudo apt-get install podman"
		}
		return "sudo apt-get install docker.io (or see https://docs.docker.com/engine/install/)"
	case strings.Contains(msg, "refused this user"):
		return "sudo usermod -aG docker $USER, then log in again"
	case strings.Contains(msg, "not running") || strings.Contains(msg, "is the engine running"):
		if goruntime.GOOS == "darwin" {
			if name == "podman" {
				return "podman machine start"
			}
			return "open -a Docker"
		}
		if name == "podman" {
			return "systemctl --user start podman.socket"
		}
		return "sudo systemctl start docker"
	}
	return "carapace doctor (again, once " + name + " answers `" + name + " version`)"
}

// imageFix is what to do about a missing agent image.
const imageFix = "carapace setup --build-image (it needs a registry and npm), or carapace setup --image IMAGE"

// defaultImage is the agent image config.toml's runtime.image stands for.
func (a *app) defaultImage(configured string) string {
	return cmp.Or(configured, runtime.Image(a.cfg.Version))
}

// staticIPC finds the static linux ipc and ipc-relay binaries for arch
// that an agent image is built with. ipc is given, or where make build
// puts it beside this binary (bin/linux-<arch>/ipc), or in Carapace.app,
// Contents/Resources when this binary is Contents/MacOS/carapace (make
// app-bundle); ipc-relay, the model API relay, is always beside it, as
// both make targets put it.
func staticIPC(given, arch string) (ipc, relay string, err error) {
	ipc = given
	if ipc == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", "", fmt.Errorf("find the carapace binary: %w", err)
		}
		if exe, err = filepath.EvalSymlinks(exe); err != nil {
			return "", "", fmt.Errorf("find the carapace binary: %w", err)
		}
		dir := filepath.Dir(exe)
		if filepath.Base(dir) == "MacOS" {
			dir = filepath.Join(filepath.Dir(dir), "Resources")
		}
		ipc = filepath.Join(dir, "linux-"+arch, "ipc")
		if _, err := os.Stat(ipc); err != nil {
			return "", "", fmt.Errorf("the image needs the static linux/%s ipc binary, and %s is not there: build it with make build, or give one with --ipc PATH", arch, ipc)
		}
	}
	relay = filepath.Join(filepath.Dir(ipc), "ipc-relay")
	if _, err := os.Stat(relay); err != nil {
		return "", "", fmt.Errorf("the image needs the static linux/%s ipc-relay binary (the model API relay) beside ipc, and %s is not there: build it with make build (bin/linux-%s/ipc-relay), or put one beside the --ipc binary", arch, relay, arch)
	}
	return ipc, relay, nil
}
