// Package agentimage builds Carapace's agent image with the engine's CLI
// (docker, podman, container) and asks an engine whether it has one.
//
// BuildAgent builds the real agent image (Resources/agent): Claude Code on
// Node.js, which needs a registry and npm. Exists asks the engine whether
// it has an image. `carapace setup --build-image` and `make image-agent`
// build through this package; `carapace doctor` asks Exists.
//
// Build is the machinery underneath: it assembles a build context in a
// temporary folder from Files and runs the engine's build there, after
// Prepare has checked that the ipc and ipc-relay binaries are static ELF
// executables of the engine's architecture (a dynamically linked one would fail only
// inside the container, with a confusing "not found"). The offline test
// image is built with it too, by agentimagetest, which only the tests,
// `make image-test` and the benchmarks link: the shipping carapace does
// not carry the test image (cmd/carapace's TestDeps).
package agentimage

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	agentfiles "github.com/carapace-dev/carapace/Resources/agent"
	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/runtime"
)

// Options configure a build.
type Options struct {
	// Engine is the CLI: "docker" (the default), "podman", or a path to
	// either.
	Engine string
	// Tag names the image; empty means the image's own (the agent
	// image's is runtime.Image of Version).
	Tag string
	// IPC is the static linux ipc binary of the engine's architecture
	// (make build puts it in bin/linux-<arch>/ipc). Required.
	IPC string
	// Relay is the static linux ipc-relay binary of the engine's
	// architecture, the model API relay the entrypoint starts (make build
	// puts it in bin/linux-<arch>/ipc-relay); empty means ipc-relay beside
	// IPC.
	Relay string
	// Busybox is the static busybox of the offline test image
	// (agentimagetest.BuildTest; empty means its DefaultBusybox). The
	// agent image does not use it.
	Busybox string
	// Version is the Carapace version the image is labelled with
	// (carapace.version, org.opencontainers.image.version); empty means
	// "dev".
	Version string
	// Progress, if set, receives the engine's build output as it comes;
	// nil builds quietly.
	Progress io.Writer
}

// ErrNotStatic: a binary to copy into the image is not a static ELF
// executable of the engine's architecture.
var ErrNotStatic = errors.New("not a static linux executable of the engine's architecture")

// Registry is why building the agent image needs the network: its
// Containerfile starts from a Node.js base image from a registry and
// installs Claude Code with npm.
const Registry = "its base image, node:22-bookworm-slim, comes from a registry (Docker Hub), and Claude Code from npm"

// BuildAgent builds the agent image (Resources/agent) with the engine's
// CLI: Claude Code on Node.js, with the static linux ipc and ipc-relay
// binaries. It needs
// a registry and npm (see Registry); o.Busybox is not used. With
// o.Progress, the engine's output is shown as it comes.
func BuildAgent(ctx context.Context, o Options) error {
	if _, err := Prepare(ctx, &o, "agent image", runtime.Image(cmp.Or(o.Version, "dev"))); err != nil {
		return err
	}
	err := Build(ctx, o, []File{
		{Name: "Containerfile", Data: agentfiles.Containerfile, Mode: 0o644},
		{Name: "entrypoint.sh", Data: agentfiles.Entrypoint, Mode: 0o755},
		{Name: "managed-settings.json", Data: claudemd.ManagedSettings(), Mode: 0o644},
		{Name: "ipc", Src: o.IPC, Mode: 0o755},
		{Name: "ipc-relay", Src: o.Relay, Mode: 0o755},
	}, "")
	if err != nil {
		return fmt.Errorf("%w (%s: check that the engine can pull images and reach npm, or pick an image you have: carapace config set runtime.image IMAGE)", err, Registry)
	}
	return nil
}

// Prepare fills in o's defaults (tag: tag) and checks it: a version and
// a tag that are safe on a command line, and ipc and ipc-relay binaries
// that are static executables of the engine's architecture, which it
// returns.
// Its errors say what of the image (what) could not be built.
func Prepare(ctx context.Context, o *Options, what, tag string) (arch string, err error) {
	o.Engine = cmp.Or(o.Engine, "docker")
	o.Tag = cmp.Or(o.Tag, tag)
	o.Version = cmp.Or(o.Version, "dev")
	if o.IPC == "" {
		return "", fmt.Errorf("build %s: no ipc binary given (build one with `make build`: bin/linux-<arch>/ipc)", what)
	}
	if strings.ContainsAny(o.Version, " \t\n\"'\\$") || strings.HasPrefix(o.Tag, "-") || strings.ContainsAny(o.Tag, " \t\n") {
		return "", fmt.Errorf("build %s: bad version %q or tag %q", what, o.Version, o.Tag)
	}
	if arch, err = EngineArch(ctx, o.Engine); err != nil {
		return "", fmt.Errorf("build %s: %w", what, err)
	}
	if err := CheckStatic(o.IPC, arch); err != nil {
		return "", fmt.Errorf("build %s: ipc: %w (build it with CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o bin/linux-%s/ipc ./cmd/ipc, or make build)", what, err, arch, arch)
	}
	if o.Relay == "" {
		o.Relay = filepath.Join(filepath.Dir(o.IPC), "ipc-relay")
	}
	if err := CheckStatic(o.Relay, arch); err != nil {
		return "", fmt.Errorf("build %s: ipc-relay, the model API relay: %w (build it with CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o bin/linux-%s/ipc-relay ./cmd/ipc-relay, or make build)", what, err, arch, arch)
	}
	return arch, nil
}

// File is one file of a build context: Data, or the contents of the file
// Src, written with Mode.
type File struct {
	Name string
	Data []byte
	Src  string
	Mode os.FileMode
}

// Build writes files to a temporary build context and runs the engine's
// build in it (o as Prepare filled it in), with env added to the
// environment (docker's only).
func Build(ctx context.Context, o Options, files []File, env string) error {
	dir, err := os.MkdirTemp("", "carapace-image-")
	if err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, f := range files {
		data := f.Data
		if f.Src != "" {
			if data, err = os.ReadFile(f.Src); err != nil {
				return fmt.Errorf("build image: %w", err)
			}
		}
		p := filepath.Join(dir, f.Name)
		if err := os.WriteFile(p, data, f.Mode); err != nil {
			return fmt.Errorf("build image: %w", err)
		}
		if err := os.Chmod(p, f.Mode); err != nil { // past the umask
			return fmt.Errorf("build image: %w", err)
		}
	}
	args := []string{"build"}
	if o.Progress == nil {
		args = append(args, "--quiet")
	}
	args = append(args,
		"--file", filepath.Join(dir, "Containerfile"),
		"--build-arg", "CARAPACE_VERSION="+o.Version,
		"--tag", o.Tag, dir)
	cmd := exec.CommandContext(ctx, o.Engine, args...)
	name := filepath.Base(o.Engine)
	if env != "" && name != "podman" && name != "container" {
		cmd.Env = append(os.Environ(), env)
	}
	// The last lines of the output say why a build failed; with
	// Progress, every line goes there as it comes too.
	last := &tail{}
	var w io.Writer = last
	if o.Progress != nil {
		w = io.MultiWriter(last, o.Progress)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build image %s: %s build: %w\n%s", o.Tag, name, err, strings.TrimSpace(string(last.b)))
	}
	return nil
}

// tail keeps the last tailSize bytes written to it: the end of a build's
// output, which says why it failed. exec.Cmd calls Write from one
// goroutine at a time when Stdout and Stderr are the same writer.
type tail struct{ b []byte }

const tailSize = 2 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailSize {
		t.b = t.b[len(t.b)-tailSize:]
	}
	return len(p), nil
}

// Exists reports whether the engine has the image ref. An engine that does
// not answer is an error, not a missing image.
func Exists(ctx context.Context, engine, ref string) (bool, error) {
	if strings.HasPrefix(ref, "-") || ref == "" {
		return false, fmt.Errorf("%q is not an image reference", ref)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, engine, "image", "inspect", ref)
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	if err == nil {
		return true, nil
	}
	msg := stderr.String()
	var exit *exec.ExitError
	if errors.As(err, &exit) && notFoundRE.MatchString(msg) {
		return false, nil
	}
	return false, fmt.Errorf("%s image inspect %s: %w: %s", filepath.Base(engine), ref, err, strings.TrimSpace(msg))
}

// notFoundRE matches the engines' "no such image" messages: Docker's "No
// such image", Podman's "image not known" / "failed to find image", Apple
// container's "notFound".
var notFoundRE = regexp.MustCompile(`(?i)no such image|image not known|failed to find image|not ?found`)

// EngineArch returns the engine's architecture as a GOARCH ("amd64",
// "arm64"): the machine the daemon (or Podman's VM) runs on, which may not
// be the one this process runs on.
func EngineArch(ctx context.Context, engine string) (string, error) {
	if engine == "" {
		engine = "docker"
	}
	if filepath.Base(engine) == "container" {
		return "arm64", nil // Apple container runs on Apple silicon only
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
