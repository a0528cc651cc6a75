// Package agentimage builds Carapace's agent images without a registry.
//
// BuildTest builds the offline test image (Resources/agent/test): FROM
// scratch, so that nothing is pulled, with a static busybox and the static
// linux ipc binary copied in. It assembles a build context in a temporary
// folder, checks that both binaries are static ELF executables of the
// engine's architecture (a dynamically linked one would fail only inside
// the container, with a confusing "not found"), and runs `docker build`
// with the legacy builder (DOCKER_BUILDKIT=0): BuildKit may want to pull
// its frontend image, and there may be no registry to pull it from.
// `podman build` (buildah) needs no such switch.
package agentimage

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	agenttest "github.com/carapace-dev/carapace/Resources/agent/test"
	"github.com/carapace-dev/carapace/core/claudemd"
)

// TestTag is the tag of the test image that `make image-test` builds.
const TestTag = "carapace-agent-test:dev"

// DefaultBusybox is where Debian's busybox-static installs busybox.
const DefaultBusybox = "/bin/busybox"

// Options configure BuildTest.
type Options struct {
	// Engine is the CLI: "docker" (the default), "podman", or a path to
	// either.
	Engine string
	// Tag names the image; empty means TestTag.
	Tag string
	// IPC is the static linux ipc binary of the engine's architecture
	// (make build puts it in bin/linux-<arch>/ipc). Required.
	IPC string
	// Busybox is a static busybox; empty means DefaultBusybox.
	Busybox string
	// Version is the Carapace version the image is labelled with
	// (carapace.version, org.opencontainers.image.version); empty means
	// "dev".
	Version string
}

// ErrNotStatic: a binary to copy into the image is not a static ELF
// executable of the engine's architecture.
var ErrNotStatic = errors.New("not a static linux executable of the engine's architecture")

// BuildTest builds the offline test image with the engine's CLI.
func BuildTest(ctx context.Context, o Options) error {
	if o.Engine == "" {
		o.Engine = "docker"
	}
	if o.Tag == "" {
		o.Tag = TestTag
	}
	if o.Busybox == "" {
		o.Busybox = DefaultBusybox
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.IPC == "" {
		return errors.New("build test image: no ipc binary given (build one with `make build`: bin/linux-<arch>/ipc)")
	}
	if strings.ContainsAny(o.Version, " \t\n\"'\\$") || strings.HasPrefix(o.Tag, "-") || strings.ContainsAny(o.Tag, " \t\n") {
		return fmt.Errorf("build test image: bad version %q or tag %q", o.Version, o.Tag)
	}
	arch, err := EngineArch(ctx, o.Engine)
	if err != nil {
		return fmt.Errorf("build test image: %w", err)
	}
	if err := CheckStatic(o.Busybox, arch); err != nil {
		return fmt.Errorf("build test image: busybox: %w (install Debian's static build: apt-get install busybox-static)", err)
	}
	if err := CheckStatic(o.IPC, arch); err != nil {
		return fmt.Errorf("build test image: ipc: %w (build it with CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o bin/linux-%s/ipc ./cmd/ipc, or make build)", err, arch, arch)
	}

	dir, err := os.MkdirTemp("", "carapace-image-")
	if err != nil {
		return fmt.Errorf("build test image: %w", err)
	}
	defer os.RemoveAll(dir)
	files := []struct {
		name string
		data []byte
		src  string
		mode os.FileMode
	}{
		{name: "Containerfile", data: agenttest.Containerfile, mode: 0o644},
		{name: "test-agent", data: agenttest.TestAgent, mode: 0o755},
		{name: "managed-settings.json", data: claudemd.ManagedSettings(), mode: 0o644},
		{name: "busybox", src: o.Busybox, mode: 0o755},
		{name: "ipc", src: o.IPC, mode: 0o755},
	}
	for _, f := range files {
		data := f.data
		if f.src != "" {
			if data, err = os.ReadFile(f.src); err != nil {
				return fmt.Errorf("build test image: %w", err)
			}
		}
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, data, f.mode); err != nil {
			return fmt.Errorf("build test image: %w", err)
		}
		if err := os.Chmod(p, f.mode); err != nil { // past the umask
			return fmt.Errorf("build test image: %w", err)
		}
	}

	cmd := exec.CommandContext(ctx, o.Engine, "build", "--quiet",
		"--file", filepath.Join(dir, "Containerfile"),
		"--build-arg", "CARAPACE_VERSION="+o.Version,
		"--tag", o.Tag, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build test image %s: %s build: %w\n%s", o.Tag, filepath.Base(o.Engine), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// EngineArch returns the engine's architecture as a GOARCH ("amd64",
// "arm64"): the machine the daemon (or Podman's VM) runs on, which may not
// be the one this process runs on.
func EngineArch(ctx context.Context, engine string) (string, error) {
	if engine == "" {
		engine = "docker"
	}
	args := []string{"version", "--format", "{{.Server.Arch}}"}
	if filepath.Base(engine) == "podman" {
		args = []string{"info", "--format", "{{.Host.Arch}}"}
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, engine, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ask %s for its architecture: %w: %s", engine, err, strings.TrimSpace(stderr.String()))
	}
	arch := strings.TrimSpace(string(out))
	switch arch {
	case "x86_64":
		arch = "amd64"
	case "aarch64":
		arch = "arm64"
	}
	if _, ok := machines[arch]; !ok {
		return "", fmt.Errorf("%s runs on %q: only amd64 and arm64 agent images are built", engine, arch)
	}
	return arch, nil
}

// machines maps the supported GOARCHes to their ELF machines.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// CheckStatic checks that path is a statically linked ELF executable for
// goarch: no program interpreter (PT_INTERP), the right machine. Errors
// wrap ErrNotStatic.
func CheckStatic(path, goarch string) error {
	want, ok := machines[goarch]
	if !ok {
		return fmt.Errorf("architecture %q is not supported", goarch)
	}
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	magic := make([]byte, len(elf.ELFMAG))
	if _, err := io.ReadFull(file, magic); err != nil || string(magic) != elf.ELFMAG {
		return fmt.Errorf("%s is not an ELF executable: %w", path, ErrNotStatic)
	}
	f, err := elf.NewFile(file)
	if err != nil {
		return fmt.Errorf("%s is not a valid ELF executable (%v): %w", path, err, ErrNotStatic)
	}
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, the engine runs %s: %w", path, f.Machine, goarch, ErrNotStatic)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is an ELF %s, not an executable: %w", path, f.Type, ErrNotStatic)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := readInterp(p)
			return fmt.Errorf("%s is dynamically linked (interpreter %s): %w", path, interp, ErrNotStatic)
		}
	}
	return nil
}

// readInterp reads the interpreter's path out of a PT_INTERP segment.
func readInterp(p *elf.Prog) (string, error) {
	b := make([]byte, min(p.Filesz, 4096))
	if _, err := p.ReadAt(b, 0); err != nil {
		return "?", err
	}
	return strings.TrimRight(string(b), "\x00"), nil
}
